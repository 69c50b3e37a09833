"""What a kind of parent job writes: its policy over the one parent-run loop (`distrun.runner.parent_run`).

The loop records the parent, takes it over, starts each child through `distrun.runner.jobs.start_child`,
follows the children's records (an engine's at most every `ENGINE_LOOK_SECONDS`), waits for the
next child's end, cancels them all on Ctrl-C or `distrun job cancel`, and records the end. A
policy says what differs: which children start next, what a child's end means, when to stop
every child, and what the outcome is. It keeps each child's state (the record's `steps`) and
says its own lines; it never submits, reads or cancels a job itself.

A child is known by its key (a pipeline's step, a sweep's `trial_N`) and runs as a job of its
own, named by `job_name(key)`. A new kind of parent is one module with a class that has these
members, and one row in `distrun.runner.job_kinds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from distrun.core.job_kind import JobKind
    from distrun.spec.loaded import LoadedJob
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

Say = Callable[[str], None]


class Look(NamedTuple):
    """What a policy's look at a running child found."""

    changed: bool = False  # the child's state changed: the parent's record is saved
    stop: str | None = None  # a reason to stop the child now (a sweep's early termination policy)


@dataclass(frozen=True)
class DetachedParent:
    """A parent to record and start in the background, as plain data.

    `kind`: its row in `distrun.runner.job_kinds`. `header`: its model (its `display_name`,
    `experiment_name` and `tags` are the record's). `compute`: its own record's `compute` (its
    children name theirs). `fields`: its record's `steps` and the kind's own fields (a sweep's
    `sweep`). `request`: what the supervisor loads (`file`, `overrides`, `compute`, `base_dir`
    and the kind's own keys). `built`: a parent built in Python, its document kept in its folder
    as `built_file` and loaded from there."""

    kind: str
    name: str
    header: Any
    compute: str
    fields: dict[str, Any]
    request: dict[str, Any]
    built: dict[str, Any] | None = None
    built_file: str = ""


@runtime_checkable
class ParentPolicy(Protocol):
    kind: ClassVar[JobKind]  # its row in `distrun.runner.job_kinds`
    record_compute: ClassVar[str]  # the `compute` of the parent's own record: its children name theirs
    built_file: ClassVar[str]  # a parent built in Python is kept in its folder under this name
    canceled_why: ClassVar[str]  # why a child canceled with its parent (Ctrl-C, `job cancel`) ended
    longest_wait: ClassVar[float]  # the longest wait between two looks at the children (seconds)

    name: str  # the parent's job name
    spec: Any  # the parent's model: its `display_name`, `experiment_name` and `tags` are the record's
    machine_types: list[str]  # the compute types of its children that run on this machine

    def __init__(
        self, loaded: Any, layout: Layout, say: Say, compute: str | None, name: str, capacity: int | None
    ) -> None:
        """Check the parent (its children's targets) as `distrun job validate` would: nothing recorded."""

    # ------------------------------------------------------------ the record

    def steps(self) -> dict[str, Any]:
        """The record's `steps`: each child's state, saved whenever the loop or the policy changed it."""
        ...

    def record_fields(self) -> dict[str, Any]:
        """The kind's own fields of the parent's first record (a sweep's `sweep`)."""
        ...

    def final_fields(self) -> dict[str, Any]:
        """The kind's own fields of the parent's final record (a pipeline's `root_cause`)."""
        ...

    # ------------------------------------------------------------ the children

    def begin(self) -> str:
        """The run begins: the line said after its RunId."""
        ...

    def to_start(self) -> Iterator[str]:
        """The children to start now, in order, each key given once its state is made (Queued):
        asked again after each start, so what one start changed is seen by the next."""
        ...

    def child(self, key: str) -> LoadedJob | DetachedParent | None:
        """What the child runs: its job, loaded and checked as a job file is, or a parent of its
        own (a pipeline's sweep step); None: it needs no job (reused, and recorded so)."""
        ...

    def job_name(self, key: str) -> str: ...

    def started(self, key: str, record: JobRecord) -> None:
        """The child's job was recorded and started: its state from `record`, said."""
        ...

    def running(self) -> list[str]:
        """The children started and not ended."""
        ...

    def looked(self, key: str, record: JobRecord | None) -> Look:
        """A look at a running child: `record` is its job's record, or None between an engine's
        looks. The child's state from a record that did not end (one that ended goes to `outcome_of`)."""
        ...

    def outcome_of(self, key: str, record: JobRecord) -> tuple[str, str | None]:
        """The child's status and reason once its job ended (a sweep step without a best trial failed)."""
        ...

    def ended(self, key: str, status: str, reason: str | None) -> str | None:
        """The child ended (or could not start): its state, said. A reason to stop every other
        child now (a pipeline's failed step), else None."""
        ...

    def stop_reason(self) -> str | None:
        """A reason to stop every child now (a sweep's timeout), said; else None."""
        ...

    def stop_starting(self, why: str) -> None:
        """Start no other child (the children not started end so, where the record lists them)."""
        ...

    def canceled(self, key: str, record: JobRecord, why: str) -> tuple[str, str | None] | None:
        """The child's job was canceled (`record` its record after the cancel): the status and
        reason it ends with, or None when the policy recorded and said it itself."""
        ...

    def not_canceled(self, key: str, why: str) -> None:
        """The child's job could not be canceled (`why`): kept in its state."""
        ...

    # ------------------------------------------------------------ the end

    def finished(self) -> bool:
        """No child runs and none will start: the loop ends."""
        ...

    def outcome(self) -> tuple[str, str | None]:
        """The parent's status and reason once finished."""
        ...

    # ------------------------------------------------------------ the faces

    @staticmethod
    def runs(loaded: Any) -> bool:
        """Whether this kind runs `loaded` (what the loader made of a file)."""
        ...

    @staticmethod
    def requested(request: dict[str, Any]) -> Any:
        """What a background supervisor runs, loaded from the request `detached` made."""
        ...

    @staticmethod
    def summary(record: JobRecord) -> str:
        """The parent's execution summary, said when it ends."""
        ...
