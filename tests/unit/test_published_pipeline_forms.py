"""Two forms published Azure ML pipelines use, which Azure ML runs, load as Azure ML reads them:
"True"/"False" text given to a boolean input, and an input a pipeline component does not declare."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_data, load_pipeline_file

FLAGS = """\
type: command
name: flags
inputs:
  resize: {type: boolean}
  flip: {type: boolean, default: false}
  crop: {type: boolean, default: true}
command: echo resize=${{inputs.resize}} flip=${{inputs.flip}} crop=${{inputs.crop}}
"""


def test_true_and_false_as_text_are_boolean_values_that_reach_the_command_as_written(tmp_path: Path) -> None:
    (tmp_path / "flags.yml").write_text(FLAGS, encoding="utf-8")
    data = {
        "type": "pipeline",
        "jobs": {
            "transform": {
                "type": "command",
                "component": "./flags.yml",
                "inputs": {"resize": "False", "flip": "True", "crop": "false"},
            }
        },
    }
    pipeline = load_pipeline_data(data, tmp_path)
    # Azure ML hands a step's value to its command as text: "False" runs as "False".
    assert pipeline.steps["transform"].document["inputs"] == {"resize": "False", "flip": "True", "crop": "false"}


def test_other_text_for_a_boolean_input_is_still_refused_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "flags.yml").write_text(FLAGS, encoding="utf-8")
    step = {"type": "command", "component": "./flags.yml", "inputs": {"resize": "no"}}
    data = {"type": "pipeline", "jobs": {"t": step}}
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, tmp_path)
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.t.inputs.resize" and "expected true or false, got 'no'" in problem.message
    assert "type: boolean" in problem.hint


def test_an_input_a_pipeline_component_does_not_declare_is_dropped_and_said(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "flags.yml").write_text(FLAGS, encoding="utf-8")
    (stage / "stage.yml").write_text(
        "type: pipeline\nname: stage\ninputs:\n  raw_data: {type: uri_folder}\n"
        "jobs:\n  prep:\n    type: command\n    component: ./flags.yml\n    inputs:\n      resize: true\n",
        encoding="utf-8",
    )
    (tmp_path / "data").mkdir()
    pipeline_file = tmp_path / "pipeline.yml"
    pipeline_file.write_text(
        "type: pipeline\n"
        "inputs:\n  raw: {type: uri_folder, path: ./data}\n"
        "jobs:\n"
        "  data_stage:\n"
        "    type: pipeline\n"
        "    component: ./stage/stage.yml\n"
        "    inputs:\n"
        "      raw_data: ${{parent.inputs.raw}}\n"
        "      test_split_ratio: 0.2\n",
        encoding="utf-8",
    )
    pipeline = load_pipeline_file(pipeline_file)
    # Azure ML builds a step's inputs from its component's declarations only: the pipeline runs.
    assert list(pipeline.steps) == ["data_stage.prep"]
    assert "test_split_ratio" not in pipeline.steps["data_stage.prep"].document["inputs"]
    assert pipeline.notes == [
        f"{pipeline_file}:10:7: jobs.data_stage.inputs.test_split_ratio: the component declares no input "
        "'test_split_ratio' (its inputs: raw_data): Azure ML drops it, and so does distrun"
    ]


def test_an_undeclared_input_close_to_a_declared_one_is_a_misspelling_and_refused(tmp_path: Path) -> None:
    (tmp_path / "flags.yml").write_text(FLAGS, encoding="utf-8")
    data = {
        "type": "pipeline",
        "jobs": {"t": {"type": "command", "component": "./flags.yml", "inputs": {"resize": True, "flipp": True}}},
    }
    with pytest.raises(ValidationError) as caught:
        load_pipeline_data(data, tmp_path)
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.t.inputs.flipp" and problem.hint == "did you mean 'flip'?"
