"""Sweeps built in Python (`command(...)(lr=Choice(...)).sweep(...)`, azure-ai-ml's names): the
sweep YAML document they build loads to exactly what the same sweep written as YAML loads to,
their problems read as the YAML's do, and the same sweep as a pipeline's `type: sweep` step.
Nothing here starts a job (tests/surfaces/test_sdk_sweep_run.py runs one)."""

from __future__ import annotations

import inspect
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import distrun
from distrun import Input, MLClient, Output, command, load_component
from distrun.loading.pipeline_loader import load_pipeline_data
from distrun.sdk.sweep_ops import sweep_of_record
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.spec.yaml_source import read_yaml_file
from distrun.store.index import JobRecord
from distrun.sweep import (
    BanditPolicy,
    BayesianSamplingAlgorithm,
    Choice,
    GridSamplingAlgorithm,
    LogNormal,
    LogUniform,
    MedianStoppingPolicy,
    Normal,
    QLogNormal,
    QLogUniform,
    QNormal,
    QUniform,
    Randint,
    RandomSamplingAlgorithm,
    SweepJob,
    TruncationSelectionPolicy,
    Uniform,
)

TRAIN = (
    "python main.py --iris-csv ${{inputs.iris_csv}} --learning-rate ${{inputs.learning_rate}} "
    "--boosting ${{inputs.boosting}}"
)

