"""`type: spark` job files: what loads (the command job that runs spark-submit) and what Azure ML
refuses, refused here with file:line, key path and a hint."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.core.job_kind import JobKind
from distrun.loading.loader import load_job_file
from distrun.prepare.compute import ComputeTarget
from distrun.runner.spark_jobs import ready_to_run
from distrun.spec.loaded_spark import LoadedSparkJob
from distrun.spec.spark_conf import local_cores

SIZED = """\
conf:
  spark.driver.cores: 1
  spark.driver.memory: 2g
  spark.executor.cores: 2
  spark.executor.memory: 2g
"""

JOB = f"""\
$schema: https://azuremlschemas.azureedge.net/latest/sparkJob.schema.json
type: spark
code: ./src
entry:
  file: prep.py
py_files: [helpers.py]
{SIZED}  spark.executor.instances: 2
  spark.sql.shuffle.partitions: 4
inputs:
  raw:
    type: uri_file
    path: ./raw.csv
    mode: direct
outputs:
  prepared:
    type: uri_folder
    mode: direct
args: >-
  --raw ${{{{inputs.raw}}}}
  --prepared ${{{{outputs.prepared}}}}
identity:
  type: managed
resources:
  instance_type: standard_e4s_v3
  runtime_version: "3.4"
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "prep.py").write_text("print('prep')\n")
    (tmp_path / "raw.csv").write_text("a,b\n1,2\n")
    path = tmp_path / "job.yml"
    path.write_text(text)
    return path


def _problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(ValidationError) as caught:
        load_job_file(_write(tmp_path, text))
    return str(caught.value)


def test_a_spark_job_loads_as_the_command_job_that_runs_spark_submit(tmp_path: Path) -> None:
    loaded = load_job_file(_write(tmp_path, JOB))
    assert isinstance(loaded, LoadedSparkJob) and loaded.kind is JobKind.SPARK
    words = shlex.split(loaded.spec.command.replace("${{", "<").replace("}}", ">"))
    # Spark's event log goes to the job's folder (the driver names its application id opening it)
    assert words[:8] == ["mkdir", "-p", "$DISTRUN_JOB_DIR/spark-events", "&&", "exec"] + [
        "$SPARK_HOME/bin/spark-submit",
        "--master",
        f"local[{loaded.local_cores}]",
    ]
    assert "spark.eventLog.dir=$DISTRUN_JOB_DIR/spark-events" in words
    # one uncompressed file: a single chmod at its start, no native compression library loaded
    assert {"spark.eventLog.compress=false", "spark.eventLog.rolling.enabled=false"} <= set(words)
    assert "spark.sql.shuffle.partitions=4" in words and words[words.index("--py-files") + 1] == "helpers.py"
    assert words[-5:] == ["prep.py", "--raw", "<inputs.raw>", "--prepared", "<outputs.prepared>"]
    assert loaded.spec.code == "./src" and set(loaded.spec.inputs) == {"raw"}
    assert any("identity is not used here" in note for note in loaded.notes)


def test_local_mode_gets_the_driver_and_executors_cores_at_most_the_machines() -> None:
    conf = {"spark.driver.cores": "1", "spark.executor.cores": "2", "spark.executor.instances": "3"}
    assert (local_cores(conf, 16).given, local_cores(conf, 16).note) == (7, None)
    reduced = local_cores(conf, 2)
    assert reduced.given == 2 and "with 2 cores: conf asks for 7" in str(reduced.note)
    dynamic = {**conf, "spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "4"}
    assert local_cores(dynamic, 64).asked == 9


def test_dynamic_allocation_without_its_bounds_is_refused_where_it_is_written(tmp_path: Path) -> None:
    text = JOB.replace("  spark.executor.instances: 2\n", "  spark.dynamicAllocation.enabled: True\n")
    said = _problems(tmp_path, text)
    assert "job.yml:7:1: conf: dynamic allocation needs its bounds" in said
    assert "hint: add e.g. spark.dynamicAllocation.minExecutors: 1" in said


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (
            "  spark.dynamicAllocation.enabled: true\n  spark.dynamicAllocation.minExecutors: 3\n"
            "  spark.dynamicAllocation.maxExecutors: 2\n",
            "conf.spark.dynamicAllocation.minExecutors: spark.dynamicAllocation.minExecutors (3) must be above 0",
        ),
        (
            "  spark.dynamicAllocation.enabled: true\n  spark.dynamicAllocation.minExecutors: 1\n"
            "  spark.dynamicAllocation.maxExecutors: 2\n  spark.executor.instances: 5\n",
            "conf.spark.executor.instances: spark.executor.instances (5) is not between",
        ),
        (
            "  spark.executor.instances: 2\n  spark.dynamicAllocation.maxExecutors: 2\n",
            "conf.spark.dynamicAllocation.maxExecutors: spark.dynamicAllocation.maxExecutors is set but dynamic "
            "allocation is off",
        ),
        ("  spark.executor.instances: two\n", "conf.spark.executor.instances: spark.executor.instances is 'two'"),
        ("", "conf: a Spark job's conf needs spark.executor.instances"),
    ],
)
def test_what_azure_ml_refuses_in_conf_is_refused(tmp_path: Path, conf: str, expected: str) -> None:
    assert expected in _problems(tmp_path, JOB.replace("  spark.executor.instances: 2\n", conf))


