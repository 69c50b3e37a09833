"""A Ray compute target's settings, and what a job asks of each Ray node (one bundle per node).

compute:
  raycluster:
    type: ray
    address: 10.0.0.5:6379      # HOST:PORT of the head's GCS, `auto` inside the cluster, or ray://HOST:10001
    placement_timeout: 60       # seconds to wait for the nodes before failing the job
    cpus_per_node: 4            # the bundle each node agent reserves (the job's resources.properties win)
    gpus_per_node: 1
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distrun.core.errors import DistrunError
from distrun.spec.models import JobSpec

DEFAULT_PLACEMENT_TIMEOUT_S = 60.0
# Keys in the job's `resources.properties` that ask Ray for per-node resources.
JOB_RESOURCE_KEYS = ("cpus_per_node", "gpus_per_node")


class RaySettings(BaseModel):
    """A Ray cluster distrun places jobs on. Written in config.yaml or with `compute create --type ray`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "ray"
    type: str = Field("ray", pattern="^ray$")
    address: str = Field(description="HOST:PORT of the Ray head (GCS), `auto`, or a ray://HOST:PORT client address")
    placement_timeout: float = Field(
        DEFAULT_PLACEMENT_TIMEOUT_S, gt=0, description="seconds to wait until every node of the job is placed"
    )
    cpus_per_node: float = Field(1, gt=0, description="Ray CPUs each node's bundle reserves")
    gpus_per_node: float = Field(0, ge=0, description="Ray GPUs each node's bundle reserves")
    python: str | None = Field(None, description="Python on the Ray nodes that has distrun (default: Ray's own)")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        value = value.strip()
        if value == "auto":
            return value
        rest = value.removeprefix("ray://")
        host, sep, port = rest.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"{value!r} is not a Ray address: write HOST:PORT (e.g. 10.0.0.5:6379), auto, or ray://HOST:PORT"
            )
        return value

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> RaySettings:
        from distrun.backends.settings import validated_settings

        if "address" not in settings:
            raise DistrunError(
                f"compute target {name!r} (ray): the setting 'address' is missing",
                "set it to the Ray head's HOST:PORT, e.g. --set address=10.0.0.5:6379 (or auto, or ray://HOST:10001)",
            )
        return validated_settings(cls, "ray", name, settings)

    @property
    def is_client(self) -> bool:
        return self.address.startswith("ray://")


def bundle_for(job: JobSpec, target: RaySettings) -> dict[str, float]:
    """One node's bundle: the job's `resources.properties` cpus_per_node / gpus_per_node first, then the target's."""
    props = job.resources.properties or {}
    values = {"cpus_per_node": target.cpus_per_node, "gpus_per_node": target.gpus_per_node}
    for key in JOB_RESOURCE_KEYS:
        if props.get(key) is None:
            continue
        raw = props[key]
        try:
            number = float(raw)
        except (TypeError, ValueError):
            number = -1.0
        if number < 0 or (key == "cpus_per_node" and number == 0):
            raise DistrunError(
                f"job resources.properties.{key}: {raw!r} is not a number of Ray {key.split('_')[0].upper()}s",
                f"write a number, e.g. {key}: 2",
            )
        values[key] = number
    bundle = {"CPU": values["cpus_per_node"]}
    if values["gpus_per_node"]:
        bundle["GPU"] = values["gpus_per_node"]
    return bundle
