"""Sweep sampling as Azure ML defines it: grid in order, random by each distribution (seeded,
reproducible), sobol through scipy, bayesian through Optuna."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

from distrun.plan.sweep_search import BayesianSearch, GridSearch, RandomSearch, first_trials, grid_size, value_at
from distrun.spec import sweep_models as m


def _space() -> dict[str, m.Expression]:
    return {
        "opt": m.Choice(values=["sgd", "adam", "lamb"]),
        "layers": m.Randint(upper=4),
        "lr": m.LogUniform(min_value=-6, max_value=-1),
        "drop": m.QUniform(min_value=0, max_value=0.5, q=0.1),
        "w": m.Normal(mu=1, sigma=0.5),
    }


def test_grid_is_the_cartesian_product_of_the_choices_first_parameter_slowest() -> None:
    space = {"a": m.Choice(values=[1, 2]), "b": m.Choice(values=["x", "y", "z"])}
    search = GridSearch(space)
    found = []
    while (suggested := search.suggest()) is not None:
        found.append(suggested)
    assert found == [
        (0, {"a": 1, "b": "x"}),
        (1, {"a": 1, "b": "y"}),
        (2, {"a": 1, "b": "z"}),
        (3, {"a": 2, "b": "x"}),
        (4, {"a": 2, "b": "y"}),
        (5, {"a": 2, "b": "z"}),
    ]
    assert grid_size(space) == 6


def test_each_expression_maps_a_point_through_its_inverse_distribution() -> None:
    assert value_at(m.Choice(values=["a", "b", "c"]), 0.0) == "a"
    assert value_at(m.Choice(values=["a", "b", "c"]), 0.5) == "b"
    assert value_at(m.Choice(values=["a", "b", "c"]), 0.999) == "c"
    assert value_at(m.Randint(upper=10), 0.55) == 5
    assert value_at(m.Uniform(min_value=2, max_value=4), 0.25) == 2.5
    assert value_at(m.QUniform(min_value=0, max_value=1, q=0.1), 0.33) == 0.3
    assert value_at(m.LogUniform(min_value=-2, max_value=0), 0.5) == math.exp(-1)
    assert value_at(m.QLogUniform(min_value=0, max_value=2, q=1), 0.5) == 3.0  # round(e / 1) * 1
    assert value_at(m.Normal(mu=1, sigma=2), 0.5) == 1
    assert value_at(m.Normal(mu=0, sigma=1), 0.975) == NormalDist().inv_cdf(0.975)
    assert value_at(m.QNormal(mu=10, sigma=2, q=5), 0.5) == 10
    assert value_at(m.LogNormal(mu=0, sigma=1), 0.5) == 1
    assert value_at(m.QLogNormal(mu=math.log(7), sigma=1, q=3), 0.5) == 6  # round(7 / 3) * 3
    assert value_at(m.LogUniform(min_value=1, max_value=3), 0.5, logbase=10) == 100


def test_random_draws_each_parameter_from_its_distribution_with_the_seed() -> None:
    search = RandomSearch(_space(), m.RandomSampling(seed=42))
    first = [search.suggest() for _ in range(3)]
    rng = random.Random(42)
    expected = []
    for number in range(3):
        u = [rng.random() for _ in range(5)]
        expected.append(
            (
                number,
                {
                    "opt": ["sgd", "adam", "lamb"][int(u[0] * 3)],
                    "layers": int(u[1] * 4),
                    "lr": math.exp(-6 + u[2] * 5),
                    "drop": float(f"{round(u[3] * 0.5 / 0.1) * 0.1:.12g}"),
                    "w": 1 + 0.5 * NormalDist().inv_cdf(u[4]),
                },
            )
        )
    assert first == expected
    assert first[0][1] == {
        "opt": "adam",
        "layers": 0,
        "lr": 0.009805092277048469,
        "drop": 0.1,
        "w": 1.3162520182572837,
    }
    again = RandomSearch(_space(), m.RandomSampling(seed=42))
    assert [again.suggest() for _ in range(3)] == first
    assert RandomSearch(_space(), m.RandomSampling(seed=43)).suggest() != first[0]


def test_a_sweep_without_a_seed_draws_one_that_replays_it() -> None:
    search = RandomSearch(_space(), m.RandomSampling())
    assert isinstance(search.seed, int)
    replay = RandomSearch(_space(), m.RandomSampling(seed=search.seed))
    assert [search.suggest() for _ in range(4)] == [replay.suggest() for _ in range(4)]


def test_sobol_spreads_the_points_of_its_scrambled_sequence() -> None:
    space = {"x": m.Uniform(min_value=0, max_value=1), "y": m.Choice(values=[0, 1])}
    points = first_trials(space, m.RandomSampling(seed=3, rule="sobol"), "maximize", 8)
    assert points == first_trials(space, m.RandomSampling(seed=3, rule="sobol"), "maximize", 8)
    # A Sobol sequence of 8 points puts one in each eighth of every dimension.
    assert sorted(int(p["x"] * 8) for p in points) == list(range(8))
    assert sorted(p["y"] for p in points) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_bayesian_proposes_from_the_results_it_was_told() -> None:
    space = {"x": m.Uniform(min_value=-5, max_value=5), "kind": m.Choice(values=["a", "b"])}
    search = BayesianSearch(space, "minimize", seed=1)
    best = math.inf
    for _ in range(30):
        number, parameters = search.suggest()
        assert -5 <= parameters["x"] <= 5 and parameters["kind"] in ("a", "b")
        value = (parameters["x"] - 2) ** 2 + (0 if parameters["kind"] == "b" else 3)
        best = min(best, value)
        search.tell(number, value)
    # TPE after 30 results lands near the minimum (x = 2, kind b); 30 uniform draws rarely get within 0.5.
    assert best < 0.5
    replay = BayesianSearch(space, "minimize", seed=1)
    assert replay.suggest() == BayesianSearch(space, "minimize", seed=1).suggest()
