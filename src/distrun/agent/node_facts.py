"""What a node agent is told (`NodeFacts`) and what it reports (`NodeOutcome`): plain data, engine-free.

A cluster backend runs one node agent per node. The backend's own small entry point learns the
node's facts from its engine (Slurm: SLURM_NODEID and `scontrol show hostnames`; Ray: the actor's
arguments; Kubernetes: the pod's completion index) and hands them to
`distrun.agent.node.run_node`, which builds the job's plan, runs this node's processes and
reports a `NodeOutcome` through an `OutcomeChannel` (`distrun.agent.outcome_channel`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from distrun.core.job_status import JobStatus

# `from_dict` of a subclass (Kubernetes' PodOutcome) returns that subclass.
_Outcome = TypeVar("_Outcome", bound="NodeOutcome")


@dataclass(frozen=True)
class NodeFacts:
    """Where one node agent runs, as its engine tells it. Everything the agent needs, nothing engine-specific.

    node_rank       this node's rank, 0..node_count-1 (node 0 hosts MASTER_ADDR)
    node_names      every node of the job in node-rank order, as the engine names them (Slurm node
                    names, pod names); MPI hostfiles use these
    addresses       where each node is reached, in node-rank order; addresses[0] is MASTER_ADDR
    master_port     MASTER_PORT, free on node 0 (chosen there, or pinned by the job)
    task_ports      TensorFlow's task ports, one per task in cluster order (empty for others)
    job_dir         the job folder as this node sees it: job.json and bindings.json are read from
                    it, plan.json (node 0) and user_logs/ are written into it. On an engine without
                    a shared filesystem it is a node-local copy; the backend brings user_logs back.
    base_env        the environment the ranks inherit, engine variables that describe the agent's
                    own task already removed (the plan's variables are added on top)
    engine          the engine's name for messages ("Slurm", "Ray", "Kubernetes", "local")
    engine_job_id   the engine's id of the job (Slurm job id, ...), for messages and launch ids
    """

    node_rank: int
    node_names: tuple[str, ...]
    addresses: tuple[str, ...]
    master_port: int
    task_ports: tuple[int, ...]
    job_dir: Path
    base_env: Mapping[str, str] = field(default_factory=dict)
    engine: str = "cluster"
    engine_job_id: str = ""
    restart_count: int = 0  # which attempt of the job this is (a job with restarts)

    def __post_init__(self) -> None:
        if len(self.node_names) != len(self.addresses):
            raise ValueError(f"{len(self.node_names)} node names but {len(self.addresses)} addresses")
        if not 0 <= self.node_rank < len(self.node_names):
            raise ValueError(f"node rank {self.node_rank} is not one of the job's {len(self.node_names)} nodes")

    @property
    def node_count(self) -> int:
        return len(self.node_names)

    @property
    def node_name(self) -> str:
        return self.node_names[self.node_rank]

    @property
    def address(self) -> str:
        return self.addresses[self.node_rank]

    @property
    def master_addr(self) -> str:
        return self.addresses[0]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["job_dir"] = str(self.job_dir)
        data["base_env"] = dict(self.base_env)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeFacts:
        return cls(
            node_rank=int(data["node_rank"]),
            node_names=tuple(data["node_names"]),
            addresses=tuple(data["addresses"]),
            master_port=int(data["master_port"]),
            task_ports=tuple(int(p) for p in data.get("task_ports", ())),
            job_dir=Path(data["job_dir"]),
            base_env=dict(data.get("base_env", {})),
            engine=str(data.get("engine", "cluster")),
            engine_job_id=str(data.get("engine_job_id", "")),
            restart_count=int(data.get("restart_count", 0)),
        )


@dataclass(frozen=True)
class NodeOutcome:
    """How one node's part of the job ended: what its agent publishes on the `OutcomeChannel`.

    status          Completed, Failed or Canceled (never a live status)
    reason          one line for the user ("rank 3 on node 1 exited with code 1")
    root_cause      the failed process (name, rank, exit, traceback, log, host, address) when
                    status is Failed because of a process; None otherwise
    failed_at       wall-clock time (epoch s) of that failure: across nodes the earliest one is the
                    cause, the later ones its victims; None unless Failed
    started_at      when the agent started (or would have started) the node's processes, epoch s
    ended_at        when the node's processes had all ended, epoch s
    processes       each process's outcome (`ProcessOutcome.to_dict()`), host and address filled in
    """

    node_rank: int
    node_name: str
    status: JobStatus
    reason: str
    started_at: float
    ended_at: float
    address: str = ""
    engine_job_id: str = ""
    root_cause: dict[str, Any] | None = None
    failed_at: float | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls: type[_Outcome], data: Mapping[str, Any]) -> _Outcome:
        """Read back a published outcome; unknown keys are ignored, a missing status is Unknown."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["status"] = JobStatus.of(str(data.get("status")))
        values.setdefault("node_name", "")
        values.setdefault("reason", "")
        values.setdefault("started_at", 0.0)
        values.setdefault("ended_at", 0.0)
        values["processes"] = list(values.get("processes") or [])
        return cls(**values)
