"""The gang's stop signals: noted by a handler, woken through the loop's selector, turned into a stop.

A signal handler only appends to a list (the one `GangOptions.signals` names, where signals
that came before the gang started already wait) and writes to a wakeup pipe that the gang's
selector watches, so the loop sees the signal in the turn it arrives; what the signal means
(a cancel, a preemption, a second Ctrl-C) is decided in the loop, not in the handler.
"""

from __future__ import annotations

import os
import selectors
import signal
import threading
from collections.abc import Callable

from distrun.agent.gang_state import GangStop
from distrun.agent.outcome import CANCELED, PREEMPTED, signal_name
from distrun.agent.stop_signals import STOP_SIGNALS

WAKE = "wake"  # the selector key's kind of the wakeup pipe


class StopSignalInbox:
    """The stop signals received and not yet acted on, oldest first."""

    def __init__(self, signals: list[int] | None, handle: bool) -> None:
        self.signals: list[int] = signals if signals is not None else []
        self.handle = handle

    def install(self, selector: selectors.BaseSelector) -> Callable[[], None]:
        """Handle the stop signals from now on (main thread only); returns what puts the old handlers back."""
        if not self.handle or threading.current_thread() is not threading.main_thread():
            return lambda: None
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        selector.register(wake_r, selectors.EVENT_READ, (WAKE, None))
        previous_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous_fd)
            os.close(wake_r)
            os.close(wake_w)

        return restore

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    def take(self) -> int | None:
        """The oldest signal not acted on yet, or None."""
        return self.signals.pop(0) if self.signals else None

    @staticmethod
    def drain_wakeup(fd: int) -> None:
        try:
            while os.read(fd, 512):
                pass
        except (BlockingIOError, OSError):
            pass


def stop_for_signal(
    signum: int, preempted_by: Callable[[int], bool] | None, grace_period: float
) -> tuple[str, GangStop]:
    """What a stop signal to a gang that is not stopping yet says to the user, and the stop it begins."""
    if preempted_by is not None and preempted_by(signum):
        said = (
            f"distrun: {signal_name(signum)} from outside: the job is preempted; every process gets "
            f"{grace_period:g} s to save its work"
        )
        return said, GangStop(PREEMPTED, f"preempted ({signal_name(signum)} from outside)")
    how = "canceled" if signum != signal.SIGHUP else "canceled: the terminal closed"
    reason = how if signum == signal.SIGHUP else f"{how} ({signal_name(signum)})"
    return stopping_message(signum, grace_period), GangStop(CANCELED, reason)


def stopping_message(signum: int, grace_period: float) -> str:
    """What a user who pressed Ctrl-C waits for, and how not to wait (ranks may ignore SIGTERM)."""
    text = f"distrun: {signal_name(signum)} received, stopping the job: SIGTERM sent to every process"
    if grace_period > 0:
        text += f"; those still running in {grace_period:g} s are killed"
        if signum == signal.SIGINT:
            text += " (press Ctrl-C again to kill them now)"
    return text
