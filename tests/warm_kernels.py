"""Compile shoal's Numba kernels once, before the test suite runs in parallel workers.

On a fresh clone nothing is cached, and the suite's two workers each compile the kernels the
first test of every app needs, often the same ones at the same time: about five minutes of a
cold run on two busy cores went to compiling. Run first (``make test`` does), this script
compiles the native worker loop and what moves native MPI messages in one process, and every
app's kernels once, an app per process (each app's kernels in one process: never twice), by
running every built-in scenario for two steps as ``tests/test_scenarios.py`` does and one
replay, on both executors where the native one meets a new table of compiled kernels (an app's
kernels compile per variant; the worker loop once, its tables padded to one length); the
workers then load them from Numba's cache.

    python tests/warm_kernels.py [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # test_scenarios' shrunk worlds


def compiled_kernels(scenario: str) -> tuple | None:
    """The compiled phase kernels and packers the native executor runs the scenario with (what
    its worker loop is compiled for), or ``None`` when its phases stay in Python."""
    from shoal.apps import get_app
    from shoal.config import load_scenario
    from shoal.tiling import Tiling
    from test_scenarios import SHRINK

    sc = load_scenario(scenario)
    sc.override(SHRINK.get(scenario, []))
    app = get_app(sc.app).build(sc.params, 2)
    native = app.native(Tiling.from_count(app.grid, 1))
    return None if native is None else (*native.kernels.values(), *native.packers.values())


def engine() -> float:
    """Compile the native worker loop (one for every app: its tables are padded to one length)
    and what moves native MPI messages, before any app's native run needs them (two processes
    would otherwise compile them at once); seconds taken."""
    from shoal.runtime.native.engine import warm as warm_engine
    from shoal.runtime.native.engine import warm_messages
    from shoal.runtime.native.executor import _slots
    from shoal.runtime.native.plan import noop_kernel, noop_packer

    start = time.perf_counter()
    warm_engine(_slots((), noop_kernel), _slots((), noop_packer), 1, 1)
    warm_messages()
    return time.perf_counter() - start


def warm(scenarios: list[str]) -> float:
    """Run ``scenarios`` for two steps each (their kernels compile and are cached), on the
    Python executor first (the native runs last: by then :func:`engine` has compiled the worker
    loop); seconds taken."""
    from shoal.session import run_scenario
    from test_scenarios import SHRINK

    start = time.perf_counter()
    seen = set()  # the kernel tables compiled so far
    runs = [(name, "python") for name in scenarios]
    for k, name in enumerate(scenarios):
        # Natively too: the first scenario of each kernel table (an app's kernels compile per
        # variant), and the first of all (no compiled phase).
        table = compiled_kernels(name)
        if k == 0 or (table is not None and table not in seen):
            runs.append((name, "native"))
        seen.add(table)
    with tempfile.TemporaryDirectory(prefix="shoal-warm-") as folder:
        for name, executor in runs:
            run_scenario(name, steps=2, nodes=2, workers=1, tiles=8, out=Path(folder) / f"{name}-{executor}",
                         set=SHRINK.get(name, []) + ["run.frame_every=0"], executor=executor)
        if "synthetic-hotspot" in scenarios:  # the replay's engine too
            from shoal.replay import ReplayConfig, replay
            from shoal.trace import Trace

            replay(Trace.read(Path(folder) / "synthetic-hotspot-python"), ReplayConfig(nodes=2, cores=2))
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    args = ap.parse_args()
    from shoal.config import builtin_scenarios, load_scenario

    by_app = defaultdict(list)
    for name in builtin_scenarios():
        by_app[load_scenario(name).app].append(name)
    groups = sorted(by_app.values(), key=len, reverse=True)
    start = time.perf_counter()
    with ProcessPoolExecutor(max(1, min(args.jobs, len(groups) + 1))) as pool:
        first = pool.submit(engine)
        seconds = list(pool.map(warm, groups))
    apps = ", ".join(f"{load_scenario(group[0]).app} {s:.0f} s" for group, s in zip(groups, seconds, strict=True))
    print(f"compiled the kernels of {len(groups)} apps ({sum(map(len, groups))} scenarios) in "
          f"{time.perf_counter() - start:.0f} s (the worker loop {first.result():.0f} s, {apps})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
