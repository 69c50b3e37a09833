"""Reading a Spark job's application id and UI address from its driver's log."""

from __future__ import annotations

import os
from pathlib import Path

from distrun.runner.spark_app import DRIVER_LOG, application_of, spark_application, spark_lines

LOCAL = (
    b"26/12/06 18:48:45 INFO JettyUtils: Start Jetty 127.0.0.1:4041 for SparkUI\n"
    b"26/12/06 18:49:28 INFO RollingEventLogFilesWriter: Logging events to "
    b"file:/jobs/j1/spark-events/eventlog_v2_local-1796582967367/events_1_local-1796582967367.zstd\n"
)
STANDALONE = (
    b"INFO JettyUtils: Start Jetty 0.0.0.0:4040 for SparkUI\n"
    b"INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-20261206184900-0003\n"
)


def test_the_id_and_ui_are_read_from_sparks_own_lines() -> None:
    assert application_of(LOCAL) == {"application_id": "local-1796582967367", "ui": "http://127.0.0.1:4041"}
    assert application_of(STANDALONE) == {"application_id": "app-20261206184900-0003", "ui": "http://127.0.0.1:4040"}
    single = b"INFO SingleEventLogFileWriter: Logging events to file:/j/spark-events/local-1796590430440.inprogress\n"
    assert application_of(single) == {"application_id": "local-1796590430440"}  # distrun's one-file event log
    assert application_of(b"print('app-1 local-2')\n") == {}


def test_the_ui_is_shown_only_while_the_job_runs() -> None:
    found = application_of(LOCAL)
    assert spark_lines(found, running=True) == [
        "Spark application: local-1796582967367",
        "Spark UI:          http://127.0.0.1:4041",
    ]
    assert spark_lines(found, running=False) == ["Spark application: local-1796582967367"]
    app = "app-20261206184900-0003"
    on_cluster = spark_lines(application_of(STANDALONE), running=False, target_type="spark")
    assert on_cluster[-1] == (
        "Executors' logs:   user_logs/std_log_executor_N.txt (N: the executor), "
        f"from each worker's SPARK_WORKER_DIR/{app}/N/"
    )
    on_slurm = spark_lines(application_of(STANDALONE), running=False, target_type="slurm")
    assert on_slurm[-1].endswith(f"from spark-cluster/work_NN/{app}/N/")


def test_a_driver_log_swapped_for_a_link_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(LOCAL)
    (tmp_path / "user_logs").mkdir()
    os.symlink(elsewhere, tmp_path / DRIVER_LOG)
    assert spark_application(tmp_path) == {}
    os.unlink(tmp_path / DRIVER_LOG)
    (tmp_path / DRIVER_LOG).write_bytes(LOCAL)
    assert spark_application(tmp_path)["application_id"] == "local-1796582967367"
    assert spark_application(tmp_path / "missing") == {}


def test_the_application_id_is_stored_in_the_record_once_the_driver_named_it(tmp_path: Path) -> None:
    from distrun.core.job_kind import JobKind
    from distrun.core.job_status import JobStatus
    from distrun.runner.spark_app import with_application_id
    from distrun.store.index import JobIndex, JobRecord

    index = JobIndex(tmp_path / "jobs.db")
    folder = tmp_path / "j1"
    (folder / "user_logs").mkdir(parents=True)
    index.insert(JobRecord("j1", JobStatus.RUNNING, "local", str(folder), 1.0, kind=JobKind.SPARK))
    before = with_application_id(index, index.get("j1"))
    assert before.spark_application_id is None  # the driver has said nothing yet
    (folder / DRIVER_LOG).write_bytes(STANDALONE)
    index.update("j1", status=JobStatus.COMPLETED)
    seen = with_application_id(index, index.get("j1"))
    assert seen.spark_application_id == "app-20261206184900-0003"
    assert index.get("j1").to_dict()["spark_application_id"] == "app-20261206184900-0003"  # data, kept
    (folder / DRIVER_LOG).write_bytes(LOCAL)  # a later rewrite of the job-writable log changes nothing
    assert with_application_id(index, index.get("j1")).spark_application_id == "app-20261206184900-0003"
