"""Pipelines built in Python (`@dsl.pipeline`, `load_component`, `command(...)` steps): the
document they build loads to exactly what the same pipeline written as YAML loads to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import distrun
from distrun import Input, MLClient, Output, command, dsl, load_component
from distrun.dsl import pipeline
from distrun.entities import PipelineJob
from distrun.loading.pipeline_loader import load_pipeline_data, load_pipeline_file
from distrun.spec.loaded_pipeline import LoadedPipeline
from support.cli import REPO

DATA = REPO / "tests" / "data" / "pipelines"
CHAIN = DATA / "chain"
NESTED = DATA / "nested"
SCORE = "python score.py --model ${{inputs.model}} --report ${{outputs.report}}"


def steps_of(loaded: LoadedPipeline) -> dict[str, Any]:
    return {
        name: (step.document, step.upstream, step.pipeline_outputs, step.base_dir, step.component)
        for name, step in loaded.steps.items()
    }


def loaded(job: PipelineJob) -> LoadedPipeline:
    return load_pipeline_data(job._to_data(), job._base_dir)


def chain_job() -> PipelineJob:
    """tests/data/pipelines/chain/pipeline.yml, written with the SDK."""
    prepare_component = load_component(source="./prepare.yml")
    train_component = load_component(source=CHAIN / "train.yml")
    score_command = command(
        command=SCORE,
        code="./src",
        inputs={"model": Input(type="uri_folder")},
        outputs={"report": Output(type="uri_folder")},
        timeout=600,
    )

    @dsl.pipeline(display_name="chain", default_compute="local", continue_on_step_failure=False)
    def chain(raw_data, epochs=3, learning_rate=0.5):
        prepare = prepare_component(raw=raw_data)
        train = train_component(data=prepare.outputs.prepared, epochs=epochs, learning_rate=learning_rate)
        train.resources = {"instance_count": 2}
        train.distribution = {"type": "pytorch", "process_count_per_instance": 2}
        train.environment_variables = {"STEP_NOTE": "from the pipeline"}
        score_command(model=train.outputs.model)  # held by no variable: named after the command
        return {"final_model": train.outputs.model}

    job = chain(raw_data=Input(type="uri_folder", path="./data"))
    job.outputs.final_model = Output(mode="upload")
    return job


def test_the_sdk_chain_loads_as_the_yaml_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    job = chain_job()
    yaml_steps = steps_of(load_pipeline_file(CHAIN / "pipeline.yml"))
    # The command step held by no variable is named "command"; the YAML names it "score".
    yaml_steps["command"] = yaml_steps.pop("score")
    yaml_steps["command"][0]["display_name"] = "command"
    assert steps_of(loaded(job)) == yaml_steps
    assert list(job.jobs) == ["prepare", "train", "command"]
    assert job.settings.default_compute == "local" and job.display_name == "chain"
    assert job._to_data()["inputs"] == {
        "raw_data": {"type": "uri_folder", "path": str(CHAIN / "data")},
        "epochs": 3,
        "learning_rate": 0.5,
    }


def test_a_nested_pipeline_function_is_a_pipeline_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(NESTED)
    prepare_component = load_component(source="../chain/prepare.yml")
    train_component = load_component(source="../chain/train.yml")
    score_command = command(
        command=SCORE, code="../chain/src", inputs={"model": Input()}, outputs={"report": Output(type="uri_folder")}
    )

    @pipeline
    def train_stage(data, epochs=1):
        prepare = prepare_component(raw=data)
        train = train_component(data=prepare.outputs.prepared, epochs=epochs)
        return {"trained": train.outputs.model}

    @pipeline(display_name="nested", default_compute="local")
    def nested(raw, epochs=4):
        stage = train_stage(data=raw, epochs=epochs)
        score = score_command(model=stage.outputs.trained)  # noqa: F841 (its name is the step's)
        return {"model": stage.outputs.trained}

    job = nested(raw=Input(path="../chain/data"))
    job.outputs.model = Output(mode="upload")
    assert steps_of(loaded(job)) == steps_of(load_pipeline_file(NESTED / "pipeline.yml"))
    assert job._to_data()["jobs"]["stage"]["component"]["inputs"] == {
        "data": {"type": "uri_folder"},
        "epochs": {"type": "integer"},
    }


def test_a_nested_pipeline_fed_by_another_steps_output_reads_it_through_its_own_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Microsoft's nyc-taxi notebook: one `@pipeline` function's output given to another's call."""
    monkeypatch.chdir(CHAIN)
    prepare_component = load_component(source="prepare.yml")
    train_component = load_component(source="train.yml")

    @pipeline
    def data_stage(raw):
        prepare = prepare_component(raw=raw)
        return {"prepared": prepare.outputs.prepared}

    @pipeline
    def train_stage(data, compute_node: str):
        train = train_component(data=data, epochs=2)
        train.compute = compute_node
        return {"model": train.outputs.model}

    @pipeline(default_compute="local")
    def two_stages(raw, compute_node: str):
        data_node = data_stage(raw=raw)
        train_node = train_stage(data=data_node.outputs.prepared, compute_node=compute_node)
        return {"model": train_node.outputs.model}

    job = two_stages(raw=Input(path="./data"), compute_node="local")
    text = str(job)  # printing it raised: the calling pipeline's step output read inside the inner one
    assert "data: ${{parent.jobs.data_node.outputs.prepared}}" in text
    steps = loaded(job).steps
    assert steps["train_node.train"].depends_on == ("data_node.prepare",)
    assert steps["train_node.train"].document["compute"] == "local"


