"""Why a sweep could not rank a trial: what the trials logged instead, and the closest name."""

from __future__ import annotations

import pytest

from distrun.runner.sweep_unranked import logged_text, unranked_why


def test_a_trial_that_missed_the_metric_names_what_it_logged_and_the_closest() -> None:
    assert logged_text("acurracy", ["accuracy", "loss"]) == " (it logged: accuracy, loss; did you mean 'accuracy'?)"
    assert logged_text("score", ["loss"]) == " (it logged: loss)"
    assert logged_text("score", []) == " (it logged no metric)"
    assert logged_text("score", None) == " (its metrics were not tracked)"


def test_the_sweeps_reason_joins_what_every_completed_trial_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")
    why = unranked_why("val_loss", [["loss"], ["loss", "val_los"], None])
    head = "no trial could be ranked: no completed trial logged"
    assert why == f"{head} val_loss (it logged: loss, val_los; did you mean 'val_los'?)"
    assert unranked_why("loss", [None]) == f"{head} loss (its metrics were not tracked)"


def test_tracking_turned_off_is_said_as_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "0")
    why = unranked_why("loss", [None, None])
    assert why == "no trial could be ranked: tracking is off (DISTRUN_MLFLOW=0), so no trial's loss was read"
