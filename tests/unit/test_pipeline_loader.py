"""Pipeline jobs load as command jobs do: every step a command job document, its inputs and
outputs bound, every problem of every step and component in one round with its position."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.loader import load_job_data, load_job_file
from distrun.loading.pipeline_loader import load_document_file, load_pipeline_data, load_pipeline_file
from distrun.spec.job_kind import is_pipeline_document
from distrun.spec.loaded_pipeline import UpstreamOutput
from distrun.spec.pipeline_bindings import Binding, NotABinding, binding_of
from distrun.spec.pipeline_graph import downstream_of, find_cycle, levels, run_order

DATA = Path(__file__).parents[1] / "data"
CORPUS = DATA / "invalid_pipelines"
CASES = sorted(CORPUS.glob("[0-9][0-9]-*.yml"))
CHAIN = DATA / "pipelines" / "chain"


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------- the invalid corpus


def test_corpus_is_complete() -> None:
    assert len(CASES) >= 25
    for case in CASES:
        assert _lines(case.with_suffix(".expected")), f"{case.name} has no expectations"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_invalid_pipeline_is_refused_with_a_useful_error(case: Path, distrun_home: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(case)
    text = caught.value.render()
    for expected in _lines(case.with_suffix(".expected")):
        assert expected in text, f"{expected!r} not in:\n{text}"
    for problem in caught.value.problems:
        assert problem.position is not None and problem.position.line, problem
        assert problem.position.column, problem
        assert problem.message and problem.hint, f"every problem says how to fix it: {problem}"
        assert problem.key_path, f"problem without a key path: {problem}"
        assert problem.position.source == str(case) or problem.position.source.endswith(".component.yml"), problem


def test_every_problem_comes_once_in_file_order_pipeline_first() -> None:
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(CORPUS / "27-every-problem-at-once.yml")
    problems = caught.value.problems
    keys = [p.key_path for p in problems]
    assert keys == [
        "setings",
        "jobs.train.inputs.epochs",
        "jobs.score.inputs.data",
        "jobs.score.limits",
        "command",
        "inputs.data.type",
        "comand",
    ]
    assert [p.position.source.endswith("bad.component.yml") for p in problems if p.position] == [False] * 4 + [True] * 3


# ---------------------------------------------------------------- a valid pipeline


def test_chain_becomes_one_command_job_per_step() -> None:
    pipeline = load_pipeline_file(CHAIN / "pipeline.yml")
    assert list(pipeline.steps) == ["prepare", "train", "score"]
    assert pipeline.run_order() == ["prepare", "train", "score"]
    assert pipeline.depends_on == {"prepare": (), "train": ("prepare",), "score": ("train",)}
    prepare, train, score = pipeline.steps.values()
    # The component's command and code (made absolute against the component's folder) ...
    assert prepare.document["command"].startswith("python prepare.py --raw ${{inputs.raw}}")
    assert prepare.document["code"] == str(CHAIN / "src")
    # ... a pipeline input (a data input, its path resolved against the pipeline's folder) and a default.
    assert prepare.document["inputs"] == {"raw": {"type": "uri_folder", "path": str(CHAIN / "data")}, "rows": 10}
    assert prepare.document["compute"] == "local"  # settings.default_compute
    # The step's keys over the component's; environment variables merged.
    assert train.document["resources"] == {"instance_count": 2}
    assert train.document["distribution"] == {"type": "pytorch", "process_count_per_instance": 2}
    assert train.document["environment_variables"] == {
        "COMPONENT_NOTE": "from the component",
        "STEP_NOTE": "from the pipeline",
    }
    # Literal pipeline inputs by value; the optional `seed` is left out; the default `learning_rate` overridden.
    assert train.document["inputs"]["epochs"] == 3
    assert train.document["inputs"]["learning_rate"] == 0.5
    assert "seed" not in train.document["inputs"]
    assert train.upstream == {"data": UpstreamOutput("prepare", "prepared")}
    # An output bound to the pipeline's output takes its mode.
    assert train.document["outputs"]["model"] == {"type": "uri_folder", "mode": "upload"}
    assert train.pipeline_outputs == {"model": "final_model"}
    assert score.component is None and score.upstream == {"model": UpstreamOutput("train", "model")}


def test_a_bound_step_loads_as_a_command_job() -> None:
    pipeline = load_pipeline_file(CHAIN / "pipeline.yml")
    train = pipeline.steps["train"]
    document = train.bound_document(lambda up: str(CHAIN / "data"))  # where the upstream wrote
    loaded = load_job_data(document, train.base_dir, str(CHAIN / "pipeline.yml"), smap=train.source_map)
    assert loaded.spec.inputs["data"].path == str(CHAIN / "data")
    assert loaded.spec.distribution is not None and loaded.spec.node_count == 2
    # The document kept for the run is unchanged by binding.
    assert train.document["inputs"]["data"]["path"] == "${{parent.jobs.prepare.outputs.prepared}}"


def test_a_step_problem_found_at_run_points_into_the_pipeline_file() -> None:
    pipeline = load_pipeline_file(CHAIN / "pipeline.yml")
    train = pipeline.steps["train"]
    document = train.bound_document(lambda up: "/nonexistent/prepared")
    with pytest.raises(ValidationError) as caught:
        load_job_data(document, train.base_dir, str(CHAIN / "pipeline.yml"), smap=train.source_map)
    (problem,) = caught.value.problems
    assert problem.key_path == "inputs.data.path"
    assert problem.position is not None and problem.position.source == str(CHAIN / "pipeline.yml")
    assert problem.position.line == 32  # `data:` under jobs.train.inputs


def test_inline_component_and_overrides(tmp_path: Path) -> None:
    data = {
        "type": "pipeline",
        "settings": {"default_compute": "azureml:cpu-cluster", "default_datestore": "azureml:workspaceblobstore"},
        "jobs": {
            "hello": {
                "type": "command",
                "compute": "local",
                "component": {
                    "inputs": {"greeting": {"type": "string", "default": "hi"}},
                    "command": "echo ${{inputs.greeting}}",
                },
            },
            "other": {"command": "echo other"},
        },
    }
    pipeline = load_pipeline_data(data, tmp_path, overrides=["jobs.hello.inputs.greeting=hello"])
    assert pipeline.steps["hello"].document["inputs"] == {"greeting": "hello"}
    assert pipeline.steps["hello"].document["compute"] == "local"  # the step's own compute wins
    assert pipeline.steps["other"].document["compute"] == "azureml:cpu-cluster"
    assert pipeline.levels() == {"hello": 0, "other": 0}
    # Azure ML keeps settings it does not know (Microsoft's 3a example misspells default_datastore).
    assert pipeline.notes == [
        "settings.default_datestore is not a pipeline setting (did you mean default_datastore?): "
        "Azure ML ignores it, and so does distrun"
    ]


def test_an_override_problem_names_the_override(tmp_path: Path) -> None:
    data = {"type": "pipeline", "jobs": {"a": {"command": "echo a", "resources": {"instance_count": 1}}}}
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, tmp_path, overrides=["jobs.a.resources.instance_count=0"])
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.a.resources.instance_count"
    assert problem.position is not None and problem.position.source == "--set jobs.a.resources.instance_count=0"


def test_a_pipeline_component_step_becomes_its_components_steps() -> None:
    pipeline = load_pipeline_file(DATA / "pipelines" / "nested" / "pipeline.yml")
    assert list(pipeline.steps) == ["stage.prepare", "stage.train", "score"]
    prepare, train, score = pipeline.steps.values()
    # The stage's input bound to the pipeline's input reaches the step inside it.
    raw = prepare.document["inputs"]["raw"]
    assert raw["type"] == "uri_folder" and Path(raw["path"]).resolve() == CHAIN / "data"
    assert train.document["inputs"]["epochs"] == 4
    assert train.upstream == {"data": UpstreamOutput("stage.prepare", "prepared")}
    # The stage's output is the pipeline's; score reads it from the step inside the stage that writes it.
    assert train.pipeline_outputs == {"model": "model"}
    assert train.document["outputs"]["model"] == {"type": "uri_folder", "mode": "upload"}
    assert score.upstream == {"model": UpstreamOutput("stage.train", "model")}
    assert pipeline.depends_on == {"stage.prepare": (), "stage.train": ("stage.prepare",), "score": ("stage.train",)}
    assert (prepare.key, prepare.document["compute"]) == ("jobs.prepare", "local")
    assert prepare.component == str(CHAIN / "prepare.yml")


def test_a_step_output_read_through_a_pipeline_step_binds_the_inner_step(tmp_path: Path) -> None:
    stage = DATA / "pipelines" / "nested" / "train_stage.yml"
    data = {
        "type": "pipeline",
        "jobs": {
            "first": {"command": "echo ${{outputs.out}}", "outputs": {"out": {"type": "uri_folder"}}},
            "stage": {
                "type": "pipeline",
                "component": str(stage),
                "inputs": {"data": "${{parent.jobs.first.outputs.out}}"},
            },
        },
    }
    pipeline = load_pipeline_data(data, tmp_path)
    assert pipeline.steps["stage.prepare"].upstream == {"raw": UpstreamOutput("first", "out")}
    assert pipeline.steps["stage.train"].document["inputs"]["epochs"] == 1  # the component's default
    assert pipeline.run_order() == ["first", "stage.prepare", "stage.train"]


# ---------------------------------------------------------------- which loader a file takes


def test_documents_are_told_apart() -> None:
    assert is_pipeline_document({"type": "pipeline"})
    assert is_pipeline_document({"$schema": "https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json"})
    assert is_pipeline_document({"jobs": {"a": {}}})
    assert not is_pipeline_document({"type": "command", "command": "echo"})
    assert not is_pipeline_document({"command": "echo", "jobs": "x"})


def test_load_document_file_gives_a_job_or_a_pipeline(tmp_path: Path) -> None:
    job = tmp_path / "job.yml"
    job.write_text("command: echo hi\n")
    assert type(load_document_file(job)).__name__ == "LoadedJob"
    assert type(load_document_file(CHAIN / "pipeline.yml")).__name__ == "LoadedPipeline"


def test_the_command_job_loader_refuses_a_pipeline_and_says_what_takes_it() -> None:
    with pytest.raises(ValidationError) as caught:
        load_job_file(CHAIN / "pipeline.yml")
    assert "this file is a pipeline job" in caught.value.render()
    assert "distrun plan FILE" in caught.value.render()


# ---------------------------------------------------------------- bindings and the graph


def test_bindings_are_parsed() -> None:
    assert binding_of("${{parent.inputs.epochs}}") == Binding("input", "epochs")
    assert binding_of(" ${{ parent.outputs.model }} ") == Binding("output", "model")
    assert binding_of("${{parent.jobs.train.outputs.model}}") == Binding("step_output", "model", "train")
    assert binding_of("${{parent.jobs.train.outputs.model}}").text() == "${{parent.jobs.train.outputs.model}}"  # type: ignore[union-attr]
    assert binding_of("./data") is None and binding_of(3) is None
    assert binding_of("${{inputs.x}}") is None  # a command's own reference, not a binding
    with pytest.raises(NotABinding, match="inside other text"):
        binding_of("prefix_${{parent.inputs.x}}")
    with pytest.raises(NotABinding, match="not a binding distrun knows"):
        binding_of("${{parent.jobs.train.inputs.x}}")


def test_graph_order_levels_and_cycles() -> None:
    fan = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ()}
    assert run_order(fan) == ["a", "e", "b", "c", "d"]
    assert levels(fan) == {"a": 0, "e": 0, "b": 1, "c": 1, "d": 2}
    assert downstream_of("a", fan) == {"b", "c", "d"}
    assert downstream_of("e", fan) == set()
    assert find_cycle(fan) is None
    assert find_cycle({"a": ("c",), "b": ("a",), "c": ("b",)}) == ["a", "c", "b", "a"]
    assert find_cycle({"a": ("a",)}) == ["a", "a"]
    assert find_cycle({"a": ("missing",)}) is None  # an undefined step is reported on its own
    with pytest.raises(ValueError, match="cycle"):
        run_order({"a": ("b",), "b": ("a",)})


def test_a_datastore_path_a_later_step_reads_may_be_written_by_an_earlier_step(distrun_home: Path) -> None:
    """Microsoft's 4b: the first step writes a datastore folder, the second reads a file in it."""
    missing = "azureml://datastores/workspaceblobstore/paths/shared/hello.txt"
    data = {
        "type": "pipeline",
        "jobs": {
            "write": {"command": "echo hi", "outputs": {"out": {"type": "uri_folder"}}},
            "read": {
                "command": "cat ${{inputs.note}} ${{inputs.after}}",
                "inputs": {
                    "note": {"type": "uri_file", "path": missing},
                    "after": "${{parent.jobs.write.outputs.out}}",
                },
            },
        },
    }
    pipeline = load_pipeline_data(data, distrun_home)
    assert pipeline.steps["read"].document["inputs"]["note"]["path"] == missing  # checked when it starts
    # A step that runs first reads only what is there before the pipeline: refused now.
    note = {"note": {"type": "uri_file", "path": missing}}
    data["jobs"]["first"] = {"command": "cat ${{inputs.note}}", "inputs": note}
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, distrun_home)
    assert [p.key_path for p in caught.value.problems] == ["jobs.first.inputs.note.path"]
    assert "which does not exist" in caught.value.problems[0].message


