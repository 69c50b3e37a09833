"""The launch plan: every process of a job, where it runs, and exactly what it gets.

Plain frozen dataclasses, built by pure functions (`distrun.plan.build`) and read by the
node agent and the backends. `to_dict` gives the JSON `distrun plan --output json` prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass, replace


@dataclass(frozen=True)
class Placement:
    """Facts about where a job runs, decided by the backend before planning."""

    hosts: tuple[str, ...]  # one address per node, node rank order
    master_port: int
    job_dir: str  # absolute job folder; the code snapshot is `<job_dir>/code`
    run_id: str
    task_ports: tuple[int, ...] = ()  # one per task where a framework needs one (TensorFlow)
    simulated: bool = False  # local compute: nodes are simulated on one machine
    # Simulated nodes: this machine's GPUs, to be sliced between them (plan.gpus); None: not probed.
    gpus: tuple[str, ...] | None = None
    restart_count: int = 0  # which attempt of the job this is (distrun.restarts.policy)

    @property
    def master_addr(self) -> str:
        return self.hosts[0]


@dataclass(frozen=True)
class Bindings:
    """What `${{inputs.X}}` / `${{outputs.X}}` become, after the backend placed the data."""

    inputs: dict[str, str] = field(default_factory=dict)  # literal text or absolute path
    outputs: dict[str, str] = field(default_factory=dict)  # absolute folder or file path
    input_paths: dict[str, str] = field(default_factory=dict)  # data inputs only
    # Each data input's path as the job wrote it and where its data comes from (a local copy by
    # url_mirrors, a download, a datastore...), for `distrun plan`: {"path": ..., "source": ...}.
    input_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    # Variables every process gets from distrun's services: the job's built Python environment
    # (PATH, VIRTUAL_ENV) and its MLflow run (MLFLOW_RUN_ID, ...).
    environment: dict[str, str] = field(default_factory=dict)
    # A built environment's job layer: {"layer": the job's own writable layer (in the job folder),
    # "built": the cached environment below it}; {} when the job has none. Made when the job is
    # prepared; a backend that copies the job folder to its nodes (Ray) makes it in each copy.
    python_layer: dict[str, str] = field(default_factory=dict)
    # A build context built into an image by this machine's container engine (local compute,
    # Slurm): {"tag", "context", "dockerfile"}; {} otherwise. The processes run in containers of it.
    image_build: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessSpec:
    """One process of the job."""

    name: str  # unique: rank_0, worker_1, ps_0, chief_0, mpi_launcher
    role: str  # rank | worker | chief | ps | launcher
    index: int  # index within the role
    node_rank: int
    local_rank: int
    rank: int | None  # global rank where the framework has one
    argv: tuple[str, ...]
    env: dict[str, str]  # set for this process, over the inherited environment
    env_defaults: dict[str, str]  # set only when the inherited environment lacks them
    cwd: str
    log_name: str  # file name under user_logs/
    label: str  # stream prefix, e.g. "0/1" (node/rank) or "worker 1"
    auxiliary: bool = False  # stopped by distrun when the others finish (TF parameter servers)
    # How the agent splits this process's output into per-rank logs and stream labels; None:
    # one log. "mpi-tagged": lines tagged `[job,rank]<stdout>:` by mpirun (see plan.mpi).
    output_demux: str | None = None
    # A TensorFlow task (type, index): its TF_CONFIG is built from LaunchPlan.tf_cluster.
    tf_task: tuple[str, int] | None = None


@dataclass(frozen=True)
class NodePlan:
    node_rank: int
    host: str
    processes: tuple[ProcessSpec, ...]
    files: dict[str, str] = field(default_factory=dict)  # job-relative path -> content (hostfiles)
    gpus: tuple[str, ...] = ()  # simulated nodes: the GPUs this node's processes see (CUDA_VISIBLE_DEVICES)


@dataclass(frozen=True)
class LaunchPlan:
    job_name: str
    distribution: str  # pytorch | tensorflow | mpi | none
    command: str  # the rendered command every process runs under the shell
    world_size: int
    master_addr: str
    master_port: int
    nodes: tuple[NodePlan, ...]
    notes: tuple[str, ...] = ()  # one-line facts the user should see once
    # TensorFlow's cluster (role -> addresses), kept once: each task's TF_CONFIG holds all of
    # it, so materialised per task a plan of N tasks would hold N*N addresses.
    tf_cluster: dict[str, tuple[str, ...]] | None = None
    # Variables every process gets with the same value that grow with the job (SHARED_ENV),
    # kept once: AZ_BATCH_HOST_LIST in every process of 1024 nodes x 8 made a 98 MB plan.
    shared_env: dict[str, str] = field(default_factory=dict)

    def processes(self) -> Iterator[ProcessSpec]:
        for node in self.nodes:
            yield from node.processes

    def process_count(self) -> int:
        """How many processes run the job's command, as the user counts them: for MPI the ranks
        mpirun starts (world_size), not distrun's one launcher process that starts them."""
        if self.distribution == "mpi":
            return self.world_size
        return sum(len(node.processes) for node in self.nodes)

    def environment(self, proc: ProcessSpec) -> dict[str, str]:
        """Every variable distrun sets for `proc`: the shared ones, its own, TF_CONFIG for a TF task."""
        env = {**self.shared_env, **proc.env} if self.shared_env else proc.env
        if proc.tf_task is None or self.tf_cluster is None:
            return env
        return {**env, "TF_CONFIG": tf_config(self.tf_cluster, *proc.tf_task)}

    def to_dict(self) -> dict[str, object]:
        return _plain(self)  # type: ignore[return-value]


