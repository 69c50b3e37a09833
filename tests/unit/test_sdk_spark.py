"""`from distrun import spark`: azure-ai-ml's `spark(...)`, checked as a `type: spark` file is."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from distrun import Input, MLClient, Output, spark
from distrun.core.job_kind import JobKind
from distrun.entities import SparkJob


def _job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changed: object) -> SparkJob:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "prep.py").write_text("print('prep')\n")
    (tmp_path / "raw.csv").write_text("a\n1\n")
    settings: dict = dict(
        code="./src",
        entry={"file": "prep.py"},
        py_files=["helpers.zip"],
        driver_cores=1,
        driver_memory="1g",
        executor_cores=2,
        executor_memory="1g",
        executor_instances=2,
        conf={"spark.sql.shuffle.partitions": 4},
        inputs={"raw": Input(type="uri_file", path="./raw.csv", mode="direct")},
        outputs={"prepared": Output(type="uri_folder", mode="direct")},
        args="--raw ${{inputs.raw}} --prepared ${{outputs.prepared}}",
        resources={"instance_type": "standard_e4s_v3", "runtime_version": "3.4"},
    )
    return spark(**{**settings, **changed})


def test_spark_builds_the_job_a_spark_file_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job(tmp_path, monkeypatch)
    data = job._to_data()
    assert data["type"] == "spark" and data["entry"] == {"file": "prep.py"}
    assert data["conf"]["spark.executor.instances"] == 2 and data["conf"]["spark.sql.shuffle.partitions"] == 4
    loaded = job._job_source().load()
    assert loaded.kind is JobKind.SPARK
    words = shlex.split(loaded.spec.command.replace("${{", "<").replace("}}", ">"))
    assert words[-5:] == ["prep.py", "--raw", "<inputs.raw>", "--prepared", "<outputs.prepared>"]
    assert MLClient().jobs.validate(job).passed


def test_what_azure_ml_refuses_is_said_with_the_line_that_built_it(tmp_path: Path, monkeypatch) -> None:
    job = _job(tmp_path, monkeypatch, executor_instances=None, dynamic_allocation_enabled=True)
    result = MLClient().jobs.validate(job)
    assert not result.passed
    assert "dynamic allocation needs its bounds" in str(result.error)
    assert "test_sdk_spark.py" in str(result.error)


def test_a_spark_job_called_in_a_pipeline_function_is_its_spark_step(tmp_path: Path, monkeypatch) -> None:
    from distrun import dsl

    component = _job(tmp_path, monkeypatch, inputs={"raw": Input(type="uri_file", mode="direct")})

    @dsl.pipeline()
    def prepare(data: Input) -> None:
        component(raw=data)

    job = prepare(data=Input(type="uri_file", path="./raw.csv", mode="direct"))
    result = MLClient().jobs.validate(job)
    assert result.passed, result.error
    (step,) = job.jobs.values()
    assert step._to_data()["type"] == "spark"
