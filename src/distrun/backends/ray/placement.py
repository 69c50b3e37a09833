"""The placement request a job becomes on Ray, and the error when Ray cannot place it. Pure.

One STRICT_SPREAD placement group with one bundle per node of the job: Ray puts every bundle
on a different Ray node, or none. Bundle i is node rank i, so node ranks are stable and
follow the order of the bundles. A group Ray cannot place stays pending forever; distrun
waits `placement_timeout` seconds, removes it, and fails the job with what was asked and
what every node has free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distrun.backends.ray.target import RaySettings, bundle_for
from distrun.spec.models import JobSpec

STRATEGY = "STRICT_SPREAD"


@dataclass(frozen=True)
class PlacementRequest:
    name: str  # the placement group's name: distrun-<job>
    bundles: tuple[dict[str, float], ...]  # bundle i holds node rank i's agent
    timeout_s: float
    strategy: str = STRATEGY

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "strategy": self.strategy,
            "bundles": [dict(b) for b in self.bundles],
            "timeout_s": self.timeout_s,
        }

    def describe(self) -> str:
        count = len(self.bundles)
        return f"{count} node{'s' if count != 1 else ''} ({self.strategy}), each {_resources(self.bundles[0])}"


def placement_request(job: JobSpec, target: RaySettings, job_name: str) -> PlacementRequest:
    bundle = bundle_for(job, target)
    return PlacementRequest(
        name=f"distrun-{job_name}",
        bundles=tuple(dict(bundle) for _ in range(job.node_count)),
        timeout_s=target.placement_timeout,
    )


@dataclass(frozen=True)
class RayNodeFree:
    """One Ray node as the cluster reports it: its address, and its total and free resources."""

    address: str
    node_id: str
    total: Mapping[str, float]
    free: Mapping[str, float]
    alive: bool = True


def unplaceable_message(request: PlacementRequest, nodes: Sequence[RayNodeFree]) -> str:
    alive = [n for n in nodes if n.alive]
    fits = [n for n in alive if all(n.free.get(k, 0.0) >= v for k, v in request.bundles[0].items())]
    lines = [
        f"Ray could not place the job within {request.timeout_s:g} s: it asks for {request.describe()}, "
        f"one bundle per node on different Ray nodes; the cluster has {len(alive)} live node"
        f"{'s' if len(alive) != 1 else ''}, {len(fits)} with room for a bundle now"
    ]
    for node in alive:
        shown = {k: v for k, v in node.free.items() if k in ("CPU", "GPU") or k in request.bundles[0]}
        total = _resources(_main(node.total))
        lines.append(f"  node {node.address} ({node.node_id[:8]}): free {_resources(shown)} of {total}")
    return "\n".join(lines)


def unplaceable_hint(request: PlacementRequest, nodes: Sequence[RayNodeFree]) -> str:
    alive = sum(1 for n in nodes if n.alive)
    if len(request.bundles) > alive:
        return (
            f"lower resources.instance_count to at most {alive}, or add Ray nodes; "
            "the placement group was removed, nothing runs"
        )
    return (
        "lower cpus_per_node / gpus_per_node (target setting or resources.properties), wait for other work to end, "
        "or raise placement_timeout; the placement group was removed, nothing runs"
    )


def _main(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items() if k in ("CPU", "GPU")}


def _resources(resources: Mapping[str, float]) -> str:
    if not resources:
        return "nothing"
    return ", ".join(f"{v:g} {k}" for k, v in sorted(resources.items()))