# The same sweep as Microsoft's lightgbm iris job-sweep.yml, written by hand (local data, no compute).
SWEEP_YAML = """
type: sweep
trial:
  code: src
  command: >-
    python main.py
    --iris-csv ${{inputs.iris_csv}}
    --learning-rate ${{search_space.learning_rate}}
    --boosting ${{search_space.boosting}}
inputs:
  iris_csv: {type: uri_file, path: ./iris.csv}
sampling_algorithm: random
search_space:
  learning_rate: {type: uniform, min_value: 0.01, max_value: 0.9}
  boosting: {type: choice, values: ["gbdt", "dart"]}
objective: {goal: minimize, primary_metric: test-multi_logloss}
early_termination: {type: median_stopping, delay_evaluation: 5, evaluation_interval: 2}
limits: {max_total_trials: 20, max_concurrent_trials: 10, timeout: 7200}
display_name: lightgbm-iris-sweep-example
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('train')\n")
    (tmp_path / "iris.csv").write_text("sepal_length,species\n1.0,setosa\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTRUN_HOME", str(tmp_path / "home"))
    return tmp_path


def notebook_sweep() -> SweepJob:
    """The lightgbm-iris-sweep notebook's sweep, as it builds it (but the data's path)."""
    command_job = command(
        code="./src",
        command=TRAIN,
        inputs={"iris_csv": Input(type="uri_file", path="./iris.csv"), "learning_rate": 0.9, "boosting": "gbdt"},
    )
    command_job_for_sweep = command_job(
        learning_rate=Uniform(min_value=0.01, max_value=0.9),
        boosting=Choice(values=["gbdt", "dart"]),
    )
    sweep_job = command_job_for_sweep.sweep(
        sampling_algorithm="random", primary_metric="test-multi_logloss", goal="Minimize"
    )
    sweep_job.display_name = "lightgbm-iris-sweep-example"
    sweep_job.set_limits(max_total_trials=20, max_concurrent_trials=10, timeout=7200)
    sweep_job.early_termination = MedianStoppingPolicy(delay_evaluation=5, evaluation_interval=2)
    return sweep_job


def shape(loaded: LoadedSweep) -> tuple[Any, ...]:
    """What a run of the sweep uses; the spec as data (its source positions differ)."""
    spec = loaded.spec.model_dump(exclude={"trial"})
    space = {k: e.model_dump() for k, e in loaded.search_space.items()}
    policy = loaded.policy.model_dump() if loaded.policy else None
    return spec, space, loaded.algorithm.model_dump(), policy, loaded.trial, loaded.trial_base_dir


def test_the_notebooks_sweep_loads_as_the_same_sweep_written_as_yaml(project: Path) -> None:
    (project / "sweep.yml").write_text(SWEEP_YAML)
    data, smap = read_yaml_file(project / "sweep.yml")
    from distrun.loading.sweep_loader import load_sweep_data

    from_yaml = load_sweep_data(data, project, str(project / "sweep.yml"), (), smap)
    built = notebook_sweep()
    assert built._to_data()["trial"]["command"] == (
        "python main.py --iris-csv ${{inputs.iris_csv}} --learning-rate ${{search_space.learning_rate}} "
        "--boosting ${{search_space.boosting}}"
    )
    from_python = built._job_source().load()
    yaml_shape, python_shape = shape(from_yaml), shape(from_python)
    assert python_shape[:4] == yaml_shape[:4] and python_shape[5] == yaml_shape[5]
    # The same trial; the YAML's code is relative to its folder, the built one's absolute.
    assert python_shape[4] == {**yaml_shape[4], "code": str(project / "src")}
    assert from_python.trial_document({"learning_rate": 0.5, "boosting": "dart"})["inputs"] == {
        "iris_csv": {"type": "uri_file", "path": str(project / "iris.csv")},
        "learning_rate": 0.5,
        "boosting": "dart",
    }
    assert MLClient().jobs.validate(built).passed


def test_search_spaces_policies_and_algorithms_are_azure_mls_yaml() -> None:
    assert [e._to_data() for e in (Choice([1, "a"]), Randint(upper=4), Uniform(0.1, 0.9))] == [
        {"type": "choice", "values": [1, "a"]},
        {"type": "randint", "upper": 4},
        {"type": "uniform", "min_value": 0.1, "max_value": 0.9},
    ]
    assert [e._to_data()["type"] for e in (LogUniform(-6, -1), QUniform(1, 9, 2), QLogUniform(0, 2, 1))] == [
        "loguniform",
        "quniform",
        "qloguniform",
    ]
    assert [e._to_data() for e in (Normal(0, 1), LogNormal(0, 1), QNormal(0, 1, 1), QLogNormal(0, 1, 1))][2] == {
        "type": "qnormal",
        "mu": 0,
        "sigma": 1,
        "q": 1,
    }
    assert BanditPolicy(slack_factor=0.1, evaluation_interval=2)._to_data() == {
        "type": "bandit",
        "delay_evaluation": 0,
        "evaluation_interval": 2,
        "slack_factor": 0.1,
    }
    assert TruncationSelectionPolicy(truncation_percentage=20)._to_data() == {
        "type": "truncation_selection",
        "delay_evaluation": 0,
        "evaluation_interval": 0,
        "truncation_percentage": 20,
    }
    assert RandomSamplingAlgorithm(seed=7, rule="sobol")._to_data() == {"type": "random", "seed": 7, "rule": "sobol"}
    assert (GridSamplingAlgorithm()._to_data(), BayesianSamplingAlgorithm()._to_data()) == (
        {"type": "grid"},
        {"type": "bayesian"},
    )
    # azure.ai.ml.sweep's names are distrun.sweep's, also through the root package.
    assert distrun.sweep.SweepJob is SweepJob and distrun.sweep.Sweep is SweepJob


def test_sweep_takes_azure_mls_arguments_and_setters(project: Path) -> None:
    trial = command(code="./src", command="python main.py --lr ${{inputs.lr}}", inputs={"lr": 0.1}, compute="gpu")
    sweep = trial(lr=LogUniform(min_value=-6, max_value=-1)).sweep(
        compute="cpu-cluster",
        sampling_algorithm=RandomSamplingAlgorithm(seed=3, rule="sobol"),
        primary_metric="Accuracy",
        goal="Maximize",
        max_total_trials=20,
        max_concurrent_trials=4,
        early_termination_policy=BanditPolicy(slack_factor=0.1, evaluation_interval=2),
    )
    sweep.set_limits(timeout=600, trial_timeout=60)
    sweep.set_objective(primary_metric="acc")
    data = sweep._to_data()
    assert data["compute"] == "cpu-cluster"
    assert data["objective"] == {"goal": "maximize", "primary_metric": "acc"}
    assert data["limits"] == {"max_concurrent_trials": 4, "max_total_trials": 20, "timeout": 600, "trial_timeout": 60}
    assert data["sampling_algorithm"] == {"type": "random", "seed": 3, "rule": "sobol"}
    assert data["early_termination"]["slack_factor"] == 0.1
    assert "inputs" not in data and data["search_space"] == {
        "lr": {"type": "loguniform", "min_value": -6, "max_value": -1}
    }
    assert inspect.signature(type(trial).sweep).parameters["primary_metric"].kind is inspect.Parameter.KEYWORD_ONLY
    # A SweepJob made directly, its policy as a dict, more parameters in `search_space`.
    direct = SweepJob(
        trial=trial,
        search_space={"lr": Choice([0.1, 0.2])},
        objective={"goal": "minimize", "primary_metric": "loss"},
        early_termination={"type": "truncation_selection", "truncation_percentage": 10},
    )
    assert isinstance(direct.early_termination, TruncationSelectionPolicy)
    assert direct._to_data()["search_space"] == {"lr": {"type": "choice", "values": [0.1, 0.2]}}
    assert MLClient().jobs.validate(direct).passed


def test_a_sweeps_problems_are_the_loaders_at_the_line_that_built_it(project: Path) -> None:
    trial = command(code="./src", command="python main.py --lr ${{inputs.lr}} --k ${{inputs.k}}", inputs={"k": 1})
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    sweep = trial(lr=Uniform(min_value=1, max_value=0.1)).sweep(
        sampling_algorithm="grid", primary_metric="m", goal="up"
    )
    result = MLClient().jobs.validate(sweep)
    assert not result.passed and result.error is not None
    found = [(p.key_path, p.message, str(p.position)) for p in result.error.problems]
    here = f"{__file__}:{line}"
    assert ("objective.goal", "expected one of maximize, minimize; got 'up'", here) in found
    assert ("search_space.lr", "min_value 1 is above max_value 0.1", here) in found
    # A job whose input is a search space is a sweep's trial, not a job: it says so.
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    swept = trial(lr=Choice([1, 2]))
    with pytest.raises(distrun.ValidationError) as raised:
        MLClient().jobs.create_or_update(swept)
    (problem,) = raised.value.problems
    assert (problem.key_path, str(problem.position)) == ("inputs.lr", f"{__file__}:{line}")
    assert "a job with one runs as a sweep" in problem.message and "job.sweep(" in problem.hint


def test_a_sweep_as_a_pipelines_sweep_step(project: Path) -> None:
    trial = command(
        code="./src",
        command="python main.py --data ${{inputs.data}} --lr ${{inputs.lr}} --model ${{outputs.model}}",
        environment="azureml:AzureML-sklearn-1.5@latest",
        inputs={"data": Input(type="uri_folder", path="./src"), "epochs": 3, "lr": 0.1},
        outputs={"model": Output(type="uri_folder")},
    )
    sweep = trial(lr=Choice([0.1, 0.01])).sweep(
        primary_metric="loss",
        goal="minimize",
        compute="cpu",
        max_total_trials=4,
        early_termination_policy=MedianStoppingPolicy(),
    )
    assert sweep._to_step_data() == {
        "type": "sweep",
        "trial": {
            "type": "command",
            # A component's parameters are its inputs: the command keeps ${{inputs.lr}}.
            "command": "python main.py --data ${{inputs.data}} --lr ${{inputs.lr}} --model ${{outputs.model}}",
            "code": str(project / "src"),
            "environment": "azureml:AzureML-sklearn-1.5@latest",
            "inputs": {
                "data": {"type": "uri_folder"},
                "epochs": {"type": "integer", "default": 3},
                "lr": {"type": "number"},
            },
            "outputs": {"model": {"type": "uri_folder"}},
        },
        "compute": "cpu",
        "search_space": {"lr": {"type": "choice", "values": [0.1, 0.01]}},
        "sampling_algorithm": "random",
        "objective": {"goal": "minimize", "primary_metric": "loss"},
        "early_termination": {"type": "median_stopping", "delay_evaluation": 0, "evaluation_interval": 1},
        "limits": {"max_total_trials": 4},
        "inputs": {"data": {"type": "uri_folder", "path": "./src"}, "epochs": 3},
        "outputs": {"model": {"type": "uri_folder"}},
    }
    assert set(sweep._step_keys()) == set(sweep._to_step_data()) - {"inputs", "outputs"}
    # The pipeline loader takes it as a sweep step.
    document = {"type": "pipeline", "settings": {"default_compute": "local"}, "jobs": {"tune": sweep._to_step_data()}}
    step = load_pipeline_data(document, project).steps["tune"].document
    assert (step["type"], step["search_space"], step["inputs"]["epochs"]) == (
        "sweep",
        {"lr": sweep._space_data()["lr"]},
        3,
    )
    # Each parameter declared by its values' type: whole and real numbers are numbers.
    mixed = trial(lr=Choice([1, 0.5]), epochs=Randint(upper=9)).sweep(primary_metric="loss", goal="minimize")
    declared = mixed._to_step_data()["trial"]["inputs"]
    assert (declared["lr"], declared["epochs"]) == ({"type": "number"}, {"type": "integer"})


def test_a_component_swept_names_its_file_as_the_trial(project: Path) -> None:
    (project / "train.yml").write_text(
        textwrap.dedent(
            """
            name: train
            type: command
            code: ./src
            command: python main.py --lr ${{inputs.lr}} --data ${{inputs.data}}
            inputs:
              lr: {type: number, default: 0.1}
              data: {type: uri_file}
            """
        )
    )
    component = load_component(source="./train.yml")
    sweep = component(lr=QUniform(0.1, 0.9, 0.1), data=Input(type="uri_file", path="./iris.csv")).sweep(
        primary_metric="loss", goal="minimize", sampling_algorithm="bayesian"
    )
    data = sweep._to_data()
    assert data["trial"] == str(project / "train.yml")
    assert data["inputs"] == {"data": {"type": "uri_file", "path": "./iris.csv"}}
    assert sweep._to_step_data()["trial"] == str(project / "train.yml")
    loaded = sweep._job_source().load()
    assert list(loaded.search_space) == ["lr"] and loaded.algorithm.type == "bayesian"


def test_a_sweeps_record_reads_back_as_a_sweep_job_with_its_best_trial(tmp_path: Path) -> None:
    best = {"trial": "trial_1", "job": "s.trial_1", "parameters": {"x": 2}, "metric": 0.5, "outputs": {"m": "/o/m"}}
    record = JobRecord(
        name="s",
        status="Completed",
        compute="sweep",
        folder=str(tmp_path),
        created_at=time.time(),
        steps={"trial_1": {"job": "s.trial_1", "status": "Completed", "compute": "local", "metric": 0.5}},
        sweep={
            "objective": {"goal": "minimize", "primary_metric": "loss"},
            "sampling_algorithm": {"type": "grid"},
            "early_termination": {"type": "bandit", "slack_factor": 0.1, "evaluation_interval": 1},
            "limits": {"max_total_trials": 4},
            "search_space": {"x": {"type": "choice", "values": [1, 2]}},
            "best": best,
        },
    )
    job = sweep_of_record(record, tmp_path)
    assert record.sweep is not None
    record.sweep.update(sampling_algorithm={"type": "random", "rule": "sobol"}, seed=11)
    assert sweep_of_record(record, tmp_path).sampling_algorithm == RandomSamplingAlgorithm(seed=11, rule="sobol")
    assert (job.name, job.status, job.compute) == ("s", "Completed", "local")
    assert job.properties["best_child_run_id"] == "s.trial_1" and job.best_trial == best
    assert job.search_space == {"x": Choice([1, 2])} and isinstance(job.sampling_algorithm, GridSamplingAlgorithm)
    assert job.early_termination == BanditPolicy(slack_factor=0.1, evaluation_interval=1)
    assert job.objective is not None and job.objective.primary_metric == "loss"
    assert job.limits.max_total_trials == 4 and job.outputs["m"].path == "/o/m"


TRAIN_COMPONENT = """
name: train_model
type: command
code: ./src
command: >-
  python main.py --data ${{inputs.data}} --c ${{inputs.c_value}} --kernel ${{inputs.kernel}}
  --degree ${{inputs.degree}} --model ${{outputs.model_output}} --test ${{outputs.test_data}}
