"""What watching a run live costs it: the step time of a viewed run over an unviewed one.

The 2D dam break at ``app.dx=0.005`` (~85k particles, a step of tens of milliseconds) runs
``--steps`` steps without a viewer and with one, in the same repeat, and the ratio is taken
within each repeat (median of ``--repeats`` with its spread; target <= 1.05). The viewed run
feeds ``shoal view --attach`` (the real viewer, a child process as ``shoal run --view``
starts it; with no page connected it still reads every message), with the view's default
frame interval unless ``--view-every`` says. Both runs write no frames to disk.

The run thread's part of a frame is timed too: gathering the state and the app's frame
arrays (``LiveView._offer_frame``, run thread) and encoding them (the feed's thread), per
frame, from the viewed runs.

Run: ``python bench/view.py [--steps 300] [--repeats 5] [--view-every K] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import Benchmark, add_arguments, repeat
from shoal.live import feed
from shoal.session import run_scenario
from shoal.view.attach import start_viewer

SCENARIO = "sph-dam-break"
SETTINGS = ["app.dx=0.005", "run.frame_every=0"]


def timed(fn, seconds: list[float]):
    """``fn``, appending the seconds of each call to ``seconds``."""
    def wrapper(*args, **kw):
        tic = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            seconds.append(time.perf_counter() - tic)
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="steps of each run (default 300)")
    ap.add_argument("--view-every", type=int, help="steps between frames (default: the view's default)")
    add_arguments(ap)
    args = ap.parse_args()
    offer, encode = [], []  # seconds per frame
    feed.LiveView._offer_frame = timed(feed.LiveView._offer_frame, offer)
    feed.frame_message = timed(feed.frame_message, encode)
    frames = []
    with Benchmark("view", args) as bench, tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))

        def run(view=None) -> dict:
            rec = run_scenario(SCENARIO, steps=args.steps, set=SETTINGS, out=Path(tmp) / f"run{next(counter)}",
                               view=view, view_every=args.view_every)
            return rec.summary

        def once() -> dict:
            plain = run()
            viewer = start_viewer()
            if viewer is None:
                raise SystemExit("shoal view --attach did not start")
            try:
                viewed = run(viewer.socket)
            finally:
                viewer.close()
            frames.append(viewed["view"])
            return {"plain": plain["step_time_mean_s"], "viewed": viewed["step_time_mean_s"],
                    "ratio": viewed["step_time_mean_s"] / plain["step_time_mean_s"]}

        run()  # compile the kernels outside the measurement
        offer.clear()
        encode.clear()
        stats = repeat(once, args.repeats)
        every = args.view_every or feed.default_every(args.steps)
        sent = sum(f["frames_sent"] for f in frames)
        dropped = sum(f["frames_dropped"] for f in frames)
        print(f"{SCENARIO} {' '.join(SETTINGS)}, {args.steps} steps, a frame every {every} steps")
        print(f"{'':>10} {'step (ms)':>14}")
        print(f"{'unviewed':>10} {stats['plain'].show(1e3):>14}")
        print(f"{'viewed':>10} {stats['viewed'].show(1e3):>14}")
        print(f"ratio viewed/unviewed: {stats['ratio'].show(1, 3)} (target <= 1.05)")
        print(f"per frame: gather + app frame {_ms(offer)} ms on the run thread, encode "
              f"{_ms(encode)} ms on the feed's; {sent} frames sent, {dropped} dropped")
        bench.add(scenario=SCENARIO, settings=SETTINGS, steps=args.steps, view_every=every, **stats,
                  frames_sent=sent, frames_dropped=dropped, offer_s=offer, encode_s=encode)


def _ms(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    s = sorted(seconds)
    return f"{s[len(s) // 2] * 1e3:.1f}"


if __name__ == "__main__":
    main()
