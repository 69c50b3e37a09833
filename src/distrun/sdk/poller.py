"""What azure-ai-ml's `begin_*` calls return: azure-core's LROPoller, as far as notebooks use it."""

from __future__ import annotations

import threading
from typing import Any


class Poller:
    """azure-core's LROPoller, as far as notebooks use it: result(), wait(), done(), status()."""

    def __init__(self, thread: threading.Thread | None, outcome: dict[str, Any]) -> None:
        self._thread = thread
        self._outcome = outcome

    @classmethod
    def finished(cls, value: Any) -> Poller:
        return cls(None, {"value": value})

    @classmethod
    def start(cls, work: Any) -> Poller:
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = work()
            except BaseException as exc:  # handed to whoever calls result()
                outcome["error"] = exc

        # Not a daemon: the interpreter waits for the operation before it exits.
        thread = threading.Thread(target=run, name="distrun-operation")
        thread.start()
        return cls(thread, outcome)

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def result(self, timeout: float | None = None) -> Any:
        self.wait(timeout)
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome.get("value")

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def status(self) -> str:
        if not self.done():
            return "InProgress"
        return "Failed" if "error" in self._outcome else "Succeeded"