inputs:
  data: {type: uri_folder}
  c_value: {type: number, default: 1.0}
  kernel: {type: string, default: rbf}
  degree: {type: integer, default: 3}
outputs:
  model_output: {type: mlflow_model}
  test_data: {type: uri_folder}
"""

PREDICT_COMPONENT = """
name: predict
type: command
code: ./src
command: python main.py ${{inputs.model}} ${{inputs.test_data}} ${{outputs.predict_result}}
inputs:
  model: {type: mlflow_model}
  test_data: {type: uri_folder}
outputs:
  predict_result: {type: uri_folder}
"""


def test_a_sweep_node_of_a_pipeline_function_is_its_sweep_step(project: Path) -> None:
    """The 1c notebook's shape: a component called with search spaces, `.sweep(...)`, and a
    later call reading the sweep node's outputs (its best trial's)."""
    from distrun.dsl import pipeline

    (project / "train.yml").write_text(TRAIN_COMPONENT)
    (project / "predict.yml").write_text(PREDICT_COMPONENT)
    train_func = load_component(source="./train.yml")
    predict_func = load_component(source="./predict.yml")

    @pipeline()
    def tune(raw: Input) -> None:
        train_model = train_func(
            data=raw, c_value=Uniform(min_value=0.5, max_value=0.9), kernel=Choice(["rbf", "linear"]), degree=2
        )
        sweep_step = train_model.sweep(primary_metric="training_f1_score", goal="minimize", compute="local")
        sweep_step.set_limits(max_total_trials=4, max_concurrent_trials=2, timeout=600)
        sweep_step.early_termination = BanditPolicy(slack_factor=0.1, evaluation_interval=1)
        predict_func(model=sweep_step.outputs.model_output, test_data=sweep_step.outputs.test_data)

    job = tune(raw=Input(type="uri_folder", path="./src"))
    # The trial is not a step of its own: the sweep is, named by its variable.
    assert list(job.jobs) == ["sweep_step", "predict"]
    document = job._to_data()
    assert document["jobs"]["sweep_step"] == {
        "type": "sweep",
        "trial": str(project / "train.yml"),
        "compute": "local",
        "search_space": {
            "c_value": {"type": "uniform", "min_value": 0.5, "max_value": 0.9},
            "kernel": {"type": "choice", "values": ["rbf", "linear"]},
        },
        "sampling_algorithm": "random",
        "objective": {"goal": "minimize", "primary_metric": "training_f1_score"},
        "early_termination": {"type": "bandit", "delay_evaluation": 0, "evaluation_interval": 1, "slack_factor": 0.1},
        "limits": {"max_concurrent_trials": 2, "max_total_trials": 4, "timeout": 600},
        "inputs": {"data": "${{parent.inputs.raw}}", "degree": 2},
    }
    assert document["jobs"]["predict"]["inputs"] == {
        "model": "${{parent.jobs.sweep_step.outputs.model_output}}",
        "test_data": "${{parent.jobs.sweep_step.outputs.test_data}}",
    }
    # The pipeline loader takes it: the sweep step with its settings, the later step bound to it.
    loaded = load_pipeline_data(document, project)
    sweep = loaded.steps["sweep_step"].document
    assert (sweep["type"], sweep["search_space"], sweep["objective"], sweep["limits"]["max_total_trials"]) == (
        "sweep",
        document["jobs"]["sweep_step"]["search_space"],
        {"goal": "minimize", "primary_metric": "training_f1_score"},
        4,
    )
    assert sweep["inputs"]["degree"] == 2
    upstream = loaded.steps["predict"].upstream
    assert {k: (u.step, u.output) for k, u in upstream.items()} == {
        "model": ("sweep_step", "model_output"),
        "test_data": ("sweep_step", "test_data"),
    }
    assert loaded.depends_on["predict"] == ("sweep_step",)

    # A step given a search space but not swept says so, at its input.
    @pipeline()
    def unswept() -> None:
        train_func(data=Input(type="uri_folder", path="./src"), kernel=Choice(["rbf"]))

    with pytest.raises(TypeError, match=r"train_model.inputs.kernel: Choice\(.*\) is a search space, .*\.sweep\("):
        unswept()._to_data()
