"""Which parameters a sweep's next trial gets: random, grid and bayesian sampling, as Azure ML
defines them. Pure, but for bayesian sampling, which asks Optuna (the `sweep` extra).

- **grid**: the cartesian product of the `choice` expressions' values, the first parameter
  varying slowest, in file order; the sweep ends when every combination was tried.
- **random**: each parameter drawn from its expression's distribution. Every draw is a point
  u in [0, 1) per parameter (Python's Mersenne Twister, seeded by `seed`; or, with
  `rule: sobol`, the next point of a scrambled Sobol sequence from scipy), mapped through the
  expression's inverse distribution (`value_at`): choice picks values[floor(u * n)], randint
  floor(u * upper), uniform min + u * (max - min), normal mu + sigma * Phi^-1(u); the log forms
  are exp (or `logbase` **) of those, and the q forms round(x / q) * q.
- **bayesian**: Optuna's TPE sampler over choice, uniform and quniform, told each trial's
  final primary metric (a trial without one is told it failed).

A sweep without a seed draws one and records it, so any random sweep can be replayed.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from statistics import NormalDist
from typing import Any, Protocol

from distrun.core.errors import DistrunError
from distrun.spec.sweep_models import (
    BayesianSampling,
    Choice,
    Expression,
    GridSampling,
    LogNormal,
    LogUniform,
    Normal,
    QLogNormal,
    QLogUniform,
    QNormal,
    QUniform,
    Randint,
    RandomSampling,
    SamplingAlgorithm,
    Uniform,
)

Parameters = dict[str, Any]
SWEEP_EXTRA = "pip install 'distrun[sweep]'"
_EDGE = 1e-12  # u is kept inside (0, 1): Phi^-1 of 0 or 1 is infinite


class Search(Protocol):
    seed: int | None

    def suggest(self) -> tuple[int, Parameters] | None:
        """The next trial's number (0, 1, ...) and parameters; None once the space is exhausted."""

    def tell(self, number: int, value: float | None) -> None:
        """A trial's final primary metric (None: it has none, it failed or was stopped)."""


def _clean(value: float) -> float:
    """A q-rounded value as written: 0.30000000000000004 -> 0.3."""
    return float(f"{value:.12g}")


def _quantized(value: float, q: float | None) -> float:
    return value if q is None else _clean(round(value / q) * q)


def value_at(expression: Expression, u: float, logbase: float | None = None) -> Any:
    """The expression's value at the point u in [0, 1) of its distribution (its inverse CDF)."""
    u = min(max(u, _EDGE), 1 - _EDGE)
    if isinstance(expression, Choice):
        return expression.values[min(int(u * len(expression.values)), len(expression.values) - 1)]
    if isinstance(expression, Randint):
        return min(int(u * expression.upper), expression.upper - 1)
    q = getattr(expression, "q", None)
    power = (lambda x: math.exp(x)) if logbase is None else (lambda x: logbase**x)
    if isinstance(expression, (Uniform, QUniform, LogUniform, QLogUniform)):
        x = expression.min_value + u * (expression.max_value - expression.min_value)
        if isinstance(expression, (LogUniform, QLogUniform)):
            x = power(x)
        return _quantized(x, q)
    if isinstance(expression, (Normal, QNormal, LogNormal, QLogNormal)):
        x = expression.mu + expression.sigma * NormalDist().inv_cdf(u)
        if isinstance(expression, (LogNormal, QLogNormal)):
            x = power(x)
        return _quantized(x, q)
    raise TypeError(f"not a search space expression: {expression!r}")


def example_value(expression: Expression, logbase: float | str | None = None) -> Any:
    """A value of the expression's range, to check a trial's job with before any is drawn (with
    random sampling's `logbase`, the base its trials' log forms are drawn with)."""
    if isinstance(expression, Choice):
        return expression.values[0]
    return value_at(expression, 0.5, math.e if logbase == "e" else logbase)  # type: ignore[arg-type]


def example_parameters(space: dict[str, Expression], algorithm: SamplingAlgorithm) -> Parameters:
    """Each parameter at a value of its range, as `algorithm` draws it."""
    logbase = getattr(algorithm, "logbase", None)
    return {name: example_value(expression, logbase) for name, expression in space.items()}


class GridSearch:
    seed: int | None = None

    def __init__(self, space: dict[str, Expression]) -> None:
        choices = [expression.values for expression in space.values()]  # type: ignore[union-attr]
        self.names = list(space)
        self.points: Iterator[tuple[Any, ...]] = itertools.product(*choices)
        self.number = 0

    def suggest(self) -> tuple[int, Parameters] | None:
        point = next(self.points, None)
        if point is None:
            return None
        self.number += 1
        return self.number - 1, dict(zip(self.names, point, strict=True))

    def tell(self, number: int, value: float | None) -> None:
        pass  # grid's order does not depend on results


def grid_size(space: dict[str, Expression]) -> int:
    return math.prod(len(expression.values) for expression in space.values())  # type: ignore[union-attr]


class RandomSearch:
    def __init__(self, space: dict[str, Expression], algorithm: RandomSampling) -> None:
        self.space = space
        self.seed = algorithm.seed if algorithm.seed is not None else random.SystemRandom().randrange(1 << 31)
        self.logbase = math.e if algorithm.logbase == "e" else algorithm.logbase
        self.number = 0
        self.sobol: Any = None
        self.rng = random.Random(self.seed)
        if algorithm.rule == "sobol":
            try:
                from scipy.stats import qmc
            except ImportError:
                raise DistrunError(
                    "sobol sampling (`rule: sobol`) needs scipy, which distrun's `sweep` extra brings",
                    f"{SWEEP_EXTRA}, or use `rule: random`",
                ) from None
            self.sobol = qmc.Sobol(d=len(space), scramble=True, seed=self.seed)

    def suggest(self) -> tuple[int, Parameters] | None:
        if self.sobol is not None:
            point = [float(u) for u in self.sobol.random(1)[0]]
        else:
            point = [self.rng.random() for _ in self.space]
        parameters = {
            name: value_at(expression, u, self.logbase)
            for (name, expression), u in zip(self.space.items(), point, strict=True)
        }
        self.number += 1
        return self.number - 1, parameters

    def tell(self, number: int, value: float | None) -> None:
        pass  # each draw is independent of the results


class BayesianSearch:
    """Optuna's TPE sampler: told each trial's result, it proposes the next from them."""

    def __init__(self, space: dict[str, Expression], goal: str, seed: int | None = None) -> None:
        try:
            import optuna
        except ImportError:
            raise DistrunError(
                "bayesian sampling needs Optuna, which distrun's `sweep` extra brings",
                f"{SWEEP_EXTRA}, or use random or grid sampling",
            ) from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.space = space
        self.study = optuna.create_study(direction=goal, sampler=optuna.samplers.TPESampler(seed=self.seed))
        self.asked: dict[int, Any] = {}
        self.distributions = {name: self._distribution(expression) for name, expression in space.items()}

    def _distribution(self, expression: Expression) -> Any:
        d = self.optuna.distributions
        if isinstance(expression, Choice):
            return d.CategoricalDistribution(expression.values)
        return d.FloatDistribution(expression.min_value, expression.max_value)  # type: ignore[union-attr]

    def suggest(self) -> tuple[int, Parameters] | None:
        trial = self.study.ask(self.distributions)
        self.asked[trial.number] = trial
        parameters = {
            name: _quantized(trial.params[name], getattr(expression, "q", None))
            for name, expression in self.space.items()
        }
        return trial.number, parameters

    def tell(self, number: int, value: float | None) -> None:
        trial = self.asked.pop(number, None)
        if trial is None:
            return
        if value is None or not math.isfinite(value):
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)


def search_for(space: dict[str, Expression], algorithm: SamplingAlgorithm, goal: str) -> Search:
    """The search a sweep's sampling algorithm names."""
    if isinstance(algorithm, GridSampling):
        return GridSearch(space)
    if isinstance(algorithm, BayesianSampling):
        return BayesianSearch(space, goal)
    return RandomSearch(space, algorithm)


def first_trials(space: dict[str, Expression], algorithm: SamplingAlgorithm, goal: str, count: int) -> list[Parameters]:
    """The first `count` trials' parameters (`distrun plan`): for bayesian sampling, those it
    proposes before any result is known."""
    search = search_for(space, algorithm, goal)
    found = []
    for _ in range(count):
        suggested = search.suggest()
        if suggested is None:
            break
        found.append(suggested[1])
    return found
