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