def test_steps_held_by_no_variable_are_named_after_their_component(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    prepare_component = load_component(source="prepare.yml")

    @pipeline()
    def three(data):
        prepare_component(raw=data)
        prepare_component(raw=data, rows=5)
        last = prepare_component(raw=data)
        return {"out": last.outputs.prepared}

    job = three(data=Input(path="./data"))
    assert list(job.jobs) == ["prepare", "prepare_1", "last"]
    assert job.jobs.prepare_1.inputs == {"raw": job.jobs.prepare.inputs["raw"], "rows": 5}
    steps = loaded(job).steps
    assert steps["prepare_1"].document["inputs"]["rows"] == 5
    assert steps["last"].pipeline_outputs == {"prepared": "out"}


def test_a_step_output_changed_in_the_function_is_that_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    prepare_component = load_component(source="prepare.yml")
    train_component = load_component(source="train.yml")

    @pipeline(compute="local")
    def two(data):
        prepare = prepare_component(raw=data)
        prepare.outputs.prepared = Output(type="uri_folder", mode="upload", path="./kept")
        train = train_component(data=prepare.outputs.prepared, epochs=2)
        return {"model": train.outputs.model}

    job = two(data=Input(path="./data"))
    data = job._to_data()
    assert data["compute"] == "local" and "settings" not in data
    assert data["jobs"]["prepare"]["outputs"] == {
        "prepared": {"type": "uri_folder", "mode": "upload", "path": str(CHAIN / "kept")}
    }
    assert data["jobs"]["train"]["inputs"]["data"] == "${{parent.jobs.prepare.outputs.prepared}}"
    assert loaded(job).steps["train"].upstream["data"].step == "prepare"


def test_mistakes_are_python_errors_that_name_the_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    prepare_component = load_component(source="prepare.yml")
    with pytest.raises(
        TypeError, match=r"prepare\(\) got an unexpected input 'raww': the component's inputs are raw, rows"
    ):
        prepare_component(raww="./data")
    with pytest.raises(TypeError, match=r"prepare\(\) takes its inputs by name"):
        prepare_component("./data")

    @pipeline
    def one(data, rows):
        return {"out": prepare_component(raw=data, rows=rows).outputs.prepared}

    with pytest.raises(TypeError, match=r"pipeline one\(\): missing a required argument: 'rows'"):
        one(data=Input(path="./data"))
    with pytest.raises(TypeError, match=r"pipeline one\(\): got an unexpected keyword argument 'epochs'"):
        one(data=Input(path="./data"), rows=1, epochs=2)

    @pipeline
    def returns_an_input(data):
        prepare_component(raw=data)
        return {"out": data}

    with pytest.raises(TypeError, match=r"returned 'out': .* is not an output of one of its steps"):
        returns_an_input(data=Input(path="./data"))
    with pytest.raises(distrun.DistrunError, match=r"load_component: .*nothing\.yml does not exist"):
        load_component(source="nothing.yml")


def test_a_bad_value_is_the_loaders_error_at_the_users_line(
    distrun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CHAIN)
    train_component = load_component(source="train.yml")

    @pipeline(default_compute="local")
    def bad(data):
        train_component(data=data, epochs="many")  # the step's line

    job = bad(data=Input(path="./data"))
    line = 1 + Path(__file__).read_text().splitlines().index(
        '        train_component(data=data, epochs="many")  # the step\'s line'
    )
    checked = MLClient().jobs.validate(job)  # the same check, nothing started
    assert not checked.passed and list(checked.error_messages) == ["jobs.train.inputs.epochs"]
    with pytest.raises(distrun.ValidationError) as caught:
        MLClient().jobs.create_or_update(job)
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.train.inputs.epochs"
    assert problem.message == "input 'epochs': expected a whole number, got 'many'"
    assert (problem.position.source, problem.position.line) == (__file__, line)
    assert not (distrun_home / "jobs").exists()  # nothing recorded


def test_a_bad_value_in_a_nested_pipeline_is_at_the_users_line_in_its_function(
    distrun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CHAIN)
    train_component = load_component(source="train.yml")

    @pipeline
    def inner(data):
        return {"model": train_component(data=data, epochs="many").outputs.model}  # the inner step's line

    @pipeline(default_compute="local")
    def outer(data):
        return {"model": inner(data=data).outputs.model}

    lines = Path(__file__).read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(lines) if text.endswith("# the inner step's line"))
    with pytest.raises(distrun.ValidationError) as caught:
        MLClient().jobs.create_or_update(outer(data=Input(path="./data")))
    (problem,) = caught.value.problems
    assert problem.message == "input 'epochs': expected a whole number, got 'many'"
    assert (problem.position.source, problem.position.line) == (__file__, line)
    assert not (distrun_home / "jobs").exists()


