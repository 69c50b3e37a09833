"""Typed distributions, as in `azure.ai.ml.entities`, and the dict form (`{"type": "PyTorch", ...}`).

Each one only carries fields to the job model: which fields exist is read from the model
(`distrun.spec.models`), so the SDK never keeps a second list. Like Azure ML, the SDK accepts
keys a distribution does not have (`PyTorchDistribution(node_count=2)`, extra dict keys): they
are stripped here, recorded and named once, and never reach the stricter YAML model.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from distrun.sdk.notices import Recorded
from distrun.spec import models

# `process_count` (a total over all nodes) is not a model field: the loader's normalizer
# turns it into process_count_per_instance, as it does for the 2021 preview YAML form.
_LEGACY_TOTAL = "process_count"


class DistributionConfiguration(Recorded):
    type: ClassVar[str]
    model: ClassVar[type[BaseModel]]
    understands_total: ClassVar[bool] = False

    @classmethod
    def field_names(cls) -> list[str]:
        names = [name for name in cls.model.model_fields if name != "type"]
        return names + ([_LEGACY_TOTAL] if cls.understands_total else [])

    def _keep(self, given: dict[str, Any]) -> None:
        """Set the model's fields from `given`; accept, record and name the others."""
        known = set(self.field_names())
        for name, value in given.items():
            if name in known:
                setattr(self, name, value)
        self._accept({k: v for k, v in given.items() if k not in known})

    def _to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for name in self.field_names():
            value = getattr(self, name, None)
            if value is not None:
                data[name] = value
        return data

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._to_data().items() if k != "type")
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._to_data() == self._to_data()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


class PyTorchDistribution(DistributionConfiguration):
    type = "pytorch"
    model = models.PyTorchDistribution
    understands_total = True

    def __init__(self, *, process_count_per_instance: int | None = None, **kwargs: Any) -> None:
        self.process_count_per_instance = process_count_per_instance
        self._keep(kwargs)


class TensorFlowDistribution(DistributionConfiguration):
    type = "tensorflow"
    model = models.TensorFlowDistribution

    def __init__(
        self, *, parameter_server_count: int | None = 0, worker_count: int | None = None, **kwargs: Any
    ) -> None:
        self.parameter_server_count = parameter_server_count
        self.worker_count = worker_count
        self._keep(kwargs)


class MpiDistribution(DistributionConfiguration):
    type = "mpi"
    model = models.MpiDistribution
    understands_total = True

    def __init__(self, *, process_count_per_instance: int | None = None, **kwargs: Any) -> None:
        self.process_count_per_instance = process_count_per_instance
        self._keep(kwargs)


class RayDistribution(DistributionConfiguration):
    type = "ray"
    model = models.RayDistribution

    def __init__(
        self,
        *,
        port: int | None = None,
        address: str | None = None,
        include_dashboard: bool | None = None,
        dashboard_port: int | None = None,
        head_node_additional_args: str | None = None,
        worker_node_additional_args: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.port = port
        self.address = address
        self.include_dashboard = include_dashboard
        self.dashboard_port = dashboard_port
        self.head_node_additional_args = head_node_additional_args
        self.worker_node_additional_args = worker_node_additional_args
        self._keep(kwargs)


BY_TYPE: dict[str, type[DistributionConfiguration]] = {
    cls.type: cls for cls in (PyTorchDistribution, TensorFlowDistribution, MpiDistribution, RayDistribution)
}


def distribution_from(value: Any) -> Any:
    """A typed distribution from the dict form (type in any letter case, extra keys tolerated).

    Anything else is returned as it is, for the loader to report with the CLI's message.
    """
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    cls = BY_TYPE.get(kind.lower()) if isinstance(kind, str) else None
    if cls is None:
        return dict(value)  # unknown or missing type: the loader names the allowed ones
    return cls(**{k: v for k, v in value.items() if k != "type"})


def distribution_data(value: Any) -> Any:
    return value._to_data() if isinstance(value, DistributionConfiguration) else value
