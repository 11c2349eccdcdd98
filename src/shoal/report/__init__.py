"""Pictures and tables from a run folder (a measured run or a predicted one).

- :mod:`~shoal.report.run_report` — :func:`report_run`, what ``shoal report`` draws;
- :mod:`~shoal.report.loads` — load per node over steps, per tile, placements over time;
- :mod:`~shoal.report.timeline` — tasks per core, or each core's utilisation for many cores;
- :mod:`~shoal.report.sweep_plots`, :mod:`~shoal.report.lif_figures`, :mod:`~shoal.report.particles`
  — a sweep's figures, the LIF model's, particle views.

Figures are drawn on canvases of :mod:`shoal.graphics`; ParaView files are
:mod:`shoal.graphics.vtk`'s.

Importing it leaves the caller's matplotlib backend as it was. A trace for zooming in
Perfetto is :func:`shoal.perfetto.export`.
"""

from .run_report import report_run

__all__ = ["report_run"]