# ---------------------------------------------------------------- value outputs


def test_a_value_input_reads_a_value_output_of_the_step_before(tmp_path: Path, distrun_home: Path) -> None:
    def component(outputs: dict, inputs: dict | None = None) -> dict:
        return {"type": "command", "command": "true", "inputs": inputs or {}, "outputs": outputs}

    data = {
        "type": "pipeline",
        "jobs": {
            "count": {
                "type": "command",
                "component": component({"n": {"type": "integer"}, "d": {"type": "uri_folder"}}),
            },
            "use": {
                "type": "command",
                "component": component({}, {"times": {"type": "integer"}, "where": {"type": "string"}}),
                "inputs": {"times": "${{parent.jobs.count.outputs.n}}", "where": "${{parent.jobs.count.outputs.d}}"},
            },
        },
    }
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, tmp_path)
    [problem] = caught.value.problems  # a data output is no value: said at the input that reads it
    assert problem.key_path == "jobs.use.inputs.where" and "is data" in problem.message
    del data["jobs"]["use"]["inputs"]["where"], data["jobs"]["use"]["component"]["inputs"]["where"]
    pipeline = load_pipeline_data(data, tmp_path)
    use = pipeline.steps["use"]
    assert use.depends_on == ("count",) and use.values == {"times": "integer"}
    # The value output is the file its step's command is given; the input gets its value once it ran.
    assert pipeline.steps["count"].document["outputs"]["n"] == {"type": "uri_file"}
    assert use.bound_document(str)["inputs"]["times"] == 0  # a stand-in of its type until then
    assert use.bound_document(str, lambda up, kind: f"{up.step}.{up.output} as {kind}")["inputs"]["times"] == (
        "count.n as integer"
    )


