"""What `job show`, `job list` and the execution summary say of one job agree."""

from __future__ import annotations

import time

from distrun.cli.views import job_list_text, job_show_text
from distrun.core.job_kind import JobKind
from distrun.runner.report import duration_text, summary_head
from distrun.store.index import JobRecord


def _record(name: str = "long_job", seconds: float = 185.234, parent: str | None = None) -> JobRecord:
    start = time.time() - 1000
    return JobRecord(
        name, "Completed", "local", "/nowhere", start - 1, started_at=start, ended_at=start + seconds, parent=parent
    )


def test_a_duration_reads_the_same_in_the_summary_job_show_and_job_list():
    record = _record()
    said = "185.23 s (3m05s)"
    assert duration_text(185.234) == said
    assert f"Duration: {said}" in summary_head(record)
    assert f"Duration: {said}" in job_show_text(record).splitlines()
    row = job_list_text([record]).splitlines()[2]
    assert row.split(None, 4)[-1] == said, row
    assert duration_text(4.2) == "4.20 s" and duration_text(3725) == "3725.00 s (1h02m05s)"


def test_a_childs_show_names_its_parents_kind_from_the_parents_record():
    trial = _record("search.best_lr", parent="search")  # a name the trial pattern does not know
    assert "Sweep: search" in job_show_text(trial, JobKind.SWEEP).splitlines()
    assert "Pipeline: flow" in job_show_text(_record("flow.train", parent="flow"), JobKind.PIPELINE).splitlines()
    # Without the parent's record, the child's name says which it is.
    assert "Sweep: search" in job_show_text(_record("search.trial_3", parent="search")).splitlines()


def test_job_show_text_has_each_metrics_last_value():
    shown = job_show_text(_record(), None, {"loss": 0.412345678, "accuracy": 0.9}).splitlines()
    assert "Metrics:  accuracy=0.9, loss=0.412346" in shown
    assert not any(line.startswith("Metrics:") for line in job_show_text(_record()).splitlines())


def test_a_running_parent_shows_its_progress_in_show_and_list(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: the progress is not cut
    trials = {
        "trial_0": {"job": "s.trial_0", "status": "Completed", "metric": 0.52},
        "trial_1": {"job": "s.trial_1", "status": "Completed", "metric": 0.41},
        "trial_2": {"job": "s.trial_2", "status": "Failed"},
        "trial_3": {"job": "s.trial_3", "status": "Running"},
        "trial_4": {"job": "s.trial_4", "status": "Queued"},
    }
    sweep = {"objective": {"goal": "Minimize", "primary_metric": "loss"}, "limits": {"max_total_trials": 20}}
    record = JobRecord("s", "Running", "local", "/nowhere", time.time(), steps=trials, sweep=sweep, kind=JobKind.SWEEP)
    said = "trials 3/20 done, 2 running, best 0.41"
    assert f"Progress: {said}" in job_show_text(record).splitlines()
    assert f"sweep: {said}" in job_list_text([record], now=time.time())
    steps = {
        "a": {"job": "p.a", "status": "Completed"},
        "b": {"job": "p.b", "status": "Running"},
        "c": {"job": "p.c", "status": "NotStarted"},
    }
    pipeline = JobRecord("p", "Running", "local", "/nowhere", time.time(), steps=steps, kind=JobKind.PIPELINE)
    assert "Progress: steps 1/3 done, 1 running" in job_show_text(pipeline).splitlines()
    ended = JobRecord("p", "Completed", "local", "/nowhere", time.time(), steps=steps, kind=JobKind.PIPELINE)
    assert "pipeline (3 steps)" in job_list_text([ended])
