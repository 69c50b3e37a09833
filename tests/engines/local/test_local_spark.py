"""`type: spark` on local compute: spark-submit in local mode, supervised as every distrun job.

One word-count job is shared by the assertions (a JVM start costs seconds): its data from and to
a datastore folder, its notes, its record; one waiting job is SIGKILLed with distrun."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import distrun_cli, start_distrun_cli
from support.jobs import only_job, processes_of_job, record, wait_for
from support.spark_jobs import COUNTS, WAITS, WORD_COUNT, read_counts, spark_home, write_spark_job
from support.wheelhouse import local_wheel_environment, make_wheel

# Their tests share one module-scoped job run: on one worker, so that it runs once per suite.
pytestmark = pytest.mark.xdist_group("local_spark")

PROBE = "distrun-spark-probe"
# The environment's package, imported by each executor's Python worker (in a task) and by the driver.
USES_PROBE = """\
import distrun_spark_probe
print("driver probe", distrun_spark_probe.VALUE, flush=True)
found = spark.sparkContext.parallelize(range(2), 2).map(lambda _: __import__("distrun_spark_probe").VALUE).collect()
print("executors' probe", sorted(set(found)), flush=True)
"""


def _environment(wheels: Path) -> str:
    """A conda file whose one package (made here, installed from a local folder) distrun's own
    Python does not have."""
    make_wheel(wheels, PROBE, "1.0", "VALUE = 'probe-1.0'\n")
    return local_wheel_environment(wheels, f"{PROBE}==1.0")


@pytest.fixture(scope="module")
def word_count(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("spark_local")
    home, store = spark_home(root)
    program = WORD_COUNT.replace("spark.stop()", USES_PROBE + "spark.stop()")
    job = write_spark_job(root / "job", "count.py", program, extra=_environment(root / "wheels"))
    return home, store, distrun_cli(home, "run", str(job), timeout=240)


def test_the_job_runs_in_local_mode_and_writes_its_direct_output_where_it_resolves(word_count) -> None:
    _, store, result = word_count
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_counts(store / "counts") == COUNTS
    assert "[driver] executors 0" in result.stdout  # local mode: the executor is the driver's JVM
    assert "[driver] marker of partition 1" in result.stdout  # and its Python workers' lines are the driver's


def test_the_environments_package_reaches_the_driver_and_the_executors_python_workers(word_count) -> None:
    _, _, result = word_count
    assert importlib.util.find_spec("distrun_spark_probe") is None  # not in distrun's own Python
    assert "[driver] driver probe probe-1.0" in result.stdout
    assert "[driver] executors' probe ['probe-1.0']" in result.stdout


def test_what_is_not_honoured_is_said_once_and_the_ui_is_named(word_count) -> None:
    _, _, result = word_count
    said = [line for line in result.stdout.splitlines() if line.startswith("distrun: note:")]
    assert sum("Spark runs in local mode with" in line and "conf asks for 9" in line for line in said) == 1
    assert sum("identity is not used here" in line for line in said) == 1
    assert any(line.startswith("distrun: note: Spark UI while the job runs: http://127.0.0.1:") for line in said)


def test_the_record_is_a_spark_jobs(word_count) -> None:
    home, _, _ = word_count
    rec = record(home, only_job(home))
    assert (rec["status"], str(rec["kind"])) == ("Completed", "spark")
    shown = distrun_cli(home, "job", "show", rec["name"])
    assert shown.returncode == 0 and "Completed" in shown.stdout
    as_json = json.loads(distrun_cli(home, "job", "show", rec["name"], "-o", "json").stdout)
    app_id = as_json["spark"]["application_id"]  # named by the driver as it opened its event log
    assert re.fullmatch(r"local-[0-9]{13}", app_id)
    assert as_json["spark_application_id"] == app_id  # stored in the record, as data
    assert f"Spark application: {app_id}" in shown.stdout
    assert "Spark UI:" not in shown.stdout  # it ended with the driver
    assert any(Path(rec["folder"], "spark-events").iterdir())  # what Spark's history server reads
    streamed = distrun_cli(home, "job", "stream", rec["name"]).stdout  # the kept log, by its role
    assert "[driver] executors 0" in streamed and "[0/0]" not in streamed


def test_no_jvm_is_left_after_a_sigkill_of_distrun(tmp_path: Path) -> None:
    home, _ = spark_home(tmp_path)
    job = write_spark_job(tmp_path / "job", "waits.py", WAITS, executors=1)
    run = start_distrun_cli(home, "run", "--name", "waits", str(job))
    try:
        assert run.stdout is not None
        for line in run.stdout:  # the driver's SparkContext is up and its tasks run
            if line.startswith("[driver] started"):  # the driver, by its role
                break
        assert len(processes_of_job("waits", home)) >= 2  # the JVM and its Python driver at least
        shown = distrun_cli(home, "job", "show", "waits").stdout  # while it runs: its UI's address
        assert re.search(r"^Spark UI: +http://127\.0\.0\.1:[0-9]+$", shown, re.MULTILINE), shown
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        wait_for(lambda: not processes_of_job("waits", home), timeout=30)
    finally:
        if run.poll() is None:
            run.kill()


def test_without_java_the_error_says_what_to_install(tmp_path: Path) -> None:
    home, _ = spark_home(tmp_path)
    job = write_spark_job(tmp_path / "job", "count.py", WORD_COUNT)
    python_only = str(Path(sys.executable).parent)  # bash and the rest stay found by their full paths
    result = distrun_cli(home, "run", str(job), env={"PATH": python_only, "JAVA_HOME": ""})
    assert result.returncode != 0
    assert "a Spark job needs Java, which is not installed" in result.stderr
    assert "sudo apt-get install openjdk-17-jre-headless" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