def test_entry_modes_and_targets_are_checked_as_azure_ml_checks_them(tmp_path: Path) -> None:
    text = JOB.replace("  file: prep.py", "  file: prep.py\n  class_name: org.example.Main")
    text = text.replace("    mode: direct\noutputs", "    mode: ro_mount\noutputs").replace(
        "args:", "compute: big\nargs:"
    )
    said = _problems(tmp_path, text)
    assert "entry: a Spark job's entry is a `file` or a `class_name`, one of the two" in said
    assert "job.yml:19:5: inputs.raw.mode: input 'raw' is in 'ro_mount' mode" in said
    assert "resources: a Spark job names `compute` or `resources`, not both" in said


def test_a_missing_entry_file_and_an_undefined_reference_are_named_at_their_keys(tmp_path: Path) -> None:
    text = JOB.replace("file: prep.py", "file: missing.py").replace("${{outputs.prepared}}", "${{outputs.prepard}}")
    said = _problems(tmp_path, text)
    assert "entry.file: the entry file 'missing.py' is not in the code folder" in said
    assert "args: ${{outputs.prepard}} refers to an undefined output 'prepard'" in said
    assert "did you mean outputs.prepared?" in said


def test_an_unknown_key_is_named_with_the_spark_jobs_keys(tmp_path: Path) -> None:
    said = _problems(tmp_path, JOB.replace("py_files:", "pyfiles:"))
    assert "pyfiles: unknown key 'pyfiles'" in said and "did you mean 'py_files'?" in said


def test_a_spark_component_file_is_named_as_one(tmp_path: Path) -> None:
    said = _problems(tmp_path, "type: spark\nversion: 1\nname: prep\n" + JOB.split("type: spark\n", 1)[1])
    assert "this file is a spark component, not a command job" in said


COMPONENT = """\
type: spark
version: 1
code: ./src
entry: {file: prep.py}
inputs:
  raw: {type: uri_file, mode: direct}
outputs:
  prepared: {type: uri_folder, mode: direct}
args: --raw ${{inputs.raw}} --prepared ${{outputs.prepared}}
conf:
  spark.driver.cores: 1
  spark.driver.memory: 1g
  spark.executor.cores: 1
  spark.executor.memory: 1g
  spark.dynamicAllocation.enabled: true
"""

PIPELINE = """\
type: pipeline
jobs:
  prep:
    type: spark
    component: ./prep.yml
    inputs:
      raw: {type: uri_file, path: ./raw.csv, mode: direct}
    conf:
      spark.dynamicAllocation.minExecutors: 1
      spark.dynamicAllocation.maxExecutors: 2
  other:
    type: spark
    component: ./command.yml
"""


def test_a_spark_step_takes_its_components_program_and_is_checked_as_a_spark_job(tmp_path: Path) -> None:
    from distrun.loading.documents import load_document_file

    _write(tmp_path, "")
    (tmp_path / "prep.yml").write_text(COMPONENT)
    (tmp_path / "command.yml").write_text("command: echo hi\n")
    (tmp_path / "pipeline.yml").write_text(PIPELINE.split("  other:")[0])
    pipeline = load_document_file(tmp_path / "pipeline.yml")
    step = pipeline.steps["prep"].document  # type: ignore[union-attr]
    assert (step["type"], step["entry"], step["conf"]["spark.dynamicAllocation.maxExecutors"]) == (
        "spark",
        {"file": "prep.py"},
        2,
    )
    (tmp_path / "pipeline.yml").write_text(PIPELINE.replace("      spark.dynamicAllocation.minExecutors: 1\n", ""))
    with pytest.raises(ValidationError) as caught:
        load_document_file(tmp_path / "pipeline.yml")
    said = str(caught.value)
    assert "jobs.prep.conf: dynamic allocation needs its bounds" in said
    assert "jobs.other.type: the step is `type: spark` but its component is not one" in said