# Job-wide variables whose size grows with the number of nodes: kept once in the plan.
SHARED_ENV = ("AZ_BATCH_HOST_LIST",)


def with_shared_env(plan: LaunchPlan) -> LaunchPlan:
    """`plan`, fresh from its planner, with each SHARED_ENV variable that every process has,
    with one value, kept once.

    The processes' env dicts are the planner's own, seen by nobody yet, so the variable is
    taken out of them in place: rebuilding 8192 frozen ProcessSpecs cost 0.4 s at 1024 x 8.
    """
    procs = list(plan.processes())
    shared = {}
    for key in SHARED_ENV:
        values = {proc.env.get(key) for proc in procs}
        if len(values) == 1 and None not in values:
            shared[key] = values.pop()
    if not shared:
        return plan
    for proc in procs:
        for key in shared:
            proc.env.pop(key, None)
    return replace(plan, shared_env={**plan.shared_env, **shared})


def tf_config(cluster: dict[str, tuple[str, ...]] | dict[str, list[str]], role: str, index: int) -> str:
    """TensorFlow's TF_CONFIG for one task; roles without tasks are left out of the cluster."""
    plain = {name: list(addresses) for name, addresses in cluster.items() if addresses}
    return json.dumps({"cluster": plain, "task": {"type": role, "index": index}, "environment": "cloud"})


# Field names per dataclass type (() for any other type): `fields()` rebuilds its tuple at
# every call, which for the 8192 processes of a 1024 x 8 plan was half of `to_dict`.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _plain(value: object) -> object:
    """What `dataclasses.asdict` gives, without its deep copies.

    A plan's leaves are immutable (str, int, bool, None), so sharing them is safe; asdict
    deep-copies every one and took 1.3 s for a 1024 x 8 plan, this takes about 0.15 s.
    """
    if isinstance(value, dict):
        return {k: v if type(v) is str else _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)([v if type(v) is str else _plain(v) for v in value])
    names = _FIELD_NAMES.get(type(value))
    if names is None:
        is_instance = is_dataclass(value) and not isinstance(value, type)
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in fields(value)) if is_instance else ()  # type: ignore[arg-type]
    return {name: _plain(getattr(value, name)) for name in names} if names else value
