"""A trial that diverged never wins: NaN and infinite metric values never rank or drive a policy.

MLflow's SQL store keeps a NaN as 0 with a flag and an infinity as the largest float of its sign;
read as plain numbers, a minimize sweep's diverged trial (NaN, -inf) was its best, its outputs
went on to the next steps, and a bandit policy measured every other trial against it and stopped
them. Here real ranks log with mlflow into distrun's server, one trial at a time (so the policy
sees the diverged values first); the pure policy is also asked directly with each kind of value.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from distrun.plan.sweep_policies import stop_reason
from distrun.spec.sweep_models import BanditPolicy, MedianStoppingPolicy, TruncationSelectionPolicy
from distrun.store.index import JobIndex
from support.cli import distrun_cli

TRIAL = """
    import sys
    import mlflow
    mlflow.log_metric("loss", float(sys.argv[1]), step=0)
"""
SWEEP = """
    type: sweep
    trial:
      command: python trial.py ${{search_space.loss}}
      code: src
    search_space:
      loss: {type: choice, values: ["nan", 0.5, "-inf", 0.25, "inf"]}
    sampling_algorithm: grid
    objective: {goal: minimize, primary_metric: loss}
    early_termination: {type: bandit, slack_factor: 0.1}
    limits: {max_concurrent_trials: 1}
"""


@pytest.mark.slow
def test_a_diverged_trial_is_never_the_best_nor_stops_the_others(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "trial.py").write_text(textwrap.dedent(TRIAL), encoding="utf-8")
    (tmp_path / "sweep.yml").write_text(textwrap.dedent(SWEEP), encoding="utf-8")
    result = distrun_cli(
        home,
        "run",
        str(tmp_path / "sweep.yml"),
        "--name",
        "diverged",
        env={"DISTRUN_MLFLOW": "1", "DISTRUN_MLFLOW_SERVER_IDLE": "1"},
        timeout=400,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # Shown as what they are.
    assert "[trial_0] loss = nan (interval 1)" in out
    assert "[trial_2] loss = -inf (interval 1)" in out
    assert "[trial_4] loss = inf (interval 1)" in out
    # No trial was stopped by a policy measuring it against a non-number.
    assert "stopped early" not in out, out
    assert "Best trial: trial_3 (job diverged.trial_3), loss 0.25 (minimize)" in out
    record = {r.name: r for r in JobIndex(home / "jobs.db").list(100)}["diverged"]
    steps = record.steps or {}
    assert [steps[f"trial_{n}"]["status"] for n in range(5)] == ["Completed"] * 5
    assert math.isnan(steps["trial_0"]["metric"])
    assert [steps[f"trial_{n}"]["metric"] for n in (1, 2, 3, 4)] == [0.5, -math.inf, 0.25, math.inf]
    assert (record.sweep or {})["best"]["trial"] == "trial_3"
    # The table ranks the numbers, then lists the non-numbers as they are.
    table = out[out.index("Trials: 5") :].splitlines()[1:7]
    assert [row.split()[:3] for row in table] == [
        ["TRIAL", "STATUS", "LOSS"],
        ["trial_3", "Completed", "0.25"],
        ["trial_1", "Completed", "0.5"],
        ["trial_0", "Completed", "nan"],
        ["trial_2", "Completed", "-inf"],
        ["trial_4", "Completed", "inf"],
    ]
    # `distrun metrics` reads the values back as what the ranks logged, not MLflow's stand-ins.
    for trial, value in ((0, "nan"), (2, "-inf"), (4, "inf")):
        shown = distrun_cli(home, "metrics", f"diverged.trial_{trial}")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[1].endswith(f"  loss  step 0  {value}"), shown.stdout


NON_NUMBERS = (math.nan, math.inf, -math.inf)


@pytest.mark.parametrize("odd", NON_NUMBERS, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("goal", ["minimize", "maximize"])
def test_no_policy_is_driven_by_a_non_number(odd: float, goal: str) -> None:
    bandit = BanditPolicy(type="bandit", slack_amount=0.1)
    median = MedianStoppingPolicy(type="median_stopping")
    truncation = TruncationSelectionPolicy(type="truncation_selection", truncation_percentage=50)
    sane = {"a": [0.5], "b": [0.52]}
    with_odd = {**sane, "odd": [odd]}
    for policy in (bandit, median, truncation):
        # The odd trial is never judged, and never changes the verdict on the others.
        assert stop_reason(policy, goal, with_odd, "odd", 1) is None, policy
        for trial in sane:
            assert stop_reason(policy, goal, with_odd, trial, 1) == stop_reason(policy, goal, sane, trial, 1), (
                policy,
                trial,
            )
    # A history with a non-number among its values is no running average.
    averaged = {"a": [0.5, 0.5], "b": [0.6, 0.6], "odd": [0.1, odd]}
    assert stop_reason(median, goal, averaged, "odd", 2) is None
    assert stop_reason(median, goal, averaged, "a", 2) == stop_reason(
        median, goal, {k: v for k, v in averaged.items() if k != "odd"}, "a", 2
    )
