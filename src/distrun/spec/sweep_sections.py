"""A sweep's typed sections: each search space expression, the sampling algorithm and the early
termination policy, each a mapping whose `type` names the model that checks the rest
(`distrun.spec.sweep_models`).

An unknown or missing `type` is said as such, with the types there are; a model's own problems
are said at their keys under the section, with its file:line:col.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from distrun.core.errors import Problem
from distrun.spec import models, sweep_models
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.pipeline_steps import copy_positions
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

# Hints of the models' own rules (their messages start so).
_HINTS = {
    "min_value": "min_value is the lower bound: swap the two",
    "a bandit policy": "slack_factor is a ratio to the best trial (0.1: within 10%), slack_amount a distance "
    "in the metric's units: keep one",
}


def rekeyed(problem: Problem, prefix: str) -> Problem:
    """`problem` with its key path under `prefix`."""
    return replace(problem, key_path=f"{prefix}.{problem.key_path}" if problem.key_path else prefix)


class SweepSections:
    """Reads the typed sections of the sweep document `data`; `problems` collects what is wrong."""

    def __init__(self, data: dict[str, Any], source: str, smap: SourceMap, problems: list[Problem]) -> None:
        self.data = data
        self.source = source
        self.smap = smap
        self.problems = problems

    def problem(self, message: str, path: KeyPath, hint: str) -> None:
        self.problems.append(Problem(message, format_key_path(path), self.smap.find(path), hint))

    def search_space(self) -> dict[str, Any]:
        """Each parameter's expression model, for the parameters whose expression is right."""
        raw = self.data.get("search_space")
        space: dict[str, Any] = {}
        if not isinstance(raw, dict):
            return space  # the schema said what is wrong
        for name, expression in raw.items():
            at: KeyPath = ("search_space", str(name))
            if not re.fullmatch(models.NAME_PATTERN, str(name)):
                self.problem(
                    f"search space parameter name {name!r} is not allowed",
                    at,
                    "use letters, digits and '_', not starting with a digit: it is read as ${{search_space.NAME}}",
                )
                continue
            if not isinstance(expression, dict):
                continue  # the schema said it
            model = self._model_of(expression, sweep_models.EXPRESSIONS, at, "expression")
            found = None if model is None else self._model(model, expression, at)
            if found is not None:
                space[str(name)] = found
        return space

    def typed(self, key: str, table: dict[str, Any], default: str | None) -> Any:
        """`sampling_algorithm` / `early_termination`: a type name (`random`) or a mapping with `type`."""
        value = self.data.get(key, default)
        if value is None:
            return None
        what = key.replace("_", " ")
        if isinstance(value, str):
            value = {"type": value}
        if not isinstance(value, dict):
            return None  # the schema said it
        at: KeyPath = (key,)
        model = self._model_of(value, table, at, what)
        return None if model is None else self._model(model, value, at)

    def _model_of(self, value: dict[str, Any], table: dict[str, Any], at: KeyPath, what: str) -> Any:
        kind = value.get("type")
        listed = ", ".join(table)
        if kind is None:
            self.problem(f"the {what} has no `type`", at, f"add `type:` with one of {listed}")
            return None
        if str(kind) not in table:
            import difflib

            close = difflib.get_close_matches(str(kind).lower(), list(table), n=1, cutoff=0.6)
            mean = f"did you mean {close[0]!r}? " if close else ""
            self.problem(f"unknown {what} type {kind!r}", (*at, "type"), f"{mean}use one of {listed}")
            return None
        return table[str(kind)]

    def _model(self, model: type[models.StrictModel], value: Any, at: KeyPath) -> Any:
        """`value` (the mapping at `at`) validated by `model`; None, with its problems said, if wrong."""
        try:
            return model.model_validate(value)
        except ModelError as exc:
            # Positions below `at`; without one (a sweep built in Python), the nearest above it.
            sub = SourceMap(self.source, {(): self.smap.find(at)})
            copy_positions(self.smap, at, sub, ())
            for found in translate(exc, value, sub, model):
                hint = found.hint or next((h for start, h in _HINTS.items() if found.message.startswith(start)), "")
                self.problems.append(replace(rekeyed(found, format_key_path(at)), hint=hint))
            return None


def rule_problems(space: dict[str, Any], algorithm: Any, policy: Any, smap: SourceMap) -> list[Problem]:
    """The rules Azure ML sets between the sections: grid samples only `choice`, bayesian only
    some expressions and takes no early termination, `logbase` is random sampling's."""
    problems: list[Problem] = []

    def problem(message: str, path: KeyPath, hint: str) -> None:
        problems.append(Problem(message, format_key_path(path), smap.find(path), hint))

    kind = getattr(algorithm, "type", None)
    allowed = {"grid": sweep_models.GRID_EXPRESSIONS, "bayesian": sweep_models.BAYESIAN_EXPRESSIONS}.get(kind)
    if allowed is not None:
        for name, expression in space.items():
            if expression.type not in allowed:
                why = "enumerates discrete values" if kind == "grid" else "models only these"
                problem(
                    f"{kind} sampling cannot sample a {expression.type} expression: it {why} ({', '.join(allowed)})",
                    ("search_space", name, "type"),
                    "use random sampling, or write the parameter as "
                    + ("`type: choice` with the values to try" if kind == "grid" else "one of those"),
                )
    if kind == "bayesian" and policy is not None:
        problem(
            "bayesian sampling takes no early termination policy: each trial's result guides the next",
            ("early_termination",),
            "remove `early_termination`, or use random sampling",
        )
    if kind == "random" and algorithm.rule == "sobol" and algorithm.logbase is not None:
        problem(
            "logbase applies to random sampling's `random` rule, not to sobol",
            ("sampling_algorithm", "logbase"),
            "remove `logbase`, or drop `rule: sobol`",
        )
    return problems
