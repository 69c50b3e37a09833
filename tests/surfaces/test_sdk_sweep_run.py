"""A sweep built with the SDK runs for real on local compute: `command(...)(x=Choice(...)).sweep(...)`
submitted, streamed and read back with `MLClient.jobs`, through the runner `distrun run sweep.yml`
uses (the document it built kept in the sweep's folder). Metrics and the best trial:
tests/surfaces/test_sweep_cli.py (they need an MLflow store, made once there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distrun import Input, MLClient, command
from distrun.core.errors import JobFailedError
from distrun.store.layout import Layout
from distrun.sweep import Choice, GridSamplingAlgorithm, SweepJob
from support.sdk import sdk_env, write

__all__ = ["sdk_env"]  # the fixture, imported for pytest


def test_an_sdk_sweep_runs_each_trial_streams_and_reads_back(
    sdk_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "0")  # no metric is read: the trials run, none is ranked
    write(
        sdk_env / "src" / "trial.py",
        """
        import pathlib, sys
        print("x", sys.argv[1], "data", (pathlib.Path(sys.argv[2]) / "sample.txt").read_text().strip())
        sys.exit(3 if sys.argv[1] == "2" else 0)
        """,
    )
    job = command(
        code="./src",
        command="python trial.py ${{inputs.x}} ${{inputs.data}}",
        inputs={"x": 0, "data": Input(type="uri_folder", path="./data")},
    )
    sweep = job(x=Choice(values=[1, 2])).sweep(primary_metric="loss", goal="Minimize", sampling_algorithm="grid")
    sweep.set_limits(max_total_trials=2, max_concurrent_trials=2)
    client = MLClient(compute="local")

    returned = client.jobs.create_or_update(sweep, experiment_name="tune")
    assert isinstance(returned, SweepJob) and returned.status in ("Queued", "Running")
    name = returned.name
    # No trial could be ranked (tracking off): the sweep failed, and stream raises, saying why.
    with pytest.raises(JobFailedError, match="no trial could be ranked: tracking is off"):
        client.jobs.stream(name)
    out = capsys.readouterr().out
    assert f"[trial_0] Completed (job {name}.trial_0)\n" in out
    # A trial that failed says why, as `distrun run sweep.yml` does.
    assert f"[trial_1] Failed (job {name}.trial_1): rank 0 on node 0 exited with code 3\n" in out
    assert "Trials: 2" in out and "Best trial: none (no completed trial logged loss)" in out

    got = client.jobs.get(name)
    assert isinstance(got, SweepJob) and (got.status, got.experiment_name) == ("Failed", "tune")
    assert [(s["parameters"], s["status"]) for s in got.steps.values()] == [
        ({"x": 1}, "Completed"),
        ({"x": 2}, "Failed"),
    ]
    assert isinstance(got.sampling_algorithm, GridSamplingAlgorithm) and got.search_space == {"x": Choice([1, 2])}
    assert got.best_trial is None and "best_child_run_id" not in got.properties
    # Each trial is a job of its own, given its value and the sweep's input.
    trials = client.jobs.list(parent_job_name=name)
    assert sorted(t.name for t in trials) == [f"{name}.trial_0", f"{name}.trial_1"]
    layout = Layout(sdk_env.parent / "home")
    for n in (0, 1):
        log = (layout.job(f"{name}.trial_{n}").root / "user_logs" / "std_log_process_00.txt").read_text()
        assert f"x {n + 1} data 1 2 3" in log
    # The document it was run from, as a sweep YAML file.
    document = json.loads((layout.job(name).root / "sweep.yml").read_text())
    assert document["trial"]["command"] == "python trial.py ${{search_space.x}} ${{inputs.data}}"
    assert document["search_space"] == {"x": {"type": "choice", "values": [1, 2]}}
