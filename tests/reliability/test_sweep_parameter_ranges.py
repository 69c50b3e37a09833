"""Search space parameters at the edge of floating point: refused at load with file:line, never a
traceback in `plan`, `job validate` or `run`, never an `inf` or `nan` handed to a trial.

The samplers map a point u of [0, 1) through each expression's inverse distribution; a range
wider than a float, an exponent past e**709, a q too small for its values or a sigma whose draws
overflow made `plan` and `run` raise OverflowError (or pass `inf` on). Every numeric parameter is
now range-checked by the loader, so the three verbs refuse the same files, and nothing is recorded.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrun.core.errors import ValidationError
from distrun.loading.sweep_loader import load_sweep_data
from distrun.plan.sweep_search import RandomSearch, example_value, value_at
from support.reliability import assert_refused, run_capped

EXAMPLES = int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "200"))
HUGE = "1" + "0" * 400  # 10**400, a whole number no float holds

# (expression as YAML, the key path of the problem, a word of its message), each a traceback or an
# `inf` draw before the range checks.
EXTREMES = {
    "uniform wider than a float": ("{type: uniform, min_value: -1e308, max_value: 1e308}", "x.max_value", "wider"),
    "loguniform past e**709": ("{type: loguniform, min_value: 0, max_value: 1000}", "x.max_value", "e to the power"),
    "loguniform of huge exponents": ("{type: loguniform, min_value: -1e308, max_value: 1e308}", "x.max_value", "wider"),
    "qloguniform past e**709": ("{type: qloguniform, min_value: 0, max_value: 1000, q: 1}", "x.max_value", "e to"),
    "lognormal of a large mu": ("{type: lognormal, mu: 1000, sigma: 1}", "x.mu", "e to the power"),
    "lognormal of a huge sigma": ("{type: lognormal, mu: 0, sigma: 1e308}", "x.sigma", "7.03 sigma"),
    "normal of a huge sigma": ("{type: normal, mu: 0, sigma: 1e308}", "x.sigma", "7.03 sigma"),
    "normal at the float's edge": ("{type: normal, mu: 1e308, sigma: 1e308}", "x.sigma", "7.03 sigma"),
    "quniform of a tiny q": ("{type: quniform, min_value: 0, max_value: 1, q: 5e-324}", "x.q", "too small"),
    "quniform of huge values": ("{type: quniform, min_value: 1e300, max_value: 1e308, q: 1e-300}", "x.q", "too small"),
    "quniform rounding past the float": (
        "{type: quniform, min_value: 0, max_value: 1.7e308, q: 1e308}",
        "x.q",
        "too small",
    ),
    "qnormal of a tiny q": ("{type: qnormal, mu: 0, sigma: 1, q: 5e-324}", "x.q", "too small"),
    "randint of a huge upper": (f"{{type: randint, upper: {HUGE}}}", "x.upper", "largest float"),
    "choice of a huge whole number": (f"{{type: choice, values: [1, {HUGE}]}}", "x.values[1]", "largest float"),
    "choice of .inf": ("{type: choice, values: [0.5, .inf]}", "x.values[1]", "not a finite number"),
    "choice of .nan": ("{type: choice, values: [.nan]}", "x.values[0]", "not a finite number"),
}


def sweep_yaml(expression: str, name: str = "edge", sampling: str = "random") -> str:
    return (
        "type: sweep\n"
        f"name: {name}\n"
        "trial:\n"
        '  command: python -c "print(${{search_space.x}})"\n'
        "search_space:\n"
        f"  x: {expression}\n"
        f"sampling_algorithm: {sampling}\n"
        "objective: {goal: maximize, primary_metric: acc}\n"
        "limits: {max_total_trials: 2}\n"
    )


VERBS = (("plan",), ("job", "validate", "-f"), ("run",))


@pytest.mark.parametrize("case", list(EXTREMES))
def test_an_unsampleable_parameter_is_refused_with_its_line(distrun_home, tmp_path, case):
    """Each case through one verb (the three take turns): they share the loader, whose refusal
    the next test shows for all three at once."""
    expression, key, word = EXTREMES[case]
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml(expression))
    verb = VERBS[list(EXTREMES).index(case) % len(VERBS)]
    done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
    assert_refused(done, f"{sweep}:6:", f"search_space.{key}: search space parameter 'x'", word)
    assert not (distrun_home / "jobs").exists()  # nothing recorded


@pytest.mark.parametrize("case", ["loguniform past e**709", "quniform of a tiny q", "randint of a huge upper"])
def test_plan_validate_and_run_refuse_the_same_parameter(distrun_home, tmp_path, case):
    expression, key, word = EXTREMES[case]
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml(expression))
    for verb in VERBS:
        done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
        assert_refused(done, f"{sweep}:6:", f"search_space.{key}: search space parameter 'x'", word)
    assert not (distrun_home / "jobs").exists()


def test_a_negative_logbase_is_refused_not_drawn_as_a_complex_number(distrun_home, tmp_path):
    sweep = tmp_path / "sweep.yml"
    text = sweep_yaml("{type: loguniform, min_value: 0, max_value: 1}", sampling="{type: random, logbase: -2}")
    sweep.write_text(text)
    for verb in (["plan"], ["job", "validate", "-f"]):
        done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
        assert_refused(done, f"{sweep}:7:", "sampling_algorithm.logbase")


def test_a_negative_seed_is_refused_before_a_sobol_sequence_is_seeded_with_it(distrun_home, tmp_path):
    sweep = tmp_path / "sweep.yml"
    text = sweep_yaml("{type: uniform, min_value: 0, max_value: 1}", sampling="{type: random, seed: -1, rule: sobol}")
    sweep.write_text(text)
    for verb in VERBS:
        done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
        assert_refused(done, f"{sweep}:7:", "sampling_algorithm.seed")
    assert not (distrun_home / "jobs").exists()


def test_parameters_at_the_edge_that_can_be_sampled_still_run(distrun_home, tmp_path):
    """The checks refuse only what cannot be drawn: the largest range a float holds runs."""
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml("{type: uniform, min_value: 0, max_value: 1.7e308}", name="edge_ok"))
    done = run_capped(distrun_home, "run", str(sweep), timeout=180)
    # Every trial ran with its drawn value; with tracking off (the suite's default) no trial can be
    # ranked, which ends the sweep Failed for that reason and no other.
    assert done.stdout.count("] Completed in ") == 2, done.stdout + done.stderr
    assert "Reason: no trial could be ranked: tracking is off" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "inf" not in done.stdout.replace("info", "")


# ---------------------------------------------------------------- every expression, fuzzed

FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 5e-324, -5e-324, 1e-300, 1.0, 700.0, 710.0, 1e154, 1e308, -1e308, 1.7976931348623157e308]),
)
POSITIVE = st.one_of(st.floats(min_value=5e-324, allow_infinity=False), st.sampled_from([5e-324, 1e-300, 1e308]))
WHOLE = st.one_of(st.integers(min_value=-5, max_value=1 << 64), st.sampled_from([10**308, 2 * 10**308, 10**400]))


def _range(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, Any] = {"type": st.just(kind), "min_value": FLOATS, "max_value": FLOATS}
    if kind.startswith("q"):
        fields["q"] = POSITIVE
    return st.fixed_dictionaries(fields)


def _gaussian(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, Any] = {"type": st.just(kind), "mu": FLOATS, "sigma": POSITIVE}
    if kind.startswith("q"):
        fields["q"] = POSITIVE
    return st.fixed_dictionaries(fields)


expressions = st.one_of(
    *(_range(kind) for kind in ("uniform", "quniform", "loguniform", "qloguniform")),
    *(_gaussian(kind) for kind in ("normal", "qnormal", "lognormal", "qlognormal")),
    st.fixed_dictionaries({"type": st.just("randint"), "upper": WHOLE}),
    st.fixed_dictionaries(
        {"type": st.just("choice"), "values": st.lists(st.one_of(FLOATS, WHOLE, st.text(max_size=3)), min_size=1)}
    ),
)
logbases = st.one_of(st.none(), st.just("e"), st.floats(min_value=1e-3, max_value=1e3))
POINTS = (0.0, 1e-12, 0.25, 0.5, 0.75, 1 - 1e-12, 0.9999999999999999)


def _finite(value: Any) -> bool:
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return abs(value) <= 1.7976931348623157e308
    return isinstance(value, float) and math.isfinite(value)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=expressions, logbase=logbases, seed=st.integers(0, 1 << 30))
def test_every_loaded_expression_draws_only_finite_numbers(tmp_path_factory, expression, logbase, seed):
    """A search space the loader accepts never overflows and never draws inf, nan or a complex
    number, at the ends of [0, 1) or anywhere in it; one it refuses is a ValidationError."""
    algorithm: dict[str, Any] = {"type": "random", "seed": seed}
    if logbase is not None:
        algorithm["logbase"] = logbase
    data = {
        "type": "sweep",
        "trial": {"command": "echo ${{search_space.x}}"},
        "search_space": {"x": expression},
        "sampling_algorithm": algorithm,
        "objective": {"goal": "maximize", "primary_metric": "acc"},
    }
    try:
        sweep = load_sweep_data(data, Path(tmp_path_factory.getbasetemp()))
    except ValidationError as exc:
        assert all(problem.key_path for problem in exc.problems)
        return
    parsed = sweep.search_space["x"]
    base = math.e if logbase == "e" else logbase
    points = [*POINTS, *(random.Random(seed).random() for _ in range(20))]
    drawn = [value_at(parsed, u, base) for u in points]
    drawn.append(example_value(parsed, logbase))
    search = RandomSearch(sweep.search_space, sweep.algorithm)  # type: ignore[arg-type]
    drawn += [search.suggest()[1]["x"] for _ in range(5)]  # type: ignore[index]
    assert all(_finite(value) for value in drawn), (expression, logbase, drawn)
