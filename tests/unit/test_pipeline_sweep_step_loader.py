"""A pipeline's sweep step (`type: sweep`, Azure ML's sweep node) loads as the sweep job it runs
as: its inputs bound as a command step's, its sweep keys checked by the sweep loader, every
problem at once with its position; its outputs are its best trial's (the data layer resolves a
sweep's outputs so), and a sweep without a best trial fails the step."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError, ValidationError
from distrun.core.job_status import JobStatus
from distrun.data.locations import job_output_path
from distrun.loading.pipeline_loader import load_pipeline_file
from distrun.loading.sweep_step import load_step_sweep
from distrun.runner.pipeline_sweeps import step_outcome, step_request
from distrun.runner.sweep_run import requested_sweep
from distrun.spec.loaded_pipeline import UpstreamOutput
from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import Layout

# Microsoft's component shape: literal inputs with defaults, the parameters among them.
COMPONENT = """
    $schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
    type: command
    inputs:
      data: {type: uri_folder}
      c_value: {type: number, default: 1.0}
      kernel: {type: string, default: rbf}
      degree: {type: integer, default: 3}
      seed: {type: integer}
    outputs:
      model_output: {type: mlflow_model}
      test_data: {type: uri_folder}
    code: ./src
    command: >-
      python train.py --data ${{inputs.data}} --C ${{inputs.c_value}} --kernel ${{inputs.kernel}}
      --degree ${{inputs.degree}} --seed ${{inputs.seed}}
      --model_output ${{outputs.model_output}} --test_data ${{outputs.test_data}}
"""

PIPELINE = """
    $schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
    type: pipeline
    inputs:
      raw: {type: uri_folder, path: ./data}
    settings:
      default_compute: azureml:cpu-cluster
    jobs:
      prep:
        type: command
        command: cp -r ${{inputs.raw}}/. ${{outputs.prepared}}
        inputs:
          raw: ${{parent.inputs.raw}}
        outputs:
          prepared: {type: uri_folder}
      sweep_step:
        type: sweep
        trial: ./train.yml
        inputs:
          data: ${{parent.jobs.prep.outputs.prepared}}
          degree: 4
        outputs:
          model_output:
          test_data:
        sampling_algorithm: random
        search_space:
          c_value: {type: uniform, min_value: 0.5, max_value: 0.9}
          kernel: {type: choice, values: [rbf, linear, poly]}
          seed: {type: randint, upper: 10}
        objective: {goal: minimize, primary_metric: training_f1_score}
        limits: {max_total_trials: 5, max_concurrent_trials: 3, timeout: 7200}
      predict_step:
        type: command
        command: ls ${{inputs.model}} ${{inputs.test_data}}
        inputs:
          model: ${{parent.jobs.sweep_step.outputs.model_output}}
          test_data: ${{parent.jobs.sweep_step.outputs.test_data}}
