"""The values the backend contract passes: the engine's request, the rendered job, an observation.

`distrun.backends.base` (the contract) gives the same names. They live here, in a module of
their own, so that a module that needs only the values (`distrun.backends.cluster`) does not
import the contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from distrun.agent.node_facts import NodeOutcome
from distrun.core.job_status import TERMINAL_STATUSES, JobStatus
from distrun.prepare.timeouts import spec_timeouts

if TYPE_CHECKING:
    from distrun.plan.model import LaunchPlan
    from distrun.prepare.submission import PreparedJob

__all__ = ["EngineRequest", "Observation", "RenderedJob"]


class EngineRequest(Protocol):
    """The engine's own request for one job, as `render` built it and `schedule` submits it.

    Slurm: the sbatch script; Ray: the job's actors and resources; Kubernetes: the JobSet manifest;
    local: the launcher command. Plain data: building it starts nothing and writes nothing.
    """

    def display(self) -> dict[str, Any]:
        """What `distrun plan` shows of this request, as JSON-ready data.

        The keys are merged into the plan output beside "compute", "type", "notes", "inputs" and "plan".
        A request that is a text file shows it as {"script_name": "<where it is written>",
        "script": "<the exact text submitted>"}, which `distrun plan` prints verbatim; other
        keys are shown in `-o json` output.
        """
        ...


@dataclass(frozen=True)
class RenderedJob:
    """One job, rendered for one engine: what `distrun plan` prints and what `schedule` submits.

    job         the prepared job (name, spec, folder, compute target, input/output bindings)
    plan        the LaunchPlan as far as it is known before the engine places the job: values only
                the nodes know (hosts, free ports) are placeholders, said so in `notes`
    request     the engine's own request object (`EngineRequest`)
    kind        the compute type ("slurm"), as in config.yaml
    notes       what the user should know about running on this engine (shown by `distrun plan`)
    warnings    what a user submitting from Python should be told once (the SDK prints them)
    """

    job: PreparedJob
    plan: LaunchPlan
    request: EngineRequest
    kind: str
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def show(self) -> dict[str, Any]:
        """`distrun plan -o json`: compute, type, notes, each data input's source (its path as written,
        its local path and where that comes from), what its processes run in, the request's own
        display, then the plan."""
        from distrun.prepare.environment_origin import environment_origin, pod_images

        display = dict(self.request.display())
        # A backend whose request decides what the processes run in (local compute's containers) says it.
        decided = display.pop("runs_in", None)
        images = pod_images(display.get("objects") or []) if self.kind == "kubernetes" else {}
        return {
            "compute": self.job.target.name,
            "type": self.kind,
            "notes": list(self.notes),
            "runs_in": decided
            or environment_origin(self.job.spec.environment, self.job.bindings.python_layer, self.kind, images),
            "inputs": {
                name: {**source, "local": self.job.bindings.input_paths.get(name, "")}
                for name, source in self.job.bindings.input_sources.items()
            },
            **display,
            "timeouts": spec_timeouts(self.job.spec),
            "plan": self.plan.to_dict(),
        }


@dataclass(frozen=True)
class Observation:
    """A live job's state as its engine (and its nodes' outcomes) tell it, in distrun's words.

    status      the job's JobStatus now (terminal once the engine and every node are done)
    reason      one line for the user ("" when there is nothing to say); for Queued, why it waits
    root_cause  the process that failed first, across nodes (`NodeOutcome.root_cause`), when Failed
    outcomes    the node outcomes read so far (their processes become the record's `processes`)
    started_at  when the engine started the job (epoch s), if it says; None when unknown
    ended_at    when the job ended (epoch s), for a terminal status; None to let the caller decide
    attempts    with restarts: every attempt so far (`Attempt.to_dict`), the record's `attempts`; None: unchanged
    """

    status: JobStatus
    reason: str = ""
    root_cause: dict[str, Any] | None = None
    outcomes: Sequence[NodeOutcome] = field(default_factory=tuple)
    started_at: float | None = None
    ended_at: float | None = None
    attempts: list[dict[str, Any]] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES
