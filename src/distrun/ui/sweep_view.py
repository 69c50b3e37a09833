"""What a sweep's page shows, as plain data: its settings, its best trial and its trials, best first.

Everything here comes from the sweep's record in the job index: `sweep` (objective, sampling,
seed, policy, limits, search space, the best trial once it ended) and `steps` (each trial's job,
status, parameters, last primary metric value, intervals, reason), which only distrun writes;
no file of a job folder is read. A trial's parameters and reason are still the user's and the
job's text (a choice value, a failure's message): the templates escape them, as the charts
(distrun.ui.sweep_charts) escape their own markup. Every value is checked for its type: a record
an older distrun wrote may lack a key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from distrun.runner.summaries import ranked_trials
from distrun.store.index import JobRecord
from distrun.ui.pipeline_view import tally, took

MAX_ROWS = 500  # trials listed on the page (a sweep may run thousands); the charts show them all
MAX_VALUE_CHARS = 80  # a longer parameter value (a choice string) is cut in the table
LOG_FORMS = ("loguniform", "qloguniform", "lognormal", "qlognormal")


@dataclass
class TrialView:
    key: str
    number: int | None
    job: str
    state: str
    metric: float | None
    intervals: int
    duration: str
    parameters: dict[str, Any]  # name -> the trial's value, as recorded
    reason: str
    linked: bool  # whether its job exists (a trial whose submission failed has none)
    best: bool = False

    @property
    def css(self) -> str:
        return "state-" + self.state.lower().replace(" ", "-")

    def shown(self, name: str) -> str:
        return shown_value(self.parameters[name]) if name in self.parameters else ""


@dataclass
class BestView:
    trial: str
    job: str
    metric: float
    parameters: list[tuple[str, str]]  # (name, value as shown)
    final: bool  # the sweep ended and named it; else the best completed trial so far


@dataclass
class SweepView:
    goal: str
    metric: str  # the primary metric's name
    sampling: str
    policy: str
    limits: list[tuple[str, str]]
    search_space: list[tuple[str, str]]  # (parameter, its expression in words)
    parameter_names: list[str]  # the table's parameter columns
    expressions: dict[str, dict[str, Any]]  # parameter -> its search space expression, as recorded
    trials: list[TrialView] = field(default_factory=list)  # best first
    best: BestView | None = None


def shown_value(value: Any) -> str:
    """A parameter value or metric as the CLI prints it (floats to 6 significant digits)."""
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def metric_of(value: object) -> float | None:
    """A recorded metric value, if it is a finite number (anything else ranks no trial)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def sweep_view(record: JobRecord, now: float | None = None) -> SweepView:
    sweep = _mapping(record.sweep)
    objective = _mapping(sweep.get("objective"))
    goal = str(objective.get("goal") or "")
    space = _mapping(sweep.get("search_space"))
    trials = trial_views(record, goal, now)
    names = [str(name) for name in space]
    names += sorted({n for t in trials for n in t.parameters} - set(names))
    best = _best(sweep, trials, record.terminal)
    for trial in trials:
        trial.best = best is not None and trial.key == best.trial
    return SweepView(
        goal=goal,
        metric=str(objective.get("primary_metric") or "metric"),
        sampling=_sampling(_mapping(sweep.get("sampling_algorithm")), sweep.get("seed")),
        policy=_settings(_mapping(sweep.get("early_termination"))) or "none",
        limits=_limits(_mapping(sweep.get("limits")), sweep.get("max_concurrent")),
        search_space=[(str(name), _settings(_mapping(expression))) for name, expression in space.items()],
        parameter_names=names,
        expressions={str(name): _mapping(expression) for name, expression in space.items()},
        trials=trials,
        best=best,
    )


def trial_views(record: JobRecord, goal: str, now: float | None = None) -> list[TrialView]:
    """One view per trial, best first by the objective (those without a metric last, in start order)."""
    steps = _mapping(record.steps)
    states = {str(key): _mapping(state) for key, state in steps.items()}
    ranked = ranked_trials({key: {"metric": metric_of(s.get("metric"))} for key, s in states.items()}, goal)
    views = []
    for key, _ in ranked:
        state = states[key]
        status = str(state.get("status") or "Queued")
        reason = str(state.get("reason") or "")
        number = state.get("number")
        intervals = state.get("intervals")
        views.append(
            TrialView(
                key=key,
                number=number if isinstance(number, int) and not isinstance(number, bool) else None,
                job=str(state.get("job") or ""),
                state=status,
                metric=metric_of(state.get("metric")),
                intervals=intervals if isinstance(intervals, int) else 0,
                duration=took(state.get("started_at"), state.get("ended_at"), status, now),
                parameters={str(k): v for k, v in _mapping(state.get("parameters")).items()},
                reason=reason,
                linked=bool(state.get("job")) and not reason.startswith("not started"),
            )
        )
    return views


def counts(record: JobRecord) -> str:
    """'3 trials: 2 Completed, 1 Running', for the jobs list."""
    states = [str(_mapping(state).get("status") or "Queued") for state in _mapping(record.steps).values()]
    return tally(states, "trial")


def _best(sweep: dict[str, Any], trials: list[TrialView], ended: bool) -> BestView | None:
    named = _mapping(sweep.get("best"))
    metric = metric_of(named.get("metric"))
    if named.get("trial") and metric is not None:
        parameters = _mapping(named.get("parameters"))
        shown = [(str(k), shown_value(v)) for k, v in parameters.items()]
        return BestView(str(named["trial"]), str(named.get("job") or ""), metric, shown, final=True)
    if ended:
        return None  # it ended naming none: no completed trial logged the metric
    for trial in trials:  # best first: the first completed one with a metric is the best so far
        if trial.state == "Completed" and trial.metric is not None:
            shown = [(k, shown_value(v)) for k, v in trial.parameters.items()]
            return BestView(trial.key, trial.job, trial.metric, shown, final=False)
    return None


def _sampling(algorithm: dict[str, Any], seed: object) -> str:
    kind = str(algorithm.get("type") or "")
    rule = " (sobol)" if algorithm.get("rule") == "sobol" else ""
    base = f", log base {algorithm['logbase']}" if algorithm.get("logbase") is not None else ""
    return f"{kind}{rule}" + (f", seed {seed}" if seed is not None else "") + base


def _settings(values: dict[str, Any]) -> str:
    """{'type': 'bandit', 'slack_factor': 0.1} -> 'bandit: slack_factor 0.1'."""
    kind = str(values.get("type") or "")
    rest = ", ".join(f"{k} {_listed(v)}" for k, v in values.items() if k != "type" and v is not None)
    return f"{kind}: {rest}" if kind and rest else kind or rest


def _listed(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return shown_value(value)


def _limits(limits: dict[str, Any], at_once: object) -> list[tuple[str, str]]:
    shown = [
        (str(k), f"{v:g} s" if k in ("timeout", "trial_timeout") and isinstance(v, (int, float)) else str(v))
        for k, v in limits.items()
        if v is not None
    ]
    if isinstance(at_once, int):
        shown.append(("at once", str(at_once)))
    return shown


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
