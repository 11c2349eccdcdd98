"""What every benchmark shares: repeats with median and spread, and where it ran."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import numpy as np

REPEATS = 5


def median_spread(values) -> tuple[float, float]:
    """Median and relative spread (max - min over median) of repeated measurements."""
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    return med, float(np.ptp(v) / med) if med else 0.0


def host() -> str:
    """One line on where a benchmark ran: CPU, cores, load, versions, commit."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numba

    import shoal

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} cores, load {load}; Python {platform.python_version()}, NumPy {np.__version__}, "
            f"Numba {numba.__version__}, shoal {shoal.__version__} ({commit})")
