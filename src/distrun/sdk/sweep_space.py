"""The parts of a sweep, as `azure.ai.ml.sweep` names them: search space expressions, sampling
algorithms, early termination policies, the objective and the limits.

Each is plain data and knows its Azure ML sweep YAML form (`_to_data()`), the form the sweep
loader (`distrun.loading.sweep_loader`) reads and checks: a value out of range is reported there,
with the same messages a YAML file gets.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = [
    "BanditPolicy",
    "BayesianSamplingAlgorithm",
    "Choice",
    "EarlyTerminationPolicy",
    "GridSamplingAlgorithm",
    "LogNormal",
    "LogUniform",
    "MedianStoppingPolicy",
    "Normal",
    "Objective",
    "QLogNormal",
    "QLogUniform",
    "QNormal",
    "QUniform",
    "Randint",
    "RandomSamplingAlgorithm",
    "SamplingAlgorithm",
    "SweepDistribution",
    "SweepJobLimits",
    "TruncationSelectionPolicy",
    "Uniform",
    "from_data",
]


def _given(obj: Any) -> dict[str, Any]:
    """The dataclass's fields that were given (not None), in declaration order."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


def _typed(obj: Any) -> dict[str, Any]:
    return {"type": obj.type, **_given(obj)}


@dataclass
class SweepDistribution:
    """A search space of one input: a job called with one as an input value sweeps that input."""

    type: ClassVar[str] = ""

    def _to_data(self) -> dict[str, Any]:
        return _typed(self)


@dataclass
class Choice(SweepDistribution):
    type: ClassVar[str] = "choice"
    values: list[Any] | None = None

    def _to_data(self) -> dict[str, Any]:
        values = self.values
        return {"type": self.type, "values": list(values) if isinstance(values, (list, tuple, range)) else values}


@dataclass
class Randint(SweepDistribution):
    type: ClassVar[str] = "randint"
    upper: int | None = None


@dataclass
class Uniform(SweepDistribution):
    type: ClassVar[str] = "uniform"
    min_value: float | None = None
    max_value: float | None = None


@dataclass
class LogUniform(SweepDistribution):
    type: ClassVar[str] = "loguniform"
    min_value: float | None = None
    max_value: float | None = None


@dataclass
class QUniform(SweepDistribution):
    type: ClassVar[str] = "quniform"
    min_value: float | None = None
    max_value: float | None = None
    q: float | None = None


@dataclass
class QLogUniform(SweepDistribution):
    type: ClassVar[str] = "qloguniform"
    min_value: float | None = None
    max_value: float | None = None
    q: float | None = None


@dataclass
class Normal(SweepDistribution):
    type: ClassVar[str] = "normal"
    mu: float | None = None
    sigma: float | None = None


@dataclass
class LogNormal(SweepDistribution):
    type: ClassVar[str] = "lognormal"
    mu: float | None = None
    sigma: float | None = None


@dataclass
class QNormal(SweepDistribution):
    type: ClassVar[str] = "qnormal"
    mu: float | None = None
    sigma: float | None = None
    q: float | None = None


@dataclass
class QLogNormal(SweepDistribution):
    type: ClassVar[str] = "qlognormal"
    mu: float | None = None
    sigma: float | None = None
    q: float | None = None


# ---------------------------------------------------------------- early termination


@dataclass
class EarlyTerminationPolicy:
    type: ClassVar[str] = ""
    delay_evaluation: int = 0
    evaluation_interval: int = 0

    def _to_data(self) -> dict[str, Any]:
        return _typed(self)


@dataclass
class BanditPolicy(EarlyTerminationPolicy):
    type: ClassVar[str] = "bandit"
    slack_amount: float = 0
    slack_factor: float = 0

    def _to_data(self) -> dict[str, Any]:
        # Azure ML's defaults are 0 for both; the one given is the slack (the loader refuses both
        # or neither, as Azure ML does).
        data = {"type": self.type, "delay_evaluation": self.delay_evaluation}
        data["evaluation_interval"] = self.evaluation_interval
        for key in ("slack_factor", "slack_amount"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data


@dataclass
class MedianStoppingPolicy(EarlyTerminationPolicy):
    type: ClassVar[str] = "median_stopping"
    evaluation_interval: int = 1


@dataclass
class TruncationSelectionPolicy(EarlyTerminationPolicy):
    type: ClassVar[str] = "truncation_selection"
    truncation_percentage: int = 0
    exclude_finished_jobs: bool | None = None


# ---------------------------------------------------------------- sampling


@dataclass
class SamplingAlgorithm:
    type: ClassVar[str] = ""

    def _to_data(self) -> dict[str, Any]:
        return _typed(self)


@dataclass
class RandomSamplingAlgorithm(SamplingAlgorithm):
    type: ClassVar[str] = "random"
    seed: int | None = None
    rule: str | None = None
    logbase: float | str | None = None


@dataclass
class GridSamplingAlgorithm(SamplingAlgorithm):
    type: ClassVar[str] = "grid"


@dataclass
class BayesianSamplingAlgorithm(SamplingAlgorithm):
    type: ClassVar[str] = "bayesian"


# ---------------------------------------------------------------- objective and limits


@dataclass
class Objective:
    goal: str | None = None  # "maximize" | "minimize" (any case, as Azure ML takes it)
    primary_metric: str | None = None

    def _to_data(self) -> dict[str, Any]:
        data = _given(self)
        if isinstance(self.goal, str):
            data["goal"] = self.goal.lower()
        return data


@dataclass
class SweepJobLimits:
    max_concurrent_trials: int | None = None
    max_total_trials: int | None = None
    timeout: int | None = None
    trial_timeout: int | None = None

    def _to_data(self) -> dict[str, Any]:
        return _given(self)


# ---------------------------------------------------------------- from their YAML form


def _by_type(base: type) -> dict[str, type]:
    """The classes above by their `type` (each a direct subclass of its kind)."""
    return {cls.type: cls for cls in base.__subclasses__()}


EXPRESSIONS = _by_type(SweepDistribution)
ALGORITHMS = _by_type(SamplingAlgorithm)
POLICIES = _by_type(EarlyTerminationPolicy)


def from_data(value: Any, kinds: dict[str, type]) -> Any:
    """An expression, algorithm or policy in its YAML form (a mapping with `type`, or the type's
    name) as its object; anything else as it is (the loader says what is wrong with it)."""
    if not isinstance(value, (str, dict)):
        return value
    data = {"type": value} if isinstance(value, str) else dict(value)
    kind = kinds.get(str(data.pop("type", "")).lower())
    if kind is None:
        return value
    try:
        return kind(**data)
    except TypeError:  # a key the class does not have
        return value
