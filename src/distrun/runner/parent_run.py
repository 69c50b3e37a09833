"""The one run of a job with children: a pipeline's steps, a sweep's trials.

A parent has a record of its own, with no processes, its children under `steps`, and this
process as its supervisor. Each child is a distrun job of its own (its own folder, record naming
the parent, per-rank logs, root cause and restarts), started through the orchestrator's one
entry for children (`distrun.runner.jobs.start_child`), exactly as `distrun job create` starts
a job file; a child that is itself a parent (a pipeline's sweep step) is started as
`distrun run -d` starts one. Nothing here knows an engine: `get_job` refreshes an engine's job
by asking the engine, which is done at most every `ENGINE_LOOK_SECONDS` a child.

The loop is written once:

    record (or take over what `run -d` recorded) -> until finished: follow the running children,
    stop them all if the policy says so, start what the policy says, wait for a child's end
    -> Ctrl-C / `job cancel` (SIGTERM): cancel every running child -> record the outcome

and the kind's policy (`distrun.runner.parent_policy`, one per row of
`distrun.runner.job_kinds`) decides which children start next, what a child's end means and
what the outcome is. A child whose supervisor is a process of this machine is waited on through
a pidfd (`distrun.runner.child_exits`); local children's supervisors are forked from one launcher
server (`launchers_for`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.runner import jobs
from distrun.runner.child_exits import ChildExits

if TYPE_CHECKING:
    from distrun.runner.parent_policy import ParentPolicy
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

# How often the engine running a child is asked about it, as `distrun run` asks about a job
# (`distrun.runner.attach.POLL_S`): each look is a request to the engine (on Slurm, `scontrol
# show job`, an RPC to slurmctld), which a scheduler's users must not send many times a second.
ENGINE_LOOK_SECONDS = 0.5


class ParentRun:
    """A parent job run to its end by this process, its kind's `policy` deciding what differs."""

    def __init__(self, policy: ParentPolicy, layout: Layout, say: Callable[[str], None], compute: str | None) -> None:
        from distrun.store.index import JobIndex

        self.policy = policy
        self.layout = layout
        self.say = say
        self.compute = compute
        self.name = policy.name
        self.index = JobIndex(layout.db_path)
        self.exits = ChildExits()
        self.looked: dict[str, float] = {}  # when the engine was last asked about each child it runs

    @classmethod
    def of(
        cls,
        loaded: Any,
        layout: Layout,
        say: Callable[[str], None],
        compute: str | None = None,
        name: str | None = None,
        capacity: int | None = None,
    ) -> ParentRun:
        """The run of a loaded pipeline or sweep (its kind's policy), checked: nothing recorded yet."""
        from distrun.prepare.submission import generate_name
        from distrun.runner.job_kinds import policy_for

        name = name or loaded.spec.name or generate_name()
        return cls(policy_for(loaded)(loaded, layout, say, compute, name, capacity), layout, say, compute)

    # ------------------------------------------------------------ the record

    def record(self, status: JobStatus = JobStatus.RUNNING) -> None:
        """Record the parent (no child started), this process its supervisor."""
        from distrun.runner.parent_record import record_parent

        policy = self.policy
        fields = {"steps": policy.steps(), **policy.record_fields()}
        record_parent(
            self.index,
            self.layout,
            self.name,
            status,
            policy.spec,
            kind=policy.kind,
            compute=policy.record_compute,
            **fields,
        )

    def _save(self) -> None:
        self.index.update(self.name, steps=self.policy.steps())

    # ------------------------------------------------------------ running

    def run(self, recorded: bool = False, on_recorded: Callable[[], None] | None = None) -> JobRecord:
        """Run the children until the parent ends; its final record. `recorded`: `record` was
        called (by `distrun run -d`, which started this process). `on_recorded`: called once the
        parent's record is this run's (`distrun run` then follows the children's output)."""
        from distrun.prepare.submission import interrupts_raised
        from distrun.runner.parent_record import taken_over

        if not taken_over(self.index, self.name, recorded, self.record):
            return self.index.get(self.name)  # canceled before it started
        if on_recorded is not None:
            on_recorded()
        self.say(f"RunId: {self.name}")
        self.say(self.policy.begin())
        try:
            with interrupts_raised(), launchers_for(self.policy.machine_types, self.layout.home):
                while True:
                    self._follow()
                    why = self.policy.stop_reason()
                    if why is not None:
                        self._cancel_all(why)
                    for key in self.policy.to_start():
                        self._start(key)
                    if self.policy.finished():
                        break
                    self.exits.wait(self.policy.running(), self.policy.longest_wait)
        except KeyboardInterrupt:
            self._cancel_all(self.policy.canceled_why)
            return self._finish(JobStatus.CANCELED, "canceled by the user")
        finally:
            self.exits.close()
        return self._finish(*self.policy.outcome())

    def _start(self, key: str) -> None:
        """Start the child's job; one that cannot start ends Failed, "not started"."""
        job = self.policy.job_name(key)
        try:
            child = self.policy.child(key)
            if child is None:
                self._save()
                return
            said = functools.partial(self._note, key)
            record = jobs.start_child(child, self.layout, self.compute, job, self.name, said)
        except DistrunError as exc:
            self._ended(key, JobStatus.FAILED, f"not started: {exc.render()}")
            return
        if record.backend_id:  # an engine's job: asked about at most every ENGINE_LOOK_SECONDS
            self.looked[key] = time.monotonic()
        self.exits.watch(key, record)
        self.policy.started(key, record)
        self._save()

    def _note(self, key: str, text: str) -> None:
        self.say(f"[{key}] note: {text}")

    def _follow(self) -> None:
        """Look at each running child: its record when due (an engine's at most every
        ENGINE_LOOK_SECONDS, any other's each time), and the policy's own look (a trial's metrics)."""
        now = time.monotonic()
        running = self.policy.running()
        due = set(due_looks(running, self.looked, now))
        for key in running:
            if key not in self.policy.running():
                continue  # ended since the list was made (canceled after another child failed or was stopped)
            record = None
            if key in due:
                if key in self.looked:
                    self.looked[key] = now
                try:
                    record = jobs.get_job(self.layout, self.policy.job_name(key))
                except DistrunError as exc:  # its record was removed or damaged: the child is lost
                    self._ended(key, JobStatus.FAILED, f"its job's record cannot be read: {exc.message}")
                    continue
            look = self.policy.looked(key, record)
            if look.stop is not None:
                self._cancel(key, look.stop)
            elif record is not None and record.terminal:
                self._ended(key, *self.policy.outcome_of(key, record))
            elif look.changed:
                self._save()

    def _ended(self, key: str, status: str, reason: str | None) -> None:
        self.exits.forget(key)
        why = self.policy.ended(key, status, reason)
        if why is not None:
            self._cancel_all(why)
        self._save()

    def _cancel(self, key: str, why: str) -> None:
        """Cancel a child's job (waiting its grace period); its record says why."""
        try:
            record = jobs.cancel_job(self.layout, self.policy.job_name(key))
        except DistrunError as exc:
            self.policy.not_canceled(key, f"could not be canceled: {exc.message}")
            return
        if record.terminal:
            self.exits.forget(key)
        ended = self.policy.canceled(key, record, why)
        if ended is not None:
            self._ended(key, *ended)

    def _cancel_all(self, why: str) -> None:
        """Cancel every running child's job (each waits its grace period), and start no other."""
        self.policy.stop_starting(why)
        for key in self.policy.running():
            self._cancel(key, why)
        self._save()

    def _finish(self, status: str, reason: str | None) -> JobRecord:
        self.index.update(
            self.name,
            only_if_not_terminal=False,
            status=status,
            reason=reason,
            ended_at=time.time(),
            steps=self.policy.steps(),
            **self.policy.final_fields(),
        )
        return self.index.get(self.name)


