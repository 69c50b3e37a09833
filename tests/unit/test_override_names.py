"""`--set` of an input or output the job does not have is refused with a did-you-mean, and a file's
problems come in one round with its unknown compute target."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_file
from distrun.runner.checked_documents import load_checked_document
from distrun.store.layout import Layout
from support.job_files import load_text, write_job

JOB = """\
command: python train.py --factor ${{inputs.factor}} --out ${{outputs.model}}
code: src
inputs:
  factor: 2
outputs:
  model:
    type: uri_folder
"""

PIPELINE = """\
type: pipeline
inputs:
  factor: 2
jobs:
  scale:
    type: command
    command: echo ${{inputs.f}}
    inputs:
      f: ${{parent.inputs.factor}}
"""


def _problems(caught: pytest.ExceptionInfo[ValidationError]) -> list[tuple[str, str, str]]:
    return [(p.key_path, str(p.position), p.hint) for p in caught.value.problems]


def test_a_misspelt_input_is_refused_with_the_name_it_meant(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, JOB, ["inputs.factr=3"])
    assert _problems(caught) == [
        ("inputs.factr", "--set inputs.factr=3", "did you mean inputs.factor? The job's inputs: factor")
    ]
    assert "unknown input 'factr'" in caught.value.problems[0].message


def test_a_misspelt_output_is_refused_and_each_refusal_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, JOB, ["outputs.modle.mode=upload", "inputs.factor=4", "inputs.seed=1"])
    assert [(key, where) for key, where, _ in _problems(caught)] == [
        ("outputs.modle", "--set outputs.modle.mode=upload"),
        ("inputs.seed", "--set inputs.seed=1"),
    ]
    assert caught.value.problems[0].hint.startswith("did you mean outputs.model?")
    assert "declare a new input under `inputs:`" in caught.value.problems[1].hint


def test_declared_and_used_inputs_may_be_set(tmp_path: Path) -> None:
    job = load_text(tmp_path, JOB, ["inputs.factor=4", "outputs.model.mode=upload"])
    assert job.spec.inputs["factor"] == 4
    # An input the (overridden) command uses is the job's even where the file declares none.
    job = load_text(tmp_path, "command: echo x\n", ["command=echo ${{inputs.n}}", "inputs.n=3"])
    assert job.spec.inputs == {"n": 3}


def test_a_refused_input_is_reported_with_the_files_other_problems(tmp_path: Path) -> None:
    text = JOB.replace(
        "inputs:\n  factor: 2\n", "inputs:\n  factor: 2\n  data:\n    type: uri_folder\n    path: ./missing\n"
    )
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, text, ["inputs.factr=3"])
    keys = [p.key_path for p in caught.value.problems]
    assert keys == ["inputs.data.path", "inputs.factr"]


def test_a_pipelines_inputs_and_its_inline_steps_inputs_are_checked(tmp_path: Path) -> None:
    path = write_job(tmp_path, PIPELINE, "pipeline.yml")
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(path, ["inputs.factr=3", "jobs.scale.inputs.ff=1"])
    assert _problems(caught) == [
        ("inputs.factr", "--set inputs.factr=3", "did you mean inputs.factor? The job's inputs: factor"),
        (
            "jobs.scale.inputs.ff",
            "--set jobs.scale.inputs.ff=1",
            "did you mean jobs.scale.inputs.f? The job's inputs: f",
        ),
    ]
    pipeline = load_pipeline_file(path, ["inputs.factor=3", "jobs.scale.inputs.f=1"])
    assert pipeline.spec.inputs["factor"] == 3


def test_an_unknown_compute_comes_in_the_same_round_as_a_missing_input(tmp_path: Path) -> None:
    text = (
        "command: echo ${{inputs.data}}\n"
        "inputs:\n  data:\n    type: uri_folder\n    path: ./missing\n"
        "compute: azureml:gpu-clustr\n"
    )
    path = write_job(tmp_path, text)
    layout = Layout(tmp_path / "home")
    with pytest.raises(ValidationError) as caught:
        load_checked_document(path, (), layout)
    assert [(p.key_path, p.position.line if p.position else None) for p in caught.value.problems] == [
        ("inputs.data.path", 5),
        ("compute", 6),
    ]
    assert "unknown compute target 'gpu-clustr'" in caught.value.problems[1].message
    with pytest.raises(ValidationError) as caught:
        load_checked_document(path, (), layout, compute="other")
    assert [str(p.position) for p in caught.value.problems][1:] == ["--compute other"]
    # The target is defined: the file's own problem alone.
    with pytest.raises(ValidationError) as caught:
        load_checked_document(path, (), layout, compute="local")
    assert [p.key_path for p in caught.value.problems] == ["inputs.data.path"]