"""


def _write(folder: Path, pipeline: str = PIPELINE, component: str = COMPONENT) -> Path:
    (folder / "src").mkdir(exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    (folder / "train.yml").write_text(textwrap.dedent(component), encoding="utf-8")
    path = folder / "pipeline.yml"
    path.write_text(textwrap.dedent(pipeline), encoding="utf-8")
    return path


def test_a_sweep_step_loads_as_the_sweep_job_it_runs_as(tmp_path: Path) -> None:
    pipeline = load_pipeline_file(_write(tmp_path))
    step = pipeline.steps["sweep_step"]
    assert step.is_sweep and not pipeline.steps["predict_step"].is_sweep
    assert step.trial is not None and step.trial.source == str(tmp_path / "train.yml")
    document = step.document
    assert document["type"] == "sweep" and document["trial"] == "./train.yml"
    assert document["compute"] == "azureml:cpu-cluster"  # the pipeline's default, as a command step's
    # The step's inputs, and the component's defaults of inputs that are not parameters; a
    # parameter's default is not an input (each trial is given its value), nor required of the step.
    assert document["inputs"] == {
        "data": {"type": "uri_folder", "path": "${{parent.jobs.prep.outputs.prepared}}"},
        "degree": 4,
    }
    assert document["outputs"] == {"model_output": {"type": "mlflow_model"}, "test_data": {"type": "uri_folder"}}
    assert set(document["search_space"]) == {"c_value", "kernel", "seed"}
    assert step.upstream == {"data": UpstreamOutput("prep", "prepared")}
    assert pipeline.depends_on == {"prep": (), "sweep_step": ("prep",), "predict_step": ("sweep_step",)}
    assert pipeline.steps["predict_step"].upstream == {
        "model": UpstreamOutput("sweep_step", "model_output"),
        "test_data": UpstreamOutput("sweep_step", "test_data"),
    }
    assert step.is_deterministic  # reused by a later run as a command step is: its trial says nothing else


def test_a_sweep_steps_sweep_and_trial_are_the_sweep_loaders(tmp_path: Path) -> None:
    pipeline = load_pipeline_file(_write(tmp_path))
    step = pipeline.steps["sweep_step"]
    data = tmp_path / "prepared"
    data.mkdir()
    sweep = load_step_sweep(step, step.bound_document(lambda up: str(data)), pipeline.source)
    assert sweep.algorithm.type == "random" and sweep.spec.limits.max_total_trials == 5
    assert list(sweep.search_space) == ["c_value", "kernel", "seed"]
    trial = sweep.trial_document({"c_value": 0.7, "kernel": "poly", "seed": 3})
    assert trial["inputs"] == {
        "data": {"type": "uri_folder", "path": str(data)},
        "degree": 4,
        "kernel": "poly",  # the parameters' values, over the component's defaults
        "c_value": 0.7,
        "seed": 3,
    }
    assert trial["code"] == str(tmp_path / "src") and sweep.trial_base_dir == tmp_path
    # What the sweep's supervisor is handed, as JSON, loads to the same sweep.
    request = json.loads(json.dumps(step_request(step, step.bound_document(lambda up: str(data)), pipeline.source)))
    again = requested_sweep({"step": request})
    assert again.trial_document({"c_value": 0.7, "kernel": "poly", "seed": 3}) == trial
    assert again.spec.objective == sweep.spec.objective


def test_every_problem_of_a_sweep_step_at_once_with_its_position(tmp_path: Path) -> None:
    bad = (
        PIPELINE.replace("degree: 4", "degre: 4")
        .replace("type: uniform, min_value: 0.5", "type: uniform, min_value: 1.5")
        .replace("sampling_algorithm: random", "sampling_algorithm: grid")
        .replace("goal: minimize", "goal: lowest")
        .replace("timeout: 7200}", "timeout: 7200, max_trials: 3}")
        .replace("outputs.test_data}}", "outputs.tests}}")
    )
    path = _write(tmp_path, bad)
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(path)
    found = [(p.key_path, p.position.line if p.position else None, p.message) for p in caught.value.problems]
    keys = [key for key, _, _ in found]
    assert keys == [
        "jobs.sweep_step.inputs.degre",
        "jobs.sweep_step.search_space.c_value",
        "jobs.sweep_step.search_space.seed.type",
        "jobs.sweep_step.objective.goal",
        "jobs.sweep_step.limits.max_trials",
        "jobs.predict_step.inputs.test_data",
    ]
    lines = [line for _, line, _ in found]
    assert lines == [21, 27, 29, 30, 31, 37]
    messages = dict((key, message) for key, _, message in found)
    assert "min_value 1.5 is above max_value 0.9" in messages["jobs.sweep_step.search_space.c_value"]
    assert "grid sampling cannot sample a randint expression" in messages["jobs.sweep_step.search_space.seed.type"]
    assert "unknown key 'max_trials'" in messages["jobs.sweep_step.limits.max_trials"]
    assert "undefined output 'tests' of step 'sweep_step'" in messages["jobs.predict_step.inputs.test_data"]
    assert all(p.hint for p in caught.value.problems)


def test_a_sweep_step_names_a_command_component_as_its_trial(tmp_path: Path) -> None:
    no_trial = PIPELINE.replace("        trial: ./train.yml\n", "")
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(_write(tmp_path, no_trial))
    (problem,) = caught.value.problems
    assert (problem.key_path, problem.message) == (
        "jobs.sweep_step",
        "a sweep step names its trial: the command component each trial runs",
    )
    assert problem.hint == "add `trial: ./train.yml` (a commandComponent file)"
    missing = PIPELINE.replace("trial: ./train.yml", "trial: ./tarin.yml")
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(_write(tmp_path, missing))
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.sweep_step.trial" and "does not exist" in problem.message
    assert problem.position is not None and problem.position.line == 18


def test_an_inline_trial_component_is_the_trial(tmp_path: Path) -> None:
    inline = PIPELINE.replace(
        "trial: ./train.yml",
        "trial:\n" + textwrap.indent(textwrap.dedent(COMPONENT).replace("./src", str(tmp_path / "src")), " " * 10),
    )
    pipeline = load_pipeline_file(_write(tmp_path, inline))
    step = pipeline.steps["sweep_step"]
    assert step.trial is not None and step.trial.source == str(tmp_path / "pipeline.yml")
    assert step.component is None  # written in the pipeline file
    assert set(step.document["outputs"]) == {"model_output", "test_data"}


# ---------------------------------------------------------------- the step's outcome and outputs


def _record(name: str, status: JobStatus, **fields: object) -> JobRecord:
    return JobRecord(name=name, status=status, compute="sweep", folder="", created_at=time.time(), **fields)  # type: ignore[arg-type]


def _sweep(best: dict | None, trials: dict) -> dict:
    return {"objective": {"goal": "minimize", "primary_metric": "loss"}, "best": best}


def test_a_sweep_that_completed_without_a_best_trial_fails_its_step() -> None:
    trials = {"trial_0": {"status": "Completed", "metric": None}, "trial_1": {"status": "Failed", "metric": None}}
    record = _record("p.tune", JobStatus.COMPLETED, steps=trials, sweep=_sweep(None, trials))
    status, reason = step_outcome(record)
    assert status == JobStatus.FAILED
    assert reason == (
        "the sweep has no best trial: 1 of 2 trials completed, none logged its primary metric 'loss' "
        "(the step's outputs are the best trial's)"
    )
    best = {"trial": "trial_0", "job": "p.tune.trial_0", "metric": 0.5, "parameters": {}}
    assert step_outcome(_record("p.tune", JobStatus.COMPLETED, steps=trials, sweep=_sweep(best, trials))) == (
        JobStatus.COMPLETED,
        None,
    )
    failed = _record("p.tune", JobStatus.FAILED, reason="no trial completed", steps=trials, sweep=_sweep(None, trials))
    assert step_outcome(failed) == (JobStatus.FAILED, "no trial completed")


def test_a_sweeps_outputs_are_its_best_trials(distrun_home: Path) -> None:
    index = JobIndex(Layout(distrun_home).db_path)
    trial = Layout(distrun_home).job("p.tune.trial_1")
    trial.root.mkdir(parents=True)
    model = trial.named_outputs / "model"
    trial.bindings_json.write_text(json.dumps({"outputs": {"model": str(model)}}), encoding="utf-8")
    index.insert(_record("p.tune.trial_1", JobStatus.COMPLETED, parent="p.tune"))
    best = {"trial": "trial_1", "job": "p.tune.trial_1", "metric": 0.1, "parameters": {}}
    index.insert(_record("p.tune", JobStatus.COMPLETED, steps={}, sweep=_sweep(best, {})))
    assert job_output_path(distrun_home, "p.tune", "model") == model
    assert job_output_path(distrun_home, "p.tune", "model", "sub/file.txt") == model / "sub" / "file.txt"
    index.insert(_record("q.tune", JobStatus.COMPLETED, steps={}, sweep=_sweep(None, {})))
    with pytest.raises(DistrunError, match=r"sweep q\.tune has no best trial"):
        job_output_path(distrun_home, "q.tune", "model")


def test_a_completed_sweep_step_is_reused_while_its_best_trials_outputs_are_unchanged(distrun_home: Path) -> None:
    from distrun.runner.pipeline_reuse import earlier_run, remember_step

    index = JobIndex(Layout(distrun_home).db_path)
    trial = Layout(distrun_home).job("p.tune.trial_1")
    model = trial.named_outputs / "model"
    model.mkdir(parents=True)
    (model / "model.txt").write_text("x=2")
    trial.bindings_json.write_text(json.dumps({"outputs": {"model": str(model)}}), encoding="utf-8")
    index.insert(_record("p.tune.trial_1", JobStatus.COMPLETED, parent="p.tune"))
    best = {"trial": "trial_1", "job": "p.tune.trial_1", "metric": 0.1, "parameters": {}}
    index.insert(_record("p.tune", JobStatus.COMPLETED, steps={}, sweep=_sweep(best, {})))
    key = "ab" * 32
    assert remember_step(distrun_home, key, "p.tune", "tune", "p", ["model"]) is None
    found, why = earlier_run(distrun_home, key)
    assert (found.job if found else None, why) == ("p.tune", None)
    # The best trial's output written since (its folder is the trial's to write): run again.
    (model / "model.txt").write_text("x=3")
    assert earlier_run(distrun_home, key) == (
        None,
        "the earlier run p.tune cannot be reused: its output model changed since it completed",
    )
    (model / "model.txt").write_text("x=2")
    assert earlier_run(distrun_home, key)[0] is not None
    # A sweep recorded other than Completed since is not reused, outputs or not.
    index.update("p.tune", only_if_not_terminal=False, status=JobStatus.CANCELED)
    assert remember_step(distrun_home, "cd" * 32, "p.tune", "tune", "p", []) is None
    assert earlier_run(distrun_home, "cd" * 32) == (
        None,
        "the earlier run p.tune cannot be reused: its job is Canceled now",
    )


def test_plan_shows_a_sweep_step_as_a_sweep_before_the_step_it_reads_ran(distrun_home: Path, tmp_path: Path) -> None:
    from distrun.loading.checks import process_count
    from distrun.plan.pipeline_text import pipeline_as_text
    from distrun.runner.pipeline_run import process_count_of
    from distrun.runner.pipelines import plan_pipeline

    pipeline = load_pipeline_file(_write(tmp_path))
    planned = plan_pipeline(pipeline, Layout(distrun_home), "local")
    step = next(step for step in planned["steps"] if step["name"] == "sweep_step")
    assert step["job"] == "pipeline.sweep_step" and step["depends_on"] == ["prep"]
    sweep = step["sweep"]
    assert sweep["objective"] == {"goal": "minimize", "primary_metric": "training_f1_score"}
    assert [trial["job"] for trial in sweep["trials"]] == [f"pipeline.sweep_step.trial_{n}" for n in range(3)]
    assert step["rendered"]["inputs"]["data"]["source"] == "output prepared of step prep, once it completed"
    predict = next(step for step in planned["steps"] if step["name"] == "predict_step")
    assert predict["rendered"]["inputs"]["model"]["source"] == (
        "output model_output of step sweep_step's best trial, once it completed"
    )
    text = pipeline_as_text(planned)
    assert (
        f"=== step sweep_step: sweep pipeline.sweep_step, trial component {tmp_path / 'train.yml'}, 1 process per trial"
        in text
    )
    assert "  objective: minimize training_f1_score; sampling: random; limits: max_total_trials 5" in text
    assert "the first trial's job (pipeline.sweep_step.trial_0):" in text
    assert process_count_of(pipeline, "sweep_step", process_count) == 1  # a trial's