def launchers_for(machine_types: Iterable[str], home: Any) -> AbstractContextManager[None]:
    """Local children's supervisors forked from one launcher server (`distrun.backends.launcher_server`):
    a new interpreter's imports for each child were most of its time."""
    from distrun.backends.launcher_server import launchers_served
    from distrun.backends.registry import backend_for
    from distrun.backends.supervised import SupervisedBackend

    types = sorted(set(machine_types))
    backend = backend_for(types[0]) if len(types) == 1 else None
    if not isinstance(backend, SupervisedBackend):
        return nullcontext()
    return launchers_served(backend.launcher_module, home)


def due_looks(running: Iterable[str], last_look: Mapping[str, float], now: float) -> list[str]:
    """The running children whose job's record to read now.

    `last_look`: when the engine was last asked about each child an engine runs; such a child is
    due once ENGINE_LOOK_SECONDS passed. Any other child's record is the job index's, read each time.
    """
    return [c for c in running if c not in last_look or now - last_look[c] >= ENGINE_LOOK_SECONDS]


# ---------------------------------------------------------------- in the background


def start_detached(
    run: ParentRun,
    file: str | None,
    overrides: list[str],
    document: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> JobRecord:
    """`distrun run -d pipeline.yml` (or sweep.yml): record the parent, then supervise it from a
    new background process (`python -m distrun.runner.parent_run NAME`), which loads the file again
    as given. A parent built in Python gives its `document` instead, written to its folder for
    that process to load, with relative paths starting at `base_dir`."""
    from distrun.runner.detached_parent import detached
    from distrun.runner.detached_parent import start_detached as start

    assert file is not None or document is not None
    return start(run.layout, detached(run.policy, file, overrides, run.compute, document, base_dir))


def _supervise(name: str) -> int:
    """The background supervisor of a parent that `start_detached` recorded."""
    from distrun.runner.detached_parent import read_request
    from distrun.runner.job_kinds import policy_of
    from distrun.runner.parent_record import not_started
    from distrun.store.layout import Layout

    layout = Layout()
    try:
        request = read_request(layout, name)
        policy = policy_of(request["kind"])
        loaded = policy.requested(request)
        compute = request.get("compute")
        run = ParentRun(policy(loaded, layout, _print, compute, name, None), layout, _print, compute)
    except (DistrunError, OSError, ValueError, KeyError, TypeError) as exc:
        return not_started(layout, name, exc)
    fields = run.policy.record_fields()
    if fields:
        run.index.update(name, **fields)  # as this process made them (a sweep's seed, drawn here)
    final = run.run(recorded=True)
    print(run.policy.summary(final), flush=True)
    return 0 if final.status == JobStatus.COMPLETED else 1


def _print(text: str) -> None:
    print(text, flush=True)


if __name__ == "__main__":
    import sys

    sys.exit(_supervise(sys.argv[1]))
