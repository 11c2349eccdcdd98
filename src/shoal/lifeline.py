"""Child processes that do not outlive their parent.

A study starts its simulations, a run its viewer and a viewer its runs as child processes. When
the parent ends normally it stops them itself; when it is killed outright (SIGKILL, an OOM kill)
it cannot, and a child would run on with nobody reading it. A child started with
:func:`child_env` therefore watches its parent and, once the parent is gone, interrupts itself as
Ctrl-C would: a run stops at its next step boundary and writes its checkpoint, a viewer shuts
down.
"""

from __future__ import annotations

import os
import signal
import threading

#: The environment variable that carries the parent's process id to the child.
PARENT_VARIABLE = "SHOAL_PARENT_PID"
#: Seconds between two looks at the parent.
INTERVAL_S = 0.5


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to start a child with so that it watches this process.

    Parameters
    ----------
    env : dict, optional
        The environment to extend (default this process's).
    """
    return {**(os.environ if env is None else env), PARENT_VARIABLE: str(os.getpid())}


def watch_parent(interval_s: float = INTERVAL_S) -> threading.Thread | None:
    """When this process was started with :func:`child_env`, send it SIGINT once its parent is
    gone (a daemon thread looks every ``interval_s``); return the thread, or ``None`` when
    there is no parent to watch (the variable is unset, or the parent has already gone)."""
    text = os.environ.pop(PARENT_VARIABLE, "")  # our own children watch us, not our parent
    if not text.isdigit() or os.getppid() != int(text):
        return None
    parent = int(text)
    stopped = threading.Event()

    def look() -> None:
        while not stopped.wait(interval_s):
            if os.getppid() != parent:  # re-parented: the parent died
                os.kill(os.getpid(), signal.SIGINT)
                # A run asks for a second Ctrl-C to interrupt at once: the first one stops it
                # at the step boundary, which is what an orphan should do; look no more.
                return

    thread = threading.Thread(target=look, name="shoal-lifeline", daemon=True)
    thread.start()
    return thread
