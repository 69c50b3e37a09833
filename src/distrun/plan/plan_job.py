"""The validated job as the planner and the node agents read it: plain data, without pydantic.

A job is validated once, by the job models (`distrun.spec.models`), when it is submitted; its
folder's job.json holds the result (`JobSpec.model_dump`, by alias, without None values). What
only launches the job after that (the planner, a cluster node's agent, Slurm's attempt loop)
reads a `PlanJob` instead. Validating job.json again on every node imported pydantic and built
the models' validators: about 0.3 s of every node agent's start, for facts already checked.

There is one road in: `from_dump` reads the dump, and `PlanJob.of(spec)` dumps the validated
spec the same way job.json is written and reads that, so a job planned at submission and the
same job planned on a node cannot disagree. job.json lies in the job folder, where a rank can
rewrite it between attempts: every value read here is checked for its type, and a wrong one
is a clear error rather than a wrong plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from distrun.core.errors import DistrunError
from distrun.restarts.policy import RestartPolicy
from distrun.spec.defaults import DEFAULT_GRACE_PERIOD

if TYPE_CHECKING:
    from distrun.spec.models import JobSpec

T = TypeVar("T")

_CHANGED_HINT = "job.json is written by distrun when the job is submitted and must not be edited: submit the job again"


@dataclass(frozen=True)
class TensorFlowTasks:
    """`distribution` of a TensorFlow job (the defaults are those of any other job)."""

    worker_count: int | None = None  # None: one worker per node
    parameter_server_count: int = 0
    chief_count: int = 0
    ps_environment_variables: dict[str, str] = field(default_factory=dict)
    # parameter_server settings kept in the record that local compute does not apply
    ps_recorded: tuple[str, ...] = ()


@dataclass(frozen=True)
class RayOptions:
    """`distribution` of a Ray job (the defaults are those of any other job)."""

    port: int | None = None
    address: str | None = None
    include_dashboard: bool | None = None
    dashboard_port: int | None = None
    head_node_additional_args: str | None = None
    worker_node_additional_args: str | None = None


@dataclass(frozen=True)
class PlanJob:
    """What planning and running a validated job reads of it."""

    command: str
    node_count: int  # resources.instance_count
    distribution_type: str | None  # pytorch | tensorflow | mpi | ray | None
    environment_variables: dict[str, str] = field(default_factory=dict)
    gpus_per_node: object = None  # resources.properties.gpus_per_node as written; None: not asked
    process_count_per_instance: int = 1  # pytorch and mpi; 1 for the others
    mpirun_args: tuple[str, ...] = ()
    tensorflow: TensorFlowTasks = field(default_factory=TensorFlowTasks)
    ray: RayOptions = field(default_factory=RayOptions)
    grace_seconds: float = DEFAULT_GRACE_PERIOD
    timeout: float | None = None
    hang_timeout: float | None = None
    restarts: RestartPolicy = field(default_factory=RestartPolicy)

    @classmethod
    def of(cls, spec: JobSpec) -> PlanJob:
        """The same as reading the job.json that submitting `spec` writes."""
        return cls.from_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True))

    @classmethod
    def from_dump(cls, data: object, where: str = "job.json") -> PlanJob:
        """From a job's dump (job.json); DistrunError naming the key when a value has the wrong type."""
        job = _Reader(_mapping(data, where), where)
        resources = job.section("resources")
        limits = job.section("limits")
        dist = job.section("distribution")
        kind = dist.get("type", str, None)
        if kind not in (None, "pytorch", "tensorflow", "mpi", "ray"):
            raise DistrunError(f"{where}: distribution.type {kind!r} is not one distrun knows", _CHANGED_HINT)
        grace = limits.get("grace_period", float, None)
        return cls(
            command=job.get("command", str),
            node_count=resources.get("instance_count", int, 1),
            distribution_type=kind,
            environment_variables=job.strings("environment_variables"),
            gpus_per_node=resources.section("properties").raw("gpus_per_node"),
            process_count_per_instance=dist.get("process_count_per_instance", int, 1)
            if kind in ("pytorch", "mpi")
            else 1,
            mpirun_args=tuple(dist.items("mpirun_args", str)) if kind == "mpi" else (),
            tensorflow=_tensorflow(dist) if kind == "tensorflow" else TensorFlowTasks(),
            ray=_ray(dist) if kind == "ray" else RayOptions(),
            grace_seconds=DEFAULT_GRACE_PERIOD if grace is None else grace,
            timeout=limits.get("timeout", float, None),
            hang_timeout=limits.get("hang_timeout", float, None),
            restarts=RestartPolicy(
                limits.get("max_restarts", int, None) or 0,
                limits.get("max_preemptions", int, None),
                frozenset(limits.items("no_restart_exit_codes", int)),
            ),
        )


def _tensorflow(dist: _Reader) -> TensorFlowTasks:
    ps = dist.section("parameter_server")
    return TensorFlowTasks(
        worker_count=dist.get("worker_count", int, None),
        parameter_server_count=dist.get("parameter_server_count", int, 0),
        chief_count=dist.get("chief_count", int, 0),
        ps_environment_variables=ps.strings("environment_variables"),
        ps_recorded=tuple(key for key in ("environment", "resource_limits") if ps.raw(key) is not None),
    )


def _ray(dist: _Reader) -> RayOptions:
    return RayOptions(
        port=dist.get("port", int, None),
        address=dist.get("address", str, None),
        include_dashboard=dist.get("include_dashboard", bool, None),
        dashboard_port=dist.get("dashboard_port", int, None),
        head_node_additional_args=dist.get("head_node_additional_args", str, None),
        worker_node_additional_args=dist.get("worker_node_additional_args", str, None),
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DistrunError(f"{where} is {type(value).__name__}, not a mapping", _CHANGED_HINT)
    return value


_NO_DEFAULT: Any = object()


class _Reader:
    """One mapping of the dump, read key by key with the type each key must have."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def raw(self, key: str) -> object:
        return self.data.get(key)

    def section(self, key: str) -> _Reader:
        value = self.data.get(key)
        return _Reader({} if value is None else _mapping(value, f"{self.where}: {key}"), f"{self.where}: {key}")

    def get(self, key: str, kind: type[T], default: T = _NO_DEFAULT) -> T:
        value = self.data.get(key)
        if value is None:
            if default is _NO_DEFAULT:
                raise DistrunError(f"{self.where}: {key} is missing", _CHANGED_HINT)
            return default
        return _checked(value, kind, f"{self.where}: {key}")

    def items(self, key: str, kind: type[T]) -> list[T]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise DistrunError(f"{self.where}: {key} is {type(value).__name__}, not a list", _CHANGED_HINT)
        return [_checked(item, kind, f"{self.where}: {key}[{i}]") for i, item in enumerate(value)]

    def strings(self, key: str) -> dict[str, str]:
        section = self.section(key)
        return {name: section.get(name, str) for name in section.data}


def _checked(value: object, kind: type[T], where: str) -> T:
    # JSON has one kind of number: a float field takes an int; bool is an int to Python, not to a job.
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # type: ignore[return-value]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DistrunError(f"{where} is {value!r}, not {kind.__name__}", _CHANGED_HINT)
    return value
