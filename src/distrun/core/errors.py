"""distrun's own error types.

Every error a user can cause is a `DistrunError`; the CLI prints its message and exits
non-zero, never a traceback. `ValidationError` carries one `Problem` per thing wrong, each
with where it is (file:line:col and key path), what was expected and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    """Where a value came from: a file position, or a command-line override."""

    source: str  # a file path, or "--set" for an override
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        if self.line is None:
            return self.source
        if self.column is None:
            return f"{self.source}:{self.line}"
        return f"{self.source}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job: where, which key, what, and how to fix it."""

    message: str
    key_path: str = ""
    position: Position | None = None
    hint: str = ""

    def render(self) -> str:
        where = str(self.position) if self.position else "<job>"
        key = f" {self.key_path}:" if self.key_path else ""
        text = f"{where}:{key} {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


def _neutral(text: str) -> str:
    from distrun.core.terminal_text import neutral_text

    return neutral_text(text)


class DistrunError(Exception):
    """An error distrun explains to the user; the CLI prints it without a traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        # Messages quote names and values from the user's input: shown, never obeyed, by the terminal.
        return _neutral(self.message + (f"\n    hint: {self.hint}" if self.hint else ""))


class ResourceNotFoundError(DistrunError, LookupError):
    """The SDK asked for something distrun does not have (a compute target, an environment):
    what azure-core's ResourceNotFoundError is to azure-ai-ml's `get` calls."""


class NotSupportedYetError(DistrunError, NotImplementedError):
    """An Azure ML SDK call distrun accepts the import of but does not run yet (pipelines, sweeps)."""


class ValidationError(DistrunError):
    """A job specification (YAML, overrides or SDK objects) is invalid."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.problems)
        head = "invalid job: 1 problem" if count == 1 else f"invalid job: {count} problems"
        return _neutral(head + "\n" + "\n".join("  " + p.render().replace("\n", "\n  ") for p in self.problems))

    def __str__(self) -> str:
        return self.render()


class JobNotFoundError(DistrunError):
    """A job name that the store does not know."""


class JobAlreadyEndedError(DistrunError):
    """`job cancel` of a job that had already ended: nothing was canceled."""

    exit_code = 1

    def __init__(self, name: str, status: str, reason: str | None) -> None:
        why = f": {reason}" if reason and status != "Completed" else ""
        super().__init__(
            f"job {name} had already ended ({status}{why}); nothing to cancel",
            f"see it with `distrun job show {name}`",
        )


class JobFailedError(DistrunError):
    """A job ended Failed; carries the root cause (rank, node, exit, traceback)."""

    exit_code = 1

    def __init__(self, job_name: str, status: str, root_cause: dict | None) -> None:
        self.job_name = job_name
        self.status = status
        self.root_cause = root_cause or {}
        self.rank = self.root_cause.get("rank")
        self.node_rank = self.root_cause.get("node_rank")
        self.traceback = self.root_cause.get("traceback", "")
        # Without a traceback: the last lines of its log (`python: can't open file ...`).
        self.log_tail = self.root_cause.get("log_tail", "")
        reason = self.root_cause.get("reason", status)
        super().__init__(f"job {job_name} {status.lower()}: {reason}")