def test_a_pipelines_outputs_are_read_back_from_its_recorded_steps() -> None:
    from distrun.store.pipeline_outputs import pipeline_outputs

    steps = {
        "prepare": {"job": "p.prepare", "status": "Completed", "pipeline_outputs": {}},
        "train": {"job": "old.train", "status": "Completed", "pipeline_outputs": {"model": "final_model"}},
        "score": {"job": "p.score", "status": "NotStarted"},  # a record from before: no outputs kept
    }
    found = pipeline_outputs(steps)
    assert list(found) == ["final_model"]
    assert found["final_model"].to_dict("p") == {
        "step": "train",
        "output": "model",
        "job": "old.train",  # a reused step's outputs are the earlier job's
        "status": "Completed",
        "path": "azureml://jobs/p/outputs/final_model",
    }
    assert pipeline_outputs(None) == {}


def test_settings_bound_to_the_pipelines_inputs_take_their_values() -> None:
    pipeline = load_pipeline_file(DATA / "pipelines" / "bound_settings" / "pipeline.yml")
    steps = pipeline.steps
    # A command step's compute, a step inside a pipeline component (from the input its naming step
    # gave), the component's other step (the compute the naming step was given) and a node count.
    assert steps["compare"].document["compute"] == "local"
    assert steps["stage.write"].document["compute"] == "local"
    assert steps["stage.after"].document["compute"] == "local"
    assert steps["stage.write"].document["resources"]["instance_count"] == 2
    changed = load_pipeline_file(
        DATA / "pipelines" / "bound_settings" / "pipeline.yml",
        ["inputs.compare_compute=cpu", "inputs.stage_compute=gpu", "inputs.nodes=3"],
    )
    assert [changed.steps[s].document["compute"] for s in ("compare", "stage.write", "stage.after")] == [
        "cpu",
        "gpu",
        "gpu",
    ]
    assert changed.steps["stage.write"].document["resources"]["instance_count"] == 3


