"""Every numeric parameter of a sweep's search space, range-checked at load: each expression's
values must be finite numbers for every point the samplers draw, so that `plan`, `validate` and
`run` never meet an overflow (a Python traceback) or hand a trial `inf` or `nan`.

The samplers (`distrun.plan.sweep_search.value_at`) draw a point u of [0, 1) kept 1e-12 away
from both ends and map it through the expression's inverse distribution: min + u * (max - min),
or mu + sigma * Phi^-1(u); the log forms raise `logbase` (e) to that, the q forms round it to a
multiple of q. All of these are monotonic in u, so an expression is sampleable when its values
at the two ends are finite: that is what is checked here, with the same arithmetic.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

from distrun.core.errors import Position, Problem
from distrun.spec import sweep_models
from distrun.spec.source_map import KeyPath, format_key_path

# The samplers keep u this far from 0 and 1 (distrun.plan.sweep_search._EDGE).
SAMPLED_EDGE = 1e-12
# How far a normal expression's draws go from mu, in sigmas: Phi^-1 at those points (about ∓7.03).
NORMAL_REACH = (NormalDist().inv_cdf(SAMPLED_EDGE), NormalDist().inv_cdf(1 - SAMPLED_EDGE))
FLOAT_MAX = sys.float_info.max

_RANGE_FORMS = (sweep_models.Uniform, sweep_models.QUniform, sweep_models.LogUniform, sweep_models.QLogUniform)
_LOG_FORMS = (sweep_models.LogUniform, sweep_models.QLogUniform, sweep_models.LogNormal, sweep_models.QLogNormal)
_FLOATS = "the largest float (about 1.8e308)"


def range_problems(
    name: str, expression: Any, logbase: float | None, find: Callable[..., Position | None]
) -> list[Problem]:
    """What makes the parameter `name`'s expression unsampleable (with `logbase`: random
    sampling's, None for e); `find(key_path)` says where a key was written."""
    at: KeyPath = ("search_space", name)
    found = _problem_of(expression, logbase)
    if found is None:
        return []
    key, message, hint = found
    path = (*at, *key)
    return [Problem(f"search space parameter {name!r}: {message}", format_key_path(path), find(path), hint)]


def _problem_of(expression: Any, logbase: float | None) -> tuple[KeyPath, str, str] | None:
    """(the key at fault, what is wrong, the fix), or None."""
    if isinstance(expression, sweep_models.Choice):
        return _choice_problem(expression)
    if isinstance(expression, sweep_models.Randint):
        if expression.upper > FLOAT_MAX:
            return ("upper",), f"upper {_short(expression.upper)} is beyond {_FLOATS}", "lower `upper`"
        return None
    if isinstance(expression, _RANGE_FORMS):
        if not math.isfinite(expression.max_value - expression.min_value):
            return (
                ("max_value",),
                f"the range from min_value {expression.min_value:g} to max_value {expression.max_value:g} is wider "
                f"than {_FLOATS}",
                "narrow the range",
            )
        ends = (expression.min_value, expression.max_value)
        keys = (("min_value",), ("max_value",))
    else:
        ends = tuple(expression.mu + expression.sigma * reach for reach in NORMAL_REACH)
        keys = (("mu",), ("mu",))
        if not all(math.isfinite(end) for end in ends):
            return (
                ("sigma",),
                f"draws reach mu ± {NORMAL_REACH[1]:.2f} sigma, beyond {_FLOATS}",
                "lower sigma (or move mu towards 0)",
            )
    if isinstance(expression, _LOG_FORMS):
        values = [_power(end, logbase) for end in ends]
        if None in values:
            base = "e" if logbase is None else f"{logbase:g}"
            return (
                keys[values.index(None)],
                f"{base} to the power of its draws ({ends[0]:g} to {ends[1]:g}) is beyond {_FLOATS}",
                f"a {expression.type} expression's values are {base} ** x: keep x within ±{_log_max(logbase):.0f}",
            )
        ends = tuple(value for value in values if value is not None)
    q = getattr(expression, "q", None)
    if q is not None and not all(_quantizable(end, q) for end in ends):
        return (
            ("q",),
            f"q {q:g} is too small for values up to {max(abs(end) for end in ends):g}: value / q is beyond {_FLOATS}",
            "raise q",
        )
    return None


def _choice_problem(expression: sweep_models.Choice) -> tuple[KeyPath, str, str] | None:
    for index, value in enumerate(expression.values):
        if isinstance(value, bool) or isinstance(value, str):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            return ("values", index), f"value {value!r} is not a finite number", "give finite numbers, or quote it"
        if isinstance(value, int) and abs(value) > FLOAT_MAX:
            return ("values", index), f"value {_short(value)} is beyond {_FLOATS}", "give a smaller number, or quote it"
    return None


def _quantizable(value: float, q: float) -> bool:
    """Whether `value` rounds to a finite multiple of q, as the q forms round their draws."""
    return math.isfinite(value / q) and math.isfinite(round(value / q) * q)


def _power(exponent: float, logbase: float | None) -> float | None:
    """`logbase` (e) to the `exponent`, or None where that is no finite number."""
    try:
        value = math.exp(exponent) if logbase is None else logbase**exponent
    except (OverflowError, ZeroDivisionError):
        return None
    return value if isinstance(value, float) and math.isfinite(value) else None


def _log_max(logbase: float | None) -> float:
    """The largest exponent of `logbase` (e) a float holds."""
    scale = 1.0 if logbase is None or logbase == 1 else abs(math.log(logbase))
    return math.log(FLOAT_MAX) / scale


def _short(number: int) -> str:
    """A huge whole number, written short (about 10^400) rather than with its 401 digits."""
    if abs(number) < 10**20:
        return str(number)
    return f"{'-' if number < 0 else ''}about 10^{int(abs(number).bit_length() * math.log10(2))}"
