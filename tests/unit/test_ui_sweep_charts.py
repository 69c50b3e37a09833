"""The web UI's view of a sweep, from its record alone: trials best first, the best so far, and the
charts (a log axis for the log forms, a column per choice value, every text escaped), whatever
types an odd record holds."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from distrun.store.index import JobRecord
from distrun.ui.sweep_charts import MAX_POINTS, by_parameter, charts
from distrun.ui.sweep_view import counts, sweep_view


def _sweep(trials: dict, goal: str = "maximize", status: str = "Running") -> JobRecord:
    sweep = {
        "objective": {"goal": goal, "primary_metric": "acc"},
        "sampling_algorithm": {"type": "random", "rule": "sobol"},
        "seed": 7,
        "early_termination": {"type": "bandit", "slack_factor": 0.1, "evaluation_interval": 1},
        "limits": {"max_total_trials": 9, "timeout": 3600.0},
        "search_space": {
            "lr": {"type": "loguniform", "min_value": -7, "max_value": -1},
            "opt": {"type": "choice", "values": ["sgd", "<adam>"]},
        },
        "max_concurrent": 2,
        "best": None,
    }
    return JobRecord(name="s", status=status, compute="sweep", folder="/x", created_at=0.0, steps=trials, sweep=sweep)


def _trial(number: int, status: str, metric: object, lr: float, opt: str) -> dict:
    return {
        "job": f"s.trial_{number}",
        "number": number,
        "status": status,
        "metric": metric,
        "intervals": 1,
        "parameters": {"lr": lr, "opt": opt},
        "started_at": 1.0,
        "ended_at": 3.0,
        "reason": None,
    }


TRIALS = {
    "trial_0": _trial(0, "Completed", 0.5, 0.001, "sgd"),
    "trial_1": _trial(1, "Running", 0.9, 0.01, "<adam>"),
    "trial_2": _trial(2, "Completed", 0.7, 0.1, "rmsprop"),  # a value the search space does not list
    "trial_3": _trial(3, "Failed", "nan", 0.1, "sgd"),  # not a number: ranks last, drawn nowhere
}


def test_trials_are_ranked_by_the_goal_and_the_best_so_far_is_the_best_completed() -> None:
    view = sweep_view(_sweep(TRIALS))
    assert [t.key for t in view.trials] == ["trial_1", "trial_2", "trial_0", "trial_3"]
    assert view.best is not None and (view.best.trial, view.best.metric, view.best.final) == ("trial_2", 0.7, False)
    assert view.sampling == "random (sobol), seed 7"
    assert view.policy == "bandit: slack_factor 0.1, evaluation_interval 1"
    assert view.limits == [("max_total_trials", "9"), ("timeout", "3600 s"), ("at once", "2")]
    assert counts(_sweep(TRIALS)) == "4 trials: 2 Completed, 1 Running, 1 Failed"
    ended = sweep_view(_sweep(TRIALS, status="Completed"))
    assert ended.best is None  # an ended sweep that named no best has none: the record is the word


def test_a_log_parameter_is_drawn_on_a_log_axis_and_a_choice_one_column_per_value() -> None:
    view = sweep_view(_sweep(TRIALS))
    drawn = dict(charts(view))
    assert list(drawn) == ["trial", "lr", "opt"]
    for svg in drawn.values():
        ET.fromstring(svg)  # well-formed, the choice value <adam> escaped
    lr = {c.get("data-trial"): float(c.get("cx")) for c in ET.fromstring(drawn["lr"]).iter("circle")}
    assert set(lr) == {"trial_0", "trial_1", "trial_2"}  # trial_3's metric is no number
    # 0.001, 0.01, 0.1: evenly spaced on a log axis
    assert abs((lr["trial_1"] - lr["trial_0"]) - (lr["trial_2"] - lr["trial_1"])) < 0.2
    opt = ET.fromstring(drawn["opt"])
    columns = {c.get("data-x"): float(c.get("cx")) for c in opt.iter("circle")}
    assert columns["sgd"] < columns["<adam>"] < columns["rmsprop"]  # the search space's order, then the rest
    assert [t.text for t in opt.iter("text") if t.get("text-anchor") == "middle"][-3:] == ["sgd", "<adam>", "rmsprop"]


def test_a_numeric_parameter_holding_text_is_drawn_as_categories_and_no_metric_draws_nothing() -> None:
    trials = [t for t in sweep_view(_sweep(TRIALS)).trials if t.metric is not None]
    trials[0].parameters["lr"] = "<b>"
    svg = by_parameter("acc", "lr", {"type": "uniform"}, trials)
    assert {c.get("data-x") for c in ET.fromstring(svg).iter("circle")} == {"<b>", "0.001", "0.1"}
    assert charts(sweep_view(_sweep({"trial_0": _trial(0, "Running", None, 0.1, "sgd")}))) == []


def test_a_sweep_of_many_trials_draws_its_best_ones() -> None:
    many = {f"trial_{n}": _trial(n, "Completed", float(n), 0.01, "sgd") for n in range(MAX_POINTS + 200)}
    drawn = dict(charts(sweep_view(_sweep(many))))  # maximize: the highest numbers are the best
    points = [c for c in ET.fromstring(drawn["trial"]).iter("circle")]
    assert len(points) == MAX_POINTS and min(float(c.get("data-value")) for c in points) == 200.0


def test_a_record_of_odd_types_gives_a_page_not_an_error() -> None:
    record = _sweep({"trial_0": "junk", "trial_1": {"parameters": "x", "metric": True, "number": "1"}})
    record.sweep = {"objective": "x", "search_space": {"a": 5}, "limits": [1], "best": {"trial": "t", "metric": "0.1"}}
    view = sweep_view(record)
    assert [(t.key, t.metric, t.number, t.parameters) for t in view.trials] == [
        ("trial_0", None, None, {}),
        ("trial_1", None, None, {}),
    ]
    assert view.best is None and view.limits == [] and view.search_space == [("a", "")] and charts(view) == []
