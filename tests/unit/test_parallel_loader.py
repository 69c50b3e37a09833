"""`type: parallel` pipeline steps load as the command step each runs as (2 nodes x M processes of
distrun's worker, with the step's settings), from an inline task or a parallel component file;
unknown or contradictory settings are refused before anything runs, with file:line and key; and
the input is split into mini-batches the same way in every process."""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path

import pytest

from distrun.agent.parallel_batches import split_input
from distrun.agent.parallel_run import arguments
from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_file
from distrun.spec.parallel_settings import batch_size

STEP = """\
type: pipeline
jobs:
  score:
    type: parallel
    inputs:
      data: {type: uri_folder, path: ./data}
      model: {type: uri_folder, path: ./data}
    outputs:
      result: {type: uri_file}
    input_data: ${{inputs.data}}
    mini_batch_size: "3"
    resources: {instance_count: 2}
    max_concurrency_per_instance: 2
    mini_batch_error_threshold: 5
    retry_settings: {max_retries: 2, timeout: 45}
    environment_variables: {A: "1"}
    task:
      type: run_function
      code: ./src
      entry_script: score.py
      program_arguments: >-
        --model ${{inputs.model}}
        --allowed_failed_percent 30
        --task_overhead_timeout 1200
      append_row_to: ${{outputs.result}}
"""


def folder(tmp_path: Path, pipeline: str, component: str | None = None) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "score.py").write_text("def run(mini_batch):\n    return mini_batch\n")
    (tmp_path / "data").mkdir()
    for n in range(7):
        (tmp_path / "data" / f"{n}.txt").write_text(str(n))
    if component is not None:
        (tmp_path / "score.yml").write_text(textwrap.dedent(component))
    (tmp_path / "pipeline.yml").write_text(textwrap.dedent(pipeline))
    return tmp_path / "pipeline.yml"


def test_an_inline_parallel_step_is_a_gang_of_workers(tmp_path: Path) -> None:
    loaded = load_pipeline_file(folder(tmp_path, STEP))
    document = loaded.steps["score"].document
    assert document["distribution"] == {"type": "pytorch", "process_count_per_instance": 2}
    assert document["resources"] == {"instance_count": 2}
    assert document["code"] == str(tmp_path / "src") and document["environment_variables"] == {"A": "1"}
    words = shlex.split(document["command"].split("; ", 2)[2])
    assert words[:3] == ["$P", "-m", "distrun.agent.parallel_run"]
    options, program = arguments(words[3:])
    assert (options.entry_script, options.input_data, options.files_per_batch) == ("score.py", "${{inputs.data}}", 3)
    assert (options.max_retries, options.timeout, options.mini_batch_error_threshold) == (2, 45.0, 5)
    assert (options.allowed_failed_percent, options.append_row_to) == (30.0, "${{outputs.result}}")
    assert program == [
        "--model",
        "${{inputs.model}}",
        "--allowed_failed_percent",
        "30",
        "--task_overhead_timeout",
        "1200",
    ]
    # A predefined argument distrun's runtime has no use for is said once, where it was written.
    assert any("--task_overhead_timeout tune Azure ML's own parallel runtime" in note for note in loaded.notes)


COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/parallelComponent.schema.json
type: parallel
name: score_files
inputs:
  data: {type: uri_folder}
  factor: {type: integer, default: 2}
outputs:
  result: {type: uri_file}
input_data: ${{inputs.data}}
mini_batch_size: "2"
max_concurrency_per_instance: 3
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: --factor ${{inputs.factor}}
  append_row_to: ${{outputs.result}}
