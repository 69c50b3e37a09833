"""`azure.ai.ml.sweep` for distrun: `from distrun.sweep import Choice, Uniform, BanditPolicy, ...`.

The search spaces, early-termination policies, sampling algorithms, objective and limits are plain
data, so a notebook that imports them (or builds a search space) runs. Running a sweep is not
supported yet: `job.sweep(...)`, `SweepJob(...)`, or submitting a job whose inputs hold a search
space raise `distrun.NotSupportedYetError` (also a NotImplementedError) saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from distrun.core.errors import NotSupportedYetError

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
    "SweepJob",
    "SweepJobLimits",
    "TruncationSelectionPolicy",
    "Uniform",
]


def not_supported_yet(what: str) -> NotSupportedYetError:
    return NotSupportedYetError(
        f"{what}: sweep jobs are not supported by distrun yet",
        "run the command job with fixed input values (one job per value to try)",
    )


@dataclass
class SweepDistribution:
    """A search space of one input. Submitting a job with one as an input value is a sweep."""

    type: ClassVar[str] = ""

    def _to_data(self) -> Any:
        raise not_supported_yet(f"an input set to {self!r}")


@dataclass
class Choice(SweepDistribution):
    type: ClassVar[str] = "choice"
    values: list[Any] | None = None


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


@dataclass
class EarlyTerminationPolicy:
    delay_evaluation: int = 0
    evaluation_interval: int = 0


@dataclass
class BanditPolicy(EarlyTerminationPolicy):
    slack_amount: float = 0
    slack_factor: float = 0


@dataclass
class MedianStoppingPolicy(EarlyTerminationPolicy):
    evaluation_interval: int = 1


@dataclass
class TruncationSelectionPolicy(EarlyTerminationPolicy):
    truncation_percentage: int = 0


@dataclass
class SamplingAlgorithm:
    type: ClassVar[str] = ""


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


@dataclass
class Objective:
    goal: str | None = None  # "maximize" | "minimize"
    primary_metric: str | None = None


@dataclass
class SweepJobLimits:
    max_concurrent_trials: int | None = None
    max_total_trials: int | None = None
    timeout: int | None = None
    trial_timeout: int | None = None


class SweepJob:
    """Azure ML's sweep job: not supported yet."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise not_supported_yet("SweepJob(...)")