def test_a_registered_component_is_named_by_its_steps(distrun_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    client = MLClient()
    registered = client.components.create_or_update(load_component(source="prepare.yml"))
    assert (registered.name, registered.version, registered.id) == ("prepare", "1", "azureml:prepare:1")
    fetched = client.components.get("prepare", version="1")
    assert fetched.id == "azureml:prepare:1" and list(fetched.inputs) == ["raw", "rows"]
    assert [c.id for c in client.components.list()] == ["azureml:prepare:1"]
    assert (distrun_home / "components" / "prepare" / "1" / "code" / "prepare.py").is_file()

    @pipeline
    def from_registry(data):
        prepare = fetched(raw=data)
        return {"out": prepare.outputs.prepared}

    job = from_registry(data=Input(path="./data"))
    assert job._to_data()["jobs"]["prepare"]["component"] == "azureml:prepare:1"
    step = loaded(job).steps["prepare"]
    assert step.component == str(distrun_home / "components" / "prepare" / "1" / "component.yml")
    assert step.document["code"] == str(distrun_home / "components" / "prepare" / "1" / "code")


def test_a_pipeline_job_prints_as_its_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHAIN)
    shown = str(chain_job())
    assert shown.startswith("type: pipeline\n")
    assert "      data: ${{parent.jobs.prepare.outputs.prepared}}\n" in shown
    assert "name: train\n" in str(load_component(source="train.yml"))
