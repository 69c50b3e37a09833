"""A pipeline's sweep step on local compute: the sweep a child job of the pipeline, its trials
children of the sweep, and a later step reading the best trial's output; run again with only the
later step changed, the sweep step is reused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distrun.store.index import JobIndex
from support.sweep_trial import COMPONENT, TRAIN

# A tracked home: its MLflow store is made by the first trial (an mlflow import, seconds).
pytestmark = pytest.mark.slow

# The trial (train.yml, src/train.py) logs `loss` = |x - 2| without an MLflow import.
PIPELINE = """
    type: pipeline
    inputs: {raw: {type: uri_folder, path: ./data}}
    jobs:
      tune:
        type: sweep
        trial: ./train.yml
        inputs:
          data: ${{parent.inputs.raw}}
        outputs:
          model:
        search_space:
          x: {type: choice, values: [1, 2]}
        sampling_algorithm: grid
        objective: {goal: minimize, primary_metric: loss}
        limits: {max_total_trials: 2, max_concurrent_trials: 2}
      use:
        type: command
        command: cp ${{inputs.model}}/model.txt ${{outputs.read}}/read.txt
        inputs:
          model: ${{parent.jobs.tune.outputs.model}}
        outputs:
          read: {type: uri_folder}
"""


def test_a_later_step_reads_the_best_trial_of_a_sweep_step(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(textwrap.dedent(TRAIN), encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "base.txt").write_text("iris\n", encoding="utf-8")
    (tmp_path / "train.yml").write_text(textwrap.dedent(COMPONENT), encoding="utf-8")
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")

    # The trials' metric in a store of the user's own (MLFLOW_TRACKING_URI): no MLflow server.
    tracked = {"DISTRUN_MLFLOW": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    result = run_cli("run", str(pipeline), "--name", "p", env=tracked, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # The later step read the best trial's output (x=2 minimizes |x - 2|; trial_1, not the first).
    read = distrun_home / "jobs" / "p.use" / "named-outputs" / "read" / "read.txt"
    assert read.read_text() == "x=2 base=iris"
    records = {record.name: record for record in JobIndex(distrun_home / "jobs.db").list(100)}
    assert set(records) == {"p", "p.tune", "p.tune.trial_0", "p.tune.trial_1", "p.use"}
    sweep = records["p.tune"]
    assert (sweep.status, sweep.parent, sweep.sweep["best"]["trial"]) == ("Completed", "p", "trial_1")
    assert {records[f"p.tune.trial_{n}"].parent for n in (0, 1)} == {"p.tune"}
    step = records["p"].steps["tune"]
    assert (step["status"], step["job"], step["sweep"]["best"]["job"]) == ("Completed", "p.tune", "p.tune.trial_1")
    assert "[tune] started as sweep p.tune on local, 1 process a trial" in result.stdout
    # The sweep's own events, as a sweep run alone says them, prefixed by its step.
    assert "[tune] [trial_1] started as job p.tune.trial_1 on local, 1 process: x=2" in result.stdout
    assert "[tune] [trial_1] loss = 0 (interval 1)" in result.stdout
    assert result.stdout.index("[tune] [trial_1] Completed in ") < result.stdout.index("[tune] Completed")
    assert (
        "[tune] Completed" in result.stdout
        and "best trial_1 (job p.tune.trial_1), loss 0, of 2 trials" in result.stdout
    )
    assert result.stdout.index("[tune] Completed") < result.stdout.index("[use] started")
    # The pipeline's logs: a sweep step's are its trials', each line prefixed by step and trial.
    logs = run_cli("logs", "p").stdout
    assert "[tune] [trial_0] [0/0] trained x=1" in logs and "[tune] [trial_1] [0/0] trained x=2" in logs
    shown = run_cli("job", "show", "p").stdout
    assert "Sweep step tune: best trial_1 (job p.tune.trial_1), loss 0, of 2 trials" in shown

    # Only the later step changed: the sweep step is reused (no trial runs again), and the later
    # step reads the earlier sweep's best trial's output.
    pipeline.write_text(textwrap.dedent(PIPELINE).replace("read.txt", "again.txt"), encoding="utf-8")
    result = run_cli("run", str(pipeline), "--name", "p2", env=tracked, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "[tune] Reused: the outputs of job p.tune (same sweep, trial component, inputs and code): "
        "best trial_1 (job p.tune.trial_1), loss 0, of 2 trials"
    ) in result.stdout
    again = distrun_home / "jobs" / "p2.use" / "named-outputs" / "read" / "again.txt"
    assert again.read_text() == "x=2 base=iris"
    names = {record.name for record in JobIndex(distrun_home / "jobs.db").list(100)}
    assert names == set(records) | {"p2", "p2.use"}
    step = JobIndex(distrun_home / "jobs.db").get("p2").steps["tune"]
    assert (step["status"], step["reused"], step["job"]) == ("Completed", True, "p.tune")
    assert step["sweep"]["best"]["job"] == "p.tune.trial_1"
    shown = run_cli("job", "show", "p2").stdout
    assert ["tune", "Reused", "p.tune"] in [line.split()[:3] for line in shown.splitlines()]
    assert "Sweep step tune: best trial_1 (job p.tune.trial_1), loss 0, of 2 trials" in shown


def test_a_pipeline_output_of_a_sweep_step_is_its_best_trials(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    for where, text in {"src/train.py": TRAIN, "data/base.txt": "iris\n", "train.yml": COMPONENT}.items():
        (tmp_path / where).parent.mkdir(exist_ok=True)
        (tmp_path / where).write_text(textwrap.dedent(text), encoding="utf-8")
    bound = textwrap.dedent(PIPELINE).replace(
        "    outputs:\n      model:\n", "    outputs:\n      model: ${{parent.outputs.best}}\n"
    )
    assert "${{parent.outputs.best}}" in bound
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text("outputs: {best: {type: uri_folder}}\n" + bound, encoding="utf-8")
    tracked = {"DISTRUN_MLFLOW": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    result = run_cli("run", str(pipeline), "--name", "p", env=tracked, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    fetched = run_cli("job", "download", "p", "--output-name", "best", "-p", str(tmp_path / "got"))
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "got" / "named-outputs" / "best" / "model.txt").read_text() == "x=2 base=iris"
    # A later job reads it by the pipeline's name for it: the best trial's output.
    reader = tmp_path / "read.yml"
    reader.write_text(
        "command: cat ${{inputs.best}}/model.txt\n"
        "inputs:\n  best: {type: uri_folder, path: azureml://jobs/p/outputs/best}\n",
        encoding="utf-8",
    )
    assert run_cli("run", str(reader), "--name", "reader").returncode == 0
    assert run_cli("logs", "reader").stdout.endswith("x=2 base=iris\n")
