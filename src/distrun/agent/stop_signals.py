"""The signals that stop a job (Ctrl-C, `job cancel`, a closed terminal), held, never fatal.

Python's defaults end the process at once (SIGTERM, SIGHUP) or raise anywhere (SIGINT). Before
the gang starts and after it ends, that would leave a job recorded as Starting or Running
with nobody to finish the record, or processes started after a cancel was asked for. So
from the moment a launcher takes a job until its record is written, these signals are only
noted; the gang acts on the ones that arrive before or while it runs, and a signal that
arrives after the processes ended changes nothing: the job's own end won the race.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block them in this thread while starting a background launcher: a child inherits the
    mask and keeps it across exec, so a cancel that arrives while the launcher is still starting
    Python waits for its `held_stop_signals`. (Done in the parent, not between fork and exec:
    the SDK may start launchers from a process with threads.) Any that arrive here meanwhile
    are delivered when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def held_stop_signals() -> Iterator[list[int]]:
    """Note stop signals in the yielded list (oldest first) until the block ends."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received  # only the main thread can handle signals; its own handlers stay
        return

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # delivers any held since exec
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
