"""The models of a sweep job (Azure ML's sweepJob schema), as distrun loads them.

The trial is not validated here: it becomes a command job document (`distrun.loading.sweep_loader`),
which the command job's own model and checks validate. The search space's expressions, the
sampling algorithm and the early termination policy are each a mapping whose `type` says which
model checks the rest (`EXPRESSIONS`, `ALGORITHMS`, `POLICIES`): the loader picks the model by
that key, so that an unknown `type` is said as such, with the types there are.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from distrun.spec import models

# ---------------------------------------------------------------- search space expressions


class Choice(models.StrictModel):
    type: Literal["choice"] = "choice"
    values: list[str | bool | int | float] = Field(min_length=1)


class Randint(models.StrictModel):
    """A whole number in [0, upper)."""

    type: Literal["randint"] = "randint"
    upper: models.Whole = Field(ge=1)


class _Range(models.StrictModel):
    min_value: float = Field(allow_inf_nan=False)
    max_value: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        if self.min_value > self.max_value:
            raise ValueError(f"min_value {self.min_value:g} is above max_value {self.max_value:g}")
        return self


class Uniform(_Range):
    type: Literal["uniform"] = "uniform"


class QUniform(_Range):
    type: Literal["quniform"] = "quniform"
    q: float = Field(gt=0, allow_inf_nan=False)


class LogUniform(_Range):
    """exp(uniform(min_value, max_value)): the bounds are exponents, as in Azure ML."""

    type: Literal["loguniform"] = "loguniform"


class QLogUniform(_Range):
    type: Literal["qloguniform"] = "qloguniform"
    q: float = Field(gt=0, allow_inf_nan=False)


class _Gaussian(models.StrictModel):
    mu: float = Field(allow_inf_nan=False)
    sigma: float = Field(gt=0, allow_inf_nan=False)


class Normal(_Gaussian):
    type: Literal["normal"] = "normal"


class QNormal(_Gaussian):
    type: Literal["qnormal"] = "qnormal"
    q: float = Field(gt=0, allow_inf_nan=False)


class LogNormal(_Gaussian):
    type: Literal["lognormal"] = "lognormal"


class QLogNormal(_Gaussian):
    type: Literal["qlognormal"] = "qlognormal"
    q: float = Field(gt=0, allow_inf_nan=False)


Expression = (
    Choice | Randint | Uniform | QUniform | LogUniform | QLogUniform | Normal | QNormal | LogNormal | QLogNormal
)
EXPRESSIONS: dict[str, type[models.StrictModel]] = {
    "choice": Choice,
    "randint": Randint,
    "uniform": Uniform,
    "quniform": QUniform,
    "loguniform": LogUniform,
    "qloguniform": QLogUniform,
    "normal": Normal,
    "qnormal": QNormal,
    "lognormal": LogNormal,
    "qlognormal": QLogNormal,
}
# What each sampling algorithm can sample (Azure ML's rules): grid enumerates, bayesian models ranges.
GRID_EXPRESSIONS = ("choice",)
BAYESIAN_EXPRESSIONS = ("choice", "uniform", "quniform")

# ---------------------------------------------------------------- sampling algorithms


class RandomSampling(models.StrictModel):
    type: Literal["random"] = "random"
    seed: models.Whole | None = Field(None, ge=0)  # a Sobol sequence's seed cannot be negative
    rule: Literal["random", "sobol"] = "random"
    # A power's base: positive and finite, or its draws are no real numbers (distrun.spec.sweep_ranges).
    logbase: Annotated[float, Field(gt=0, allow_inf_nan=False)] | Literal["e"] | None = None


class GridSampling(models.StrictModel):
    type: Literal["grid"] = "grid"


class BayesianSampling(models.StrictModel):
    type: Literal["bayesian"] = "bayesian"


SamplingAlgorithm = RandomSampling | GridSampling | BayesianSampling
ALGORITHMS: dict[str, type[models.StrictModel]] = {
    "random": RandomSampling,
    "grid": GridSampling,
    "bayesian": BayesianSampling,
}

# ---------------------------------------------------------------- early termination


class _Policy(models.StrictModel):
    evaluation_interval: models.Whole = Field(1, ge=0)
    delay_evaluation: models.Whole = Field(0, ge=0)

    @property
    def interval(self) -> int:
        return max(self.evaluation_interval, 1)  # Azure ML's 0 means every interval


class BanditPolicy(_Policy):
    type: Literal["bandit"] = "bandit"
    slack_factor: float | None = Field(None, ge=0, allow_inf_nan=False)
    slack_amount: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_slack(self) -> BanditPolicy:
        if (self.slack_factor is None) == (self.slack_amount is None):
            raise ValueError("a bandit policy takes one of slack_factor and slack_amount")
        return self


class MedianStoppingPolicy(_Policy):
    type: Literal["median_stopping"] = "median_stopping"


class TruncationSelectionPolicy(_Policy):
    type: Literal["truncation_selection"] = "truncation_selection"
    truncation_percentage: models.Whole = Field(ge=1, le=99)
    exclude_finished_jobs: bool = False


Policy = BanditPolicy | MedianStoppingPolicy | TruncationSelectionPolicy
POLICIES: dict[str, type[models.StrictModel]] = {
    "bandit": BanditPolicy,
    "median_stopping": MedianStoppingPolicy,
    "truncation_selection": TruncationSelectionPolicy,
}

# ---------------------------------------------------------------- the sweep job


class Objective(models.StrictModel):
    goal: Literal["maximize", "minimize"]
    primary_metric: str = Field(min_length=1)


class SweepLimits(models.StrictModel):
    max_total_trials: models.Whole = Field(1000, ge=1)
    max_concurrent_trials: models.Whole | None = Field(None, ge=1)
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False, description="seconds for the whole sweep")
    trial_timeout: float | None = Field(None, gt=0, allow_inf_nan=False, description="seconds for each trial")


class SweepJob(models.JobHeader):
    """A sweep job. `search_space`, `sampling_algorithm` and `early_termination` are checked by
    the loader, model by `type` (see the module's doc); here only their shape."""

    type: Literal["sweep"] = "sweep"
    compute: str | None = None
    trial: str | dict[str, Any]
    inputs: dict[str, models.InputValue] = Field(default_factory=dict)
    outputs: dict[str, models.OutputSpec | None] = Field(default_factory=dict)
    search_space: dict[str, dict[str, Any]] = Field(min_length=1)
    sampling_algorithm: str | dict[str, Any] = "random"
    objective: Objective
    early_termination: dict[str, Any] | None = None
    limits: SweepLimits = Field(default_factory=SweepLimits)
    identity: dict[str, Any] | None = None
    queue_settings: dict[str, Any] | None = None
