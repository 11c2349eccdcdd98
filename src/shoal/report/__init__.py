"""Pictures and tables from a run folder (a measured run or a predicted one)."""

from .run_report import report_run

__all__ = ["report_run"]
