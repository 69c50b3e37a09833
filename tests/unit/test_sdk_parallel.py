"""`from distrun.parallel import parallel_run_function, RunFunction` (azure-ai-ml's, as notebook 1g
and sdk/python/jobs/parallel use them): the step a call makes inside an `@pipeline` function loads
to the command step the same parallel step written in YAML loads to."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distrun import Input, Output
from distrun.dsl import pipeline
from distrun.loading.pipeline_loader import load_pipeline_data, load_pipeline_file
from distrun.parallel import RunFunction, parallel_run_function

YAML = """\
type: pipeline
jobs:
  score:
    type: parallel
    inputs:
      table: {type: mltable, path: ./table}
      model: {type: uri_folder, path: ./model}
    outputs:
      result: {type: uri_file}
    input_data: ${{inputs.table}}
    mini_batch_size: "10kb"
    resources: {instance_count: 2}
    max_concurrency_per_instance: 2
    mini_batch_error_threshold: 10
    retry_settings: {max_retries: 2, timeout: 60}
    logging_level: DEBUG
    environment_variables: {EXAMPLE: sdk}
    task:
      type: run_function
      code: ./script
      entry_script: score.py
      program_arguments: --model ${{inputs.model}} --allowed_failed_percent 30
      append_row_to: ${{outputs.result}}
"""


def test_a_parallel_function_call_is_the_yaml_parallel_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("table", "model", "script"):
        (tmp_path / folder).mkdir()
    (tmp_path / "script" / "score.py").write_text("def run(mini_batch):\n    return mini_batch\n")
    (tmp_path / "table" / "MLTable").write_text("paths:\n  - file: t.csv\n")
    (tmp_path / "pipeline.yml").write_text(textwrap.dedent(YAML))
    monkeypatch.chdir(tmp_path)
    score_function = parallel_run_function(
        name="score",
        inputs={"table": Input(type="mltable", mode="direct"), "model": Input(type="uri_folder")},
        outputs={"result": Output(type="uri_file")},
        input_data="${{inputs.table}}",
        mini_batch_size="10kb",
        instance_count=1,
        max_concurrency_per_instance=1,
        mini_batch_error_threshold=5,
        retry_settings={"max_retries": 2, "timeout": 60},
        logging_level="DEBUG",
        environment_variables={"EXAMPLE": "sdk"},
        task=RunFunction(
            code="./script",
            entry_script="score.py",
            program_arguments="--model ${{inputs.model}} --allowed_failed_percent 30",
            append_row_to="${{outputs.result}}",
        ),
    )

    @pipeline()
    def scoring() -> dict[str, object]:
        score = score_function(
            table=Input(type="mltable", path="./table"), model=Input(type="uri_folder", path="./model")
        )
        # What the notebook changes on the step, over the function's settings.
        score.resources.instance_count = 2
        score.max_concurrency_per_instance = 2
        score.mini_batch_error_threshold = 10
        score.inputs.model.mode = "download"  # notebook 1g sets its inputs' modes
        return {"scores": score.outputs.result}

    job = scoring()
    from_sdk = load_pipeline_data(job._to_data(), job._base_dir).steps["score"].document
    from_yaml = load_pipeline_file(tmp_path / "pipeline.yml").steps["score"].document
    for key in ("command", "distribution", "resources", "code", "environment_variables"):
        assert from_sdk[key] == from_yaml[key], key
    assert from_sdk["inputs"]["table"]["path"] == str(tmp_path / "table")
    # Its output is the pipeline's: the step writes it where the pipeline output is.
    step = load_pipeline_data(job._to_data(), job._base_dir).steps["score"]
    assert step.pipeline_outputs == {"result": "scores"} and from_sdk["outputs"]["result"]["type"] == "uri_file"


def test_unknown_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="takes no shards"):
        parallel_run_function(task=RunFunction(entry_script="a.py"), shards=3)
    with pytest.raises(TypeError, match="needs task=RunFunction"):
        parallel_run_function(name="x")
    with pytest.raises(TypeError, match="has no input tabel"):
        parallel_run_function(task=RunFunction(entry_script="a.py"), inputs={"table": Input()})(tabel=1)
