"""`load_job` of a pipeline or a sweep YAML file (azure-ai-ml's `load_job`, as Microsoft's notebooks
call it): the file is checked at load, what the notebook then sets changes the document that is
submitted, and problems keep pointing at the file. Nothing here starts a job
(tests/surfaces/test_sdk_pipeline_run.py submits a loaded pipeline)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distrun import Input, MLClient, load_job
from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_data
from distrun.sdk.pipeline_job import PipelineJob
from distrun.sweep import Choice, SweepJob

PIPELINE = """
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
display_name: evaluate
inputs:
  sample_ratio: 0.5
  data: {type: uri_folder, path: ./data}
settings:
  default_compute: local
  continue_on_step_failure: true
jobs:
  prepare:
    type: command
    code: ./src
    command: python prepare.py ${{inputs.ratio}} ${{inputs.data}}
    inputs:
      ratio: ${{parent.inputs.sample_ratio}}
      data: ${{parent.inputs.data}}
"""

SWEEP = """
$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
type: sweep
trial:
  code: ./src
  command: python train.py --lr ${{search_space.lr}}
search_space:
  lr: {type: loguniform, min_value: -6, max_value: -1}
sampling_algorithm: {type: random, seed: 7, rule: sobol}
objective: {goal: minimize, primary_metric: loss}
early_termination: {type: median_stopping, evaluation_interval: 2, delay_evaluation: 4}
limits: {max_total_trials: 8, max_concurrent_trials: 2, trial_timeout: 600}
"""


def project(tmp_path: Path) -> Path:
    for name in ("src", "data", "elsewhere"):
        (tmp_path / name).mkdir()
    for name in ("pipeline.yml", "sweep.yml"):
        text = PIPELINE if name == "pipeline.yml" else SWEEP
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return tmp_path


def test_a_loaded_pipeline_is_its_file_until_the_notebook_changes_it(tmp_path: Path, monkeypatch) -> None:
    folder = project(tmp_path)
    monkeypatch.chdir(folder / "elsewhere")  # the notebook runs in another folder than the file's
    job = load_job(source=folder / "pipeline.yml")
    assert isinstance(job, PipelineJob) and list(job.jobs) == ["prepare"]
    assert (job.display_name, job.inputs.sample_ratio, job.settings.default_compute) == ("evaluate", 0.5, "local")
    unchanged = job._to_data()
    assert unchanged["jobs"] == {
        "prepare": {
            "type": "command",
            "code": "./src",
            "command": "python prepare.py ${{inputs.ratio}} ${{inputs.data}}",
            "inputs": {"ratio": "${{parent.inputs.sample_ratio}}", "data": "${{parent.inputs.data}}"},
        }
    }
    assert unchanged["settings"] == {"default_compute": "local", "continue_on_step_failure": True}

    job.inputs.sample_ratio = 0.01
    job.inputs.data = Input(type="uri_folder", path="../data")  # from Python: where the notebook runs
    job.settings.default_compute = "cpu-cluster"
    job.jobs.prepare.compute = "gpu-cluster"
    job.display_name = None
    changed = job._to_data()
    assert changed["inputs"]["sample_ratio"] == 0.01 and changed["inputs"]["data"]["type"] == "uri_folder"
    assert Path(changed["inputs"]["data"]["path"]).resolve() == folder / "data"
    assert changed["settings"] == {"default_compute": "cpu-cluster", "continue_on_step_failure": True}
    assert changed["jobs"]["prepare"]["compute"] == "gpu-cluster" and "display_name" not in changed
    # The submitted document loads as the file would, `./src` still from the file's folder.
    loaded = load_pipeline_data(changed, job._base_dir, job._source)
    assert loaded.steps["prepare"].base_dir == folder and loaded.steps["prepare"].document["compute"] == "gpu-cluster"


def test_params_override_and_a_bad_file_are_read_at_load(tmp_path: Path) -> None:
    folder = project(tmp_path)
    job = load_job(folder / "pipeline.yml", params_override=[{"inputs.sample_ratio": 0.25}])
    assert job.inputs.sample_ratio == 0.25
    broken = folder / "broken.yml"
    broken.write_text((folder / "pipeline.yml").read_text().replace("${{inputs.ratio}}", "${{inputs.rate}}"))
    with pytest.raises(ValidationError) as caught:
        load_job(broken)
    assert f"{broken}:14:5: jobs.prepare.command" in caught.value.render() and "rate" in caught.value.render()


def test_a_loaded_sweep_keeps_every_setting_and_takes_the_notebooks_changes(tmp_path: Path, monkeypatch) -> None:
    folder = project(tmp_path)
    monkeypatch.chdir(folder)
    job = load_job("./sweep.yml")
    assert isinstance(job, SweepJob)
    data = job._to_data()
    for key in ("trial", "search_space", "sampling_algorithm", "objective", "early_termination", "limits"):
        assert data[key] == job._document[key], key  # nothing lost or renamed on the way
    job.set_limits(max_total_trials=3)
    job.search_space["lr"] = Choice([0.1, 0.01])
    job.trial.environment_variables = {"SEED": "1"}
    job.compute = "local"
    changed = job._to_data()
    assert changed["limits"] == {"max_total_trials": 3, "max_concurrent_trials": 2, "trial_timeout": 600}
    assert changed["search_space"] == {"lr": {"type": "choice", "values": [0.1, 0.01]}}
    assert changed["trial"]["environment_variables"] == {"SEED": "1"} and changed["compute"] == "local"
    loaded = job._job_source().load()
    assert loaded.spec.limits.max_total_trials == 3 and loaded.trial_base_dir == folder


def test_a_loaded_sweep_made_invalid_in_python_is_refused_at_the_files_line(tmp_path: Path, monkeypatch) -> None:
    folder = project(tmp_path)
    monkeypatch.chdir(folder)
    job = load_job("sweep.yml")
    job.early_termination = None
    job.sampling_algorithm = "grid"  # grid cannot sample loguniform
    result = MLClient().jobs.validate(job)
    assert not result.passed
    assert "grid sampling cannot sample a loguniform" in result.error_messages["search_space.lr.type"]
    with pytest.raises(ValidationError) as caught:
        MLClient().jobs.validate(job, raise_on_failure=True)
    assert "sweep.yml:" in caught.value.render()


def test_a_loaded_pipeline_is_validated_without_running_and_its_problems_point_at_the_file(
    tmp_path: Path, monkeypatch
) -> None:
    folder = project(tmp_path)
    monkeypatch.chdir(folder)
    job = load_job("pipeline.yml")
    assert MLClient().jobs.validate(job).passed
    job.jobs.prepare.inputs.ratio = "${{parent.inputs.sample_rate}}"  # no such pipeline input
    result = MLClient().jobs.validate(job)
    assert not result.passed and list(result.error_messages) == ["jobs.prepare.inputs.ratio"], result
    with pytest.raises(ValidationError) as caught:
        MLClient().jobs.validate(job, raise_on_failure=True)
    assert "pipeline.yml:16:" in caught.value.render() and "sample_rate" in caught.value.render()
