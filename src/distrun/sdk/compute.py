"""`MLClient.compute` and `AmlCompute`, as in `azure.ai.ml`, over distrun's compute targets.

A notebook's cluster cell (`compute.get(name)`, else `begin_create_or_update(AmlCompute(...))`)
runs unchanged: an AmlCompute becomes a local target of that name in config.yaml (its jobs run on
this machine, with simulated nodes), or names the target already there, whatever its type. Size,
instance counts and scale-down time mean nothing here: kept on the object, said once.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

from distrun.core.errors import ResourceNotFoundError
from distrun.sdk.notices import Recorded

if TYPE_CHECKING:
    from distrun.prepare.compute import ComputeTarget
    from distrun.store.layout import Layout


class _Client(Protocol):
    @property
    def layout(self) -> Layout: ...


class Compute(Recorded):
    """A compute target: its `name` and `type` (distrun's compute type: local, slurm, ray, kubernetes)."""

    def __init__(
        self,
        *,
        name: str,
        type: str | None = None,
        description: str | None = None,
        tags: dict[str, str] | None = None,
        location: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.type = type
        self.description = description
        self.tags = tags or {}
        self.location = location or "local"
        self.provisioning_state = "Succeeded"
        self._accept(kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, type={self.type!r})"


class AmlCompute(Compute):
    """Azure ML's compute cluster; here, a local target of that name."""

    def __init__(
        self,
        *,
        name: str,
        size: str | None = None,
        min_instances: int | None = None,
        max_instances: int | None = None,
        idle_time_before_scale_down: float | None = None,
        tier: str | None = None,
        description: str | None = None,
        tags: dict[str, str] | None = None,
        location: str | None = None,
        type: str = "amlcompute",
        **kwargs: Any,
    ) -> None:
        self.size = size
        self.min_instances = min_instances
        self.max_instances = max_instances
        self.idle_time_before_scale_down = idle_time_before_scale_down
        self.tier = tier
        super().__init__(name=name, type=type, description=description, tags=tags, location=location, **kwargs)


class ComputeOperations:
    """`MLClient.compute`: get, list, begin_create_or_update."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def get(self, name: str) -> Compute:
        """The target `name` (local, or one in config.yaml); ResourceNotFoundError when there is none."""
        from distrun.prepare.compute import LOCAL, ComputeTarget, read_targets, target_name

        if target_name(name) == LOCAL:
            return _compute_of(ComputeTarget(LOCAL, LOCAL))
        config = self._client.layout.config_path
        targets = read_targets(config)  # a broken config.yaml raises its own error
        target = targets.get(target_name(name))
        if target is None:
            known = ", ".join(["local", *sorted(targets)])
            raise ResourceNotFoundError(
                f"compute {name!r} not found (the compute targets are: {known})",
                "create it with ml_client.compute.begin_create_or_update(AmlCompute(name=...)) (a local target), "
                f"or define it in {config} (`distrun compute create`)",
            )
        return _compute_of(target)

    def list(self, **kwargs: Any) -> list[Compute]:
        from distrun.prepare.compute import LOCAL, ComputeTarget, read_targets

        targets = read_targets(self._client.layout.config_path)
        return [_compute_of(ComputeTarget(LOCAL, LOCAL)), *(_compute_of(t) for t in targets.values())]

    def begin_create_or_update(self, compute: Compute, **kwargs: Any) -> Any:
        """An AmlCompute names a local target (added to config.yaml when new); `.result()` gives it back."""
        from distrun.sdk.poller import Poller

        return Poller.finished(self.create_or_update(compute))

    def create_or_update(self, compute: Compute) -> Compute:
        from distrun.core.errors import NotSupportedYetError
        from distrun.prepare.compute import name_local_target, runs_on_this_machine

        if not isinstance(compute, AmlCompute):
            raise NotSupportedYetError(
                f"distrun does not create {type(compute).__name__} compute yet",
                "use AmlCompute(name=...) for a local target, or `distrun compute create` for Slurm, Ray, Kubernetes",
            )
        config = self._client.layout.config_path
        target, added = name_local_target(config, compute.name)
        if added:
            _say(
                f"compute {compute.name} (AmlCompute{_shape(compute)}) is a local target: its jobs run on this "
                f"machine, each node simulated; added to {config}"
            )
        elif runs_on_this_machine(target.type):
            _say(f"compute {compute.name} is a local target: its jobs run on this machine")
        else:
            _say(f"compute {compute.name} is the {target.type} target in {config}; used as it is")
        return compute


def _compute_of(target: ComputeTarget) -> Compute:
    from distrun.prepare.compute import runs_on_this_machine

    if runs_on_this_machine(target.type):
        return AmlCompute(name=target.name, description="runs on this machine")
    return Compute(name=target.name, type=target.type)


def _shape(compute: AmlCompute) -> str:
    given = {"size": compute.size, "min_instances": compute.min_instances, "max_instances": compute.max_instances}
    shown = ", ".join(f"{key}={value}" for key, value in given.items() if value is not None)
    return f" {shown}" if shown else ""


def _say(text: str) -> None:
    print(f"distrun: {text}", file=sys.stderr, flush=True)