def test_a_setting_bound_to_what_is_not_a_pipeline_input_is_refused(tmp_path: Path) -> None:
    data = {
        "type": "pipeline",
        "inputs": {"target": "local"},
        "jobs": {
            "first": {"command": "echo", "outputs": {"out": {}}, "compute": "${{parent.inputs.taget}}"},
            "second": {"command": "echo", "compute": "${{parent.jobs.first.outputs.out}}"},
        },
    }
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, tmp_path)
    said = {p.key_path: p.message + " | " + p.hint for p in caught.value.problems}
    assert said["jobs.first.compute"] == (
        "${{parent.inputs.taget}}: 'taget' is not an input of the pipeline | "
        "bind the setting to one of the pipeline's value inputs: target"
    )
    assert said["jobs.second.compute"].startswith(
        "${{parent.jobs.first.outputs.out}} cannot be a setting: a step's settings are known before any step runs"
    )


def test_a_steps_reserved_outputs_are_known_declared_or_not(tmp_path: Path) -> None:
    pipeline = load_pipeline_file(DATA / "pipelines" / "reserved" / "pipeline.yml")
    assert pipeline.steps["read_artifacts"].upstream == {"greeted": UpstreamOutput("greet", "artifacts")}
    assert pipeline.steps["read_default"].upstream == {"greeted": UpstreamOutput("greet", "default")}
    data = {"type": "pipeline", "jobs": {"a": {"command": "echo"}, "b": {"command": "echo ${{inputs.x}}"}}}
    data["jobs"]["b"]["inputs"] = {"x": "${{parent.jobs.a.outputs.artifact}}"}  # not a reserved name
    with pytest.raises(ValidationError, match="refers to an undefined output 'artifact' of step 'a'"):
        load_pipeline_data(data, tmp_path)
