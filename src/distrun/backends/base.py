"""The backend contract: what every engine (local, Slurm, Ray, Kubernetes) implements, in full.

A backend turns a prepared job into its engine's request (`render`), submits that very object
(`schedule`), maps the engine's view of a running job back to distrun's (`observe`), stops it
(`cancel`) and makes its per-rank logs readable in the job folder (`fetch_logs`). The
orchestrator (`distrun.runner.jobs`, with `distrun.runner.attach` for `distrun run`) is the only caller: the
CLI and the SDK never ask which engine a job runs on. Adding a backend is one package that
defines `BACKEND = YourBackend()` plus one line in the registry's table
(`distrun.prepare.compute.BACKENDS`).

Inside the job, a cluster backend runs one engine-free node agent per node
(`distrun.agent.node.run_node`): the backend's own small entry point builds the node's
`NodeFacts` from its engine and picks an `OutcomeChannel` (a shared folder,
`FolderOutcomeChannel`, when the nodes share the job folder; the engine's own means otherwise).
The agent reports a `NodeOutcome` per node through it; `distrun.backends.cluster` has the logic
every cluster backend shares (first failure across nodes, record refresh). A backend never
prints: `distrun run`'s header, stream and summary are `distrun.runner.attach`'s, for every backend.

Every backend is of one of two families, each of which writes its shared rules once:

    EngineBackend      (distrun.backends.engine: Slurm, Kubernetes) an engine that keeps the
                       job's state; a job it never got is Canceled at once, `observe` asks it
    SupervisedBackend  (distrun.backends.supervised: local, Ray) a distrun process supervises
                       the job and writes its record itself; `observe` has nothing to add

The sequence the orchestrator follows:

    plan:    render(preview_job(...))                 -> RenderedJob.show() is printed
    submit:  validate target -> preflight -> prepare_job (record Queued/Starting, folder filled)
             -> render(job) -> schedule(rendered)      (never a second rendering)
    run:     the same, then `distrun.runner.attach.run_attached` (header, every rank's lines, summary):
             an engine's job is schedule(rendered) and followed through observe() and its log
             files; a supervised job is supervise(rendered, ...) in this process
    get:     record from the store -> refresh through observe(record, layout, target) while it is live
    cancel:  cancel(record, layout, target) -> wait (grace period + cancel_wait_s) until the record is terminal
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from distrun.agent.node_facts import NodeFacts, NodeOutcome
from distrun.agent.outcome_channel import MAIN_WORK_DONE, FolderOutcomeChannel, OutcomeChannel
from distrun.backends.values import EngineRequest, Observation, RenderedJob
from distrun.core.job_status import TERMINAL_STATUSES, JobStatus
from distrun.prepare.compute import shares_job_folders
from distrun.prepare.submission import PreparedJob, bind
from distrun.spec.models import DEFAULT_GRACE_PERIOD

if TYPE_CHECKING:
    from distrun.prepare.compute import ComputeTarget
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.models import JobSpec
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "MAIN_WORK_DONE",
    "TERMINAL_STATUSES",
    "Backend",
    "EngineRequest",
    "FolderOutcomeChannel",
    "JobStatus",
    "NodeFacts",
    "NodeOutcome",
    "Observation",
    "OutcomeChannel",
    "RenderedJob",
    "TargetSettings",
]


class TargetSettings(Protocol):
    """A compute type's settings model (`SlurmSettings`...): a target's settings, checked and typed."""

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> Any:
        """The settings of target `name`; a `DistrunError` naming the target and every wrong key."""
        ...


class Backend(ABC):
    """One engine. Stateless: every call gets the target or record it is about, so one instance serves all.

    Errors for the user are `DistrunError`s saying what is wrong and how to fix it; a backend never
    lets an engine's traceback through. Methods that talk to the engine may block for as long as
    the engine's command takes (bounded by the backend's own timeouts).
    """

    kind: ClassVar[str]
    """The compute type in config.yaml (`type: slurm`), also the registry key."""

    settings_model: ClassVar[type[TargetSettings]]
    """The model of a target's settings (config.yaml, `--set K=V`): `validate_settings` and `target_settings`."""

    engine: ClassVar[str]
    """The engine's name in messages ("Slurm")."""

    cancel_command: ClassVar[str] = ""
    """How the engine is asked to stop a job, for messages ("scancel"); "" to say nothing."""

    cancel_wait_s: ClassVar[float] = 15.0
    """After `cancel`, how long beyond the job's grace period the orchestrator waits for a terminal record."""

    restarts: ClassVar[bool] = False
    """Whether this backend runs jobs with restarts (`limits.max_restarts`, `limits.max_preemptions`).

    A backend that says True implements, with the pure pieces of `distrun.restarts.policy`: after an
    attempt ends (every rank stopped), `decide(RestartPolicy.of(spec.limits), attempts)`; on a
    restart, the whole job runs again under the same name and folder as attempt k+1, its plan
    built with `Placement.restart_count = k+1` (DISTRUN_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT),
    ./outputs kept, the ended attempt's logs moved to user_logs/attempt_<k>/
    (`distrun.restarts.attempt_logs`), and the record's `attempts` listing each attempt (`Attempt.to_dict`).
    A SIGTERM from outside (not `cancel`, which marks its request first) ends an attempt as
    Preempted (`run_gang(preempted_by=...)`), which counts against max_preemptions only.
    The orchestrator refuses a job with restarts on a backend that says False, before recording it.
    """

    # ------------------------------------------------------------ before anything is recorded

    def validate_settings(self, target_name: str, settings: Mapping[str, Any]) -> None:
        """Check a compute target's settings (config.yaml, `distrun compute create --set K=V`).

        Raise `DistrunError` naming the target, every wrong key with what is expected ("did you
        mean ...?" for a misspelling), and the known keys. Pure: no engine is contacted. Called by
        `compute create` before the target is written, and before every job on it. The
        `settings_model` says all of it (`distrun.backends.settings.validated_settings`).
        """
        self.settings_model.from_settings(target_name, settings)

    def target_settings(self, target: ComputeTarget) -> Any:
        """The target's settings as this backend's `settings_model` (checked again: config.yaml may have changed)."""
        return self.settings_model.from_settings(target.name, target.settings)

    @abstractmethod
    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        """Raise `DistrunError` when the engine cannot take this job now; nothing is recorded yet.

        Check what is cheap and certain: the engine's tools or API are reachable, the target's
        queue/partition/namespace exists, the job fits (node count, resources). Say what to fix
        and that nothing was submitted. Called before the job gets a record or a folder.
        """

    @abstractmethod
    def render(self, job: PreparedJob, layout: Layout) -> RenderedJob:
        """The job as this engine's request: the `RenderedJob` `distrun plan` prints and `schedule` submits.

        No side effects: writes nothing, contacts no engine, starts nothing (`distrun plan` calls
        it with a job that has no record and whose folder does not exist). Deterministic for the
        same job, target and layout, except values the notes call placeholders.
        """

    def plan(self, loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str) -> RenderedJob:
        """`distrun plan`: the job rendered as submit would render it, with no record, folder or engine.

        The default binds the inputs without fetching them and calls `render`. A backend whose
        request carries more than the job's files (Kubernetes: the code snapshot in its ConfigMap)
        overrides it so that the plan shows every byte submit would send.
        """
        spec = loaded.spec
        folder = layout.job(name)
        bindings = bind(loaded, spec, folder, materialize=False, ships_files=not shares_job_folders(target.type))
        return self.render(PreparedJob(name, spec, folder, target, bindings), layout)

    @abstractmethod
    def schedule(self, rendered: RenderedJob, layout: Layout) -> JobRecord:
        """Submit `rendered.request` (exactly that object) and return the job's record; does not wait for the job.

        Called after `prepare_job` recorded the job (Starting) and filled its folder. Writes the
        engine's files into the job folder (`JobFolder.engine_folder(kind)`), plan.json with
        `rendered.plan` (node 0's agent replaces it with the real hosts and ports), and the
        record's `backend_id` (the engine's job id) and status (Queued). On failure the
        record says Failed with reason "not submitted: <why>" and a `DistrunError` is raised:
        never a half-written record, never a job left running in the engine.
        """

    # ------------------------------------------------------------ a job that was scheduled

    @abstractmethod
    def observe(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        """The engine's view of a live job (a record with a `backend_id`), mapped to distrun's state.

        `target` is the job's compute target as it was submitted (`distrun.prepare.compute.submitted_target`),
        looked up once by the caller: the backend never looks it up again.

        Read-only: asks the engine and reads the nodes' outcomes (its `OutcomeChannel`); never writes
        the store (the orchestrator applies the observation). A job is terminal only once the engine
        says so and every node reported, or a node failed (the earliest failure across nodes is the
        root cause); a cancel asked before a failure makes it Canceled. Return None when the engine
        cannot be asked now (the record then stays as last known). A backend whose supervisor writes
        the record itself (local) returns None.
        """

    @abstractmethod
    def cancel(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """Ask the engine to stop a live job; return without waiting for it to end.

        `target` is the job's compute target as it was submitted, as for `observe`.

        Note the time of the request where `observe` will see it (so a failure before it still
        wins), then stop the job: its processes get SIGTERM, then SIGKILL after the job's grace
        period. A job the engine never got (no `backend_id`) is recorded Canceled at once. The
        orchestrator then waits up to grace period + `cancel_wait_s` for a terminal record.
        """

    @abstractmethod
    def fetch_logs(self, record: JobRecord, layout: Layout) -> None:
        """Make the job's per-rank log files present in its folder (`user_logs/std_log_process_NN.txt`).

        Backends whose nodes write into the shared job folder (local, Slurm) have nothing to do.
        One without a shared filesystem copies what its nodes wrote so far (appending only the new
        part; safe to call repeatedly while the job runs). Never raises for an engine that does not
        answer: the logs are then as last fetched.
        """

    def ask_stacks(
        self, record: JobRecord, layout: Layout, native: bool, wait: float
    ) -> tuple[list[dict[str, Any]], list[int]] | None:
        """`distrun job stacks`: every process's stack of a running job, asked on the engine's own
        channel, as (processes as `ProcessStacks.to_dict` makes them, nodes that did not answer in
        `wait` seconds). None, as here: the node agents see a request in this machine's job folder
        (shared: local, Slurm; relayed by the driver: Ray), and the caller writes it there.
        """
        return None
