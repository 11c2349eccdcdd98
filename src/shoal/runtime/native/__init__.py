"""The native executor: the step's task graph run by compiled worker threads.

- :mod:`.primitives`: atomics, a cheap clock, a pause and a futex for compiled code;
- :mod:`.engine`: the worker loop (counters, queues, reductions, halos, trace rows);
- :mod:`.trampoline`: how a worker runs a phase an app leaves in Python;
- :mod:`.plan`: what an app declares to run natively (:class:`Native`) and its memory layout;
- :mod:`.executor`: :class:`NativeExecutor`, the Python executor's interface over all of it.
"""

from .engine import KERNEL
from .executor import NativeExecutor
from .plan import Native


def compiles(app, tiling) -> bool:
    """Whether ``--executor auto`` picks the native executor: it runs some of ``app``'s phases
    compiled on ``tiling``, and the app asks for that by default (``App.native_by_default``)."""
    return app.native_by_default and app.native(tiling) is not None


__all__ = ["KERNEL", "Native", "NativeExecutor", "compiles"]