def test_a_spark_3_runtime_gets_spark_3s_sql_defaults_unless_its_conf_says(tmp_path: Path) -> None:
    from distrun.runner.spark_jobs import runtime_defaults, runtime_note

    loaded = load_job_file(_write(tmp_path, JOB))
    assert runtime_defaults(loaded) == {"spark.sql.ansi.enabled": "false"}  # runtime_version "3.4"
    assert "resources.runtime_version 3.4" in runtime_note(loaded)
    ansi = JOB.replace("  spark.sql.shuffle", "  spark.sql.ansi.enabled: true\n  spark.sql.shuffle")
    assert runtime_defaults(load_job_file(_write(tmp_path, ansi))) == {}
    newer = JOB.replace('runtime_version: "3.4"', 'runtime_version: "4.0"')
    assert runtime_defaults(load_job_file(_write(tmp_path, newer))) == {}
    unnamed = load_job_file(_write(tmp_path, JOB.replace('  runtime_version: "3.4"\n', "")))
    assert runtime_defaults(unnamed) == {"spark.sql.ansi.enabled": "false"}
    assert "no resources.runtime_version (Azure ML's are 3.x)" in runtime_note(unnamed)


def test_a_spark_component_file_loads_on_its_own_with_its_args_references_checked(tmp_path: Path) -> None:
    from distrun.loading.component_reader import load_component_file

    _write(tmp_path, "")
    (tmp_path / "prep.yml").write_text(COMPONENT)
    assert load_component_file(tmp_path / "prep.yml").spec.entry.file == "prep.py"  # type: ignore[union-attr]
    (tmp_path / "prep.yml").write_text(COMPONENT.replace("${{outputs.prepared}}", "${{outputs.prepard}}"))
    with pytest.raises(ValidationError, match="refers to an undefined output 'prepard'"):
        load_component_file(tmp_path / "prep.yml")


def test_a_uri_file_input_that_is_a_folder_is_read_in_place_by_spark(tmp_path: Path) -> None:
    # Spark writes a uri_file output as a folder of part files; the step after it reads that.
    (tmp_path / "written.csv").mkdir()
    text = JOB.replace("path: ./raw.csv", "path: ./written.csv")
    assert load_job_file(_write(tmp_path, text)).spec.inputs["raw"].path == "./written.csv"  # type: ignore[union-attr]


def test_on_an_engines_target_the_job_is_said_to_run_in_local_mode_on_one_node(tmp_path: Path) -> None:
    loaded = load_job_file(_write(tmp_path, JOB))
    on_ray = ready_to_run(loaded, ComputeTarget("rc", "ray", {}))  # type: ignore[arg-type]
    assert "--master 'local[" in on_ray.loaded.spec.command
    assert any(note.startswith("compute 'rc' is ray: the job runs in Spark's local mode") for note in on_ray.notes)
    on_this_machine = ready_to_run(loaded, ComputeTarget("local", "local", {}))  # type: ignore[arg-type]
    assert not any("is ray" in note or "on one node" in note for note in on_this_machine.notes)


def test_on_a_spark_target_the_application_holds_the_cores_of_the_executors_it_asks_for() -> None:
    # A standalone master gives an application every free core unless spark.cores.max bounds it.
    from distrun.runner.spark_jobs import standalone_defaults

    assert standalone_defaults({"spark.executor.instances": "2"}) == {"spark.cores.max": "2"}
    assert standalone_defaults({"spark.executor.instances": "3", "spark.executor.cores": "2"}) == {
        "spark.cores.max": "6"
    }
    dynamic = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": "4",
        "spark.executor.cores": "2",
    }
    assert standalone_defaults(dynamic) == {"spark.cores.max": "8"}
    assert standalone_defaults({"spark.executor.instances": "2", "spark.cores.max": "5"}) == {}
