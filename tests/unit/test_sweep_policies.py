"""Early termination as Azure ML defines its policies: exact decisions over trials' metric values."""

from __future__ import annotations

from distrun.plan.sweep_policies import applies_at, stop_reason
from distrun.spec.sweep_models import BanditPolicy, MedianStoppingPolicy, TruncationSelectionPolicy


def test_a_policy_applies_from_its_delay_at_each_interval() -> None:
    policy = BanditPolicy(slack_factor=0.1, evaluation_interval=2, delay_evaluation=3)
    assert [n for n in range(1, 11) if applies_at(policy, n)] == [4, 6, 8, 10]
    every = MedianStoppingPolicy(evaluation_interval=0)  # Azure's 0: every interval
    assert [n for n in range(1, 4) if applies_at(every, n)] == [1, 2, 3]


def test_bandit_stops_a_trial_beyond_the_slack_of_the_best_at_that_interval() -> None:
    values = {"trial_0": [0.9, 0.6, 0.52], "trial_1": [0.8, 0.7, 0.71], "trial_2": [0.85, 0.5]}
    factor = BanditPolicy(slack_factor=0.1)
    assert stop_reason(factor, "minimize", values, "trial_1", 3) == (
        "stopped early by bandit policy at interval 3: 0.71 > best 0.52 x 1.1"
    )
    assert stop_reason(factor, "minimize", values, "trial_1", 2) == (
        "stopped early by bandit policy at interval 2: 0.7 > best 0.5 x 1.1"
    )
    assert stop_reason(factor, "minimize", values, "trial_0", 2) == (  # 0.6 > 0.55
        "stopped early by bandit policy at interval 2: 0.6 > best 0.5 x 1.1"
    )
    assert stop_reason(factor, "minimize", values, "trial_2", 2) is None  # it is the best
    amount = BanditPolicy(slack_amount=0.15)
    assert stop_reason(amount, "minimize", values, "trial_0", 2) is None  # 0.6 <= 0.5 + 0.15
    assert stop_reason(amount, "maximize", values, "trial_1", 1) is None  # 0.8 >= 0.9 - 0.15
    assert stop_reason(BanditPolicy(slack_amount=0.07), "maximize", values, "trial_2", 1) is None  # 0.85 >= 0.83
    assert stop_reason(BanditPolicy(slack_amount=0.07), "maximize", values, "trial_1", 1) == (
        "stopped early by bandit policy at interval 1: 0.8 < best 0.9 - 0.07"
    )
    assert stop_reason(BanditPolicy(slack_factor=0.2), "maximize", values, "trial_1", 1) is None  # 0.8 >= 0.9 / 1.2


def test_median_stopping_compares_the_best_so_far_with_the_median_of_running_averages() -> None:
    values = {"a": [1.0, 2.0, 3.0], "b": [2.0, 2.0, 2.0], "c": [0.5, 0.5, 1.0]}
    policy = MedianStoppingPolicy()
    # Averages over 3 intervals: a 2.0, b 2.0, c 0.667; median 2.0. c's best is 1.0 < 2.0.
    assert stop_reason(policy, "maximize", values, "c", 3) == (
        "stopped early by median stopping policy at interval 3: best 1 < median of running averages 2"
    )
    assert stop_reason(policy, "maximize", values, "a", 3) is None
    assert stop_reason(policy, "minimize", values, "b", 3) is None  # best 2.0, not above the median 2.0
    assert stop_reason(policy, "maximize", {"a": [1.0]}, "a", 1) is None  # alone: nothing to compare


def test_truncation_selection_stops_the_lowest_percentage_at_an_interval() -> None:
    values = {"t0": [0.1], "t1": [0.5], "t2": [0.3], "t3": [0.9], "t4": [0.7]}
    policy = TruncationSelectionPolicy(truncation_percentage=40)
    # Five trials, 40%: the two lowest (maximize) are t0 (0.1) and t2 (0.3).
    assert stop_reason(policy, "maximize", values, "t0", 1) == (
        "stopped early by truncation selection policy at interval 1: 0.1 is in the lowest 40% (rank 5 of 5)"
    )
    assert stop_reason(policy, "maximize", values, "t2", 1) == (
        "stopped early by truncation selection policy at interval 1: 0.3 is in the lowest 40% (rank 4 of 5)"
    )
    assert stop_reason(policy, "maximize", values, "t1", 1) is None
    assert stop_reason(policy, "minimize", values, "t3", 1) is not None
    excluding = TruncationSelectionPolicy(truncation_percentage=40, exclude_finished_jobs=True)
    # With t1 and t3 ended: three ranked, 40% of 3 is 1: only t0.
    assert stop_reason(excluding, "maximize", values, "t2", 1, ended={"t1", "t3"}) is None
    assert stop_reason(excluding, "maximize", values, "t0", 1, ended={"t1", "t3"}) is not None