"""


def test_a_step_naming_a_parallel_component_takes_its_keys(tmp_path: Path) -> None:
    pipeline = """\
    type: pipeline
    jobs:
      score:
        type: parallel
        component: ./score.yml
        inputs:
          data: ./data
        resources: {instance_count: 2}
    """
    document = load_pipeline_file(folder(tmp_path, pipeline, COMPONENT)).steps["score"].document
    assert document["distribution"]["process_count_per_instance"] == 3
    assert document["inputs"]["data"] == {"type": "uri_folder", "path": str(tmp_path / "data")}
    assert document["inputs"]["factor"] == 2
    assert "--files-per-batch 2" in document["command"] and document["command"].endswith("--factor ${{inputs.factor}}")


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "words"),
    [
        (
            '    mini_batch_size: "3"\n',
            '    mini_batch_size: "3"\n    shards: 4\n',
            12,
            "jobs.score.shards",
            "does not take",
        ),
        ('    mini_batch_size: "3"', '    mini_batch_size: "10mb"', 11, "jobs.score.mini_batch_size", "is a size"),
        (
            '    mini_batch_size: "3"',
            '    mini_batch_size: "many"',
            11,
            "jobs.score.mini_batch_size",
            "neither a count",
        ),
        (
            '    mini_batch_size: "3"',
            '    mini_batch_size: "3"\n    partition_keys: [a]',
            11,
            "jobs.score.mini_batch_size",
            "contradict",
        ),
        ("entry_script: score.py", "entry_script: nope.py", 20, "jobs.score.task.entry_script", "is not a file"),
        ("type: run_function", "type: model", 18, "jobs.score.task.type", "not run by distrun"),
        ("${{inputs.data}}\n", "${{inputs.dta}}\n", 10, "jobs.score.input_data", "naming one of the step's inputs"),
        ("append_row_to: ${{outputs.result}}", "append_row_to: out.txt", 25, "jobs.score.task.append_row_to", "naming"),
        ("timeout: 45", "timeout: 45, wait: 3", 15, "jobs.score.retry_settings.wait", "unknown key"),
        ("max_retries: 2", "max_retries: -1", 15, "jobs.score.retry_settings.max_retries", ">= 0"),
        (
            "mini_batch_error_threshold: 5",
            "mini_batch_error_threshold: 5\n    logging_level: LOUD",
            15,
            "jobs.score.logging_level",
            "not one",
        ),
        (
            "--allowed_failed_percent 30",
            "--mini_batch_error_threshold 7",
            21,
            "jobs.score.task.program_arguments",
            "mini_batch_error_threshold is 5 but program_arguments say --mini_batch_error_threshold 7",
        ),
        (
            "--allowed_failed_percent 30",
            "--allowed_failed_percent lots",
            21,
            "jobs.score.task.program_arguments",
            "not a float",
        ),
    ],
)
def test_bad_settings_are_refused_with_file_line_and_key(
    tmp_path: Path, old: str, new: str, line: int, key: str, words: str
) -> None:
    assert old in STEP
    path = folder(tmp_path, STEP.replace(old, new, 1))
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(path)
    found = [p for p in caught.value.problems if p.key_path == key]
    assert found, caught.value.render()
    assert words in found[0].message and found[0].position is not None
    assert (found[0].position.source, found[0].position.line) == (str(path), line), caught.value.render()
    assert found[0].hint


def test_a_step_without_task_or_with_a_non_parallel_component(tmp_path: Path) -> None:
    without = STEP.split("    task:")[0]
    with pytest.raises(ValidationError, match="a parallel step needs its `task`"):
        load_pipeline_file(folder(tmp_path, without))
    other = tmp_path / "other"
    other.mkdir()
    pipeline = "type: pipeline\njobs:\n  score:\n    type: parallel\n    component: ./score.yml\n"
    with pytest.raises(ValidationError, match=r"is not a parallel component"):
        load_pipeline_file(folder(other, pipeline, "type: command\ncommand: echo\n"))


def test_mini_batch_sizes_and_the_split(tmp_path: Path) -> None:
    assert batch_size("10") == (10, None) and batch_size(4) == (4, None)
    assert batch_size("10kb") == (None, 10240) and batch_size("1.5 MB") == (None, 1572864)
    assert batch_size("0") is None and batch_size("ten") is None
    path = folder(tmp_path, STEP).parent / "data"
    split = split_input(path, "uri_folder", 3, None)
    assert [len(b.files) for b in split.batches] == [3, 3, 1]
    assert [Path(f).name for b in split.batches for f in b.files] == [f"{n}.txt" for n in range(7)]
    table = tmp_path / "table"
    table.mkdir()
    (table / "t.csv").write_text("store,x\n" + "".join(f"{s},{i}\n" for i, s in enumerate("abab" * 3)))
    (table / "MLTable").write_text("paths:\n  - file: t.csv\ntransformations:\n  - read_delimited: {}\n")
    by_key = split_input(table, "mltable", None, None, ("store",))
    assert [(b.partition, b.size) for b in by_key.batches] == [({"store": "a"}, 6), ({"store": "b"}, 6)]
    by_rows = split_input(table, "auto", 5, None)
    assert by_rows.kind == "rows" and [b.rows for b in by_rows.batches] == [(0, 5), (5, 10), (10, 12)]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert split_input(empty, "uri_folder", 3, None).batches == []


def test_plan_shows_the_split_and_the_processes(tmp_path: Path, distrun_home: Path) -> None:
    from distrun.plan.pipeline_text import pipeline_as_text
    from distrun.runner.pipelines import plan_pipeline
    from distrun.store.layout import Layout

    text = pipeline_as_text(plan_pipeline(load_pipeline_file(folder(tmp_path, STEP)), Layout(distrun_home)))
    assert f"  mini-batches: 3 (1 to 3 files each; 7 files in {tmp_path / 'data'})\n" in text
    assert "pulled from one queue by 4 processes: rank_0 (node 0), rank_1 (node 0), rank_2 (node 1), rank_3" in text


def test_a_restarted_attempt_takes_only_what_did_not_end(tmp_path: Path) -> None:
    from distrun.agent.parallel_queue import Queue

    first = Queue(tmp_path, 4)
    assert [i for i in range(4) if first.claim(i)] == [0, 1, 2, 3]
    first.done(0, "p0", 2, ["a", "b"])
    first.failed(2, {"mini_batch": 2, "process": "p1", "items": 2, "tries": 3, "error": "boom"})
    first.stop("a threshold")
    with (tmp_path / "done.jsonl").open("a") as log:
        log.write('{"index": 1, "proc')  # the last line of a process killed while writing
    # The next attempt (max_restarts) reads what ended back: 1 and 3 were taken, never ended.
    second = Queue(tmp_path, 4)
    assert [i for i in range(4) if second.claim(i)] == [1, 3]
    assert second.counts() == (1, 1) and second.stopped() is None
    second.done(3, "p2", 1, ["c"])
    assert [r["lines"] for r in second.results()] == [["a", "b"], ["c"]]


def test_a_registered_parallel_component_is_named_by_a_step(tmp_path: Path, distrun_home: Path) -> None:
    from click.testing import CliRunner

    from distrun.cli.components import component_group

    pipeline = "type: pipeline\njobs:\n  score:\n    type: parallel\n    component: azureml:score_files:1\n"
    pipeline += "    inputs:\n      data: ./data\n"
    path = folder(tmp_path, pipeline, COMPONENT.replace("name: score_files\n", "name: score_files\nversion: 1\n"))
    created = CliRunner().invoke(component_group, ["create", "-f", str(tmp_path / "score.yml"), "-o", "json"])
    assert created.exit_code == 0, created.output
    (tmp_path / "src" / "score.py").unlink()  # the registered version has its own copy of the code
    document = load_pipeline_file(path).steps["score"].document
    assert document["code"] == str(distrun_home / "components" / "score_files" / "1" / "code")
    assert document["distribution"]["process_count_per_instance"] == 3 and "--files-per-batch 2" in document["command"]
    # A parallel component is checked before it is registered: its entry script must be in its code.
    broken = CliRunner().invoke(component_group, ["create", "-f", str(tmp_path / "score.yml"), "-v", "2"])
    assert isinstance(broken.exception, ValidationError)  # the CLI prints it with the file, line and key
    assert "entry script 'score.py' is not a file in" in str(broken.exception)
    assert "score.yml:" in str(broken.exception) and "task.entry_script" in str(broken.exception)
    (tmp_path / "pipeline.yml").write_text(pipeline.replace(":1\n", ":7\n"))
    with pytest.raises(ValidationError, match="score_files") as refused:
        load_pipeline_file(path)
    assert "pipeline.yml:5" in str(refused.value) and "jobs.score.component" in str(refused.value)
