"""Every reader of a file that a job (or a user) can replace, against each way of replacing it.

A job's processes run as the user: they can swap any file in their job folder, and in
DISTRUN_HOME, for a named pipe (an open for reading waits for a writer), a link to a device
(/dev/zero never ends), a link to some file outside (its contents would be taken for the
job's), or a folder. Each reader below is called in-process, in a forked child with capped
memory and a time limit (`support.guarded_call`): it must end, and either refuse with
distrun's own error or act as if the file were not there; never hang, never read without
bound, never take what the link points to.

The end-to-end test runs a real job that swaps its tracking file and the metrics store for
named pipes and checks that `distrun run`, `job show`, `distrun metrics` and `data list` end.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.guarded_call import guarded
from support.jobs import prepare_local_job
from support.reliability import job_file, run_capped

ALLOWED_ERRORS = ("DistrunError", "ValidationError", "UnsafeFileError")
NAME = "victim"


@dataclass(frozen=True)
class Reader:
    target: Callable[[Path], Path]  # the file it reads, from DISTRUN_HOME
    call: Callable[[Path], Any]  # the reader, given DISTRUN_HOME
    unread: str | None  # repr() of what it gives for a file it does not read; None: it must raise
    user_file: bool = False  # a file the user names: a link to a regular file is fine


def _folder(home: Path) -> Any:
    from distrun.store.layout import Layout

    return Layout(home).job(NAME)


def _tracking(home: Path) -> Any:
    from distrun.metrics.tracking import read_tracked_run

    return read_tracked_run(_folder(home))


def _history(home: Path) -> Any:
    from distrun.metrics.history import TrackedRun, metric_history

    return metric_history(TrackedRun(f"sqlite:///{home / 'mlflow.db'}", "1", "exp", "run1"))


def _finish(home: Path) -> Any:
    from distrun.metrics.tracking import finish_run

    return finish_run(_folder(home), "Completed")  # writes the store: a link must not be written through


def _assets(home: Path) -> Any:
    from distrun.data.assets import list_assets

    return list_assets(home)


def _bindings(home: Path) -> Any:
    from distrun.prepare.submission import load_bindings

    return load_bindings(_folder(home))


def _prepared(home: Path) -> Any:
    from distrun.prepare.submission import load_prepared
    from distrun.store.layout import Layout

    return load_prepared(Layout(home), NAME).spec


def _index(home: Path) -> Any:
    from distrun.store.index import JobIndex

    return JobIndex(home / "jobs.db").get(NAME).status


def _output_path(home: Path) -> Any:
    from distrun.data.locations import job_output_path

    return job_output_path(home, NAME, "model")


def _requirements(home: Path) -> Any:
    from distrun.loading.loader import load_job_file

    return load_job_file(home.parent / "envjob" / "job.yml")


def _slurm_attempts(home: Path) -> Any:
    from distrun.backends.slurm.attempts import read_attempts
    from distrun.backends.slurm.layout import SlurmPaths

    return read_attempts(SlurmPaths(_folder(home).root))


def _slurm_cancel(home: Path) -> Any:
    from distrun.backends.slurm.layout import SlurmPaths
    from distrun.backends.slurm.state import read_canceled_at

    return read_canceled_at(SlurmPaths(_folder(home).root))


def _k8s_limits(home: Path) -> Any:
    from distrun.backends.kubernetes.job_files import job_limits

    return job_limits(_folder(home)).max_restarts


def _k8s_plan(home: Path) -> Any:
    from distrun.backends.kubernetes.job_files import planned_processes

    return planned_processes(_folder(home))


def _in_job(name: str) -> Callable[[Path], Path]:
    return lambda home: home / "jobs" / NAME / name


READERS = {
    "tracking-file": Reader(_in_job("tracking.json"), _tracking, "None"),
    "metrics-store": Reader(lambda home: home / "mlflow.db", _history, "{}"),
    "metrics-store-closing": Reader(lambda home: home / "mlflow.db", _finish, "None"),
    "data-asset-record": Reader(lambda home: home / "data" / "ds" / "1.json", _assets, "[]"),
    "bindings": Reader(_in_job("bindings.json"), _bindings, None),
    "job-file-copy": Reader(_in_job("job.json"), _prepared, None),
    "job-index": Reader(lambda home: home / "jobs.db", _index, None),
    "output-of-job": Reader(_in_job("bindings.json"), _output_path, None),
    "requirements-file": Reader(lambda home: home.parent / "envjob" / "reqs.txt", _requirements, None, True),
    "slurm-attempts": Reader(_in_job("slurm/attempts.json"), _slurm_attempts, "[]"),
    "slurm-cancel": Reader(_in_job("slurm/cancel"), _slurm_cancel, "None"),
    "k8s-job-file": Reader(_in_job("job.json"), _k8s_limits, "None"),
    "k8s-plan": Reader(_in_job("plan.json"), _k8s_plan, "[]"),
}


def _fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def _device(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def _outside(path: Path, outside: Path) -> None:
    path.symlink_to(outside)


def _folder_instead(path: Path, outside: Path) -> None:
    path.mkdir()
    (path / "x").write_text("x")


TAMPERINGS = {
    "named-pipe": _fifo,
    "link-to-dev-zero": _device,
    "link-out-of-folder": _outside,
    "folder": _folder_instead,
}
CASES = [
    pytest.param(reader, tampering, id=f"{reader}-{tampering}")
    for reader in READERS
    for tampering in TAMPERINGS
    if not (READERS[reader].user_file and tampering == "link-out-of-folder")  # the user's own link
]


def _make_store(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, step INTEGER, run_uuid TEXT);
            CREATE TABLE runs (run_uuid TEXT, status TEXT, end_time INTEGER, artifact_uri TEXT);
            CREATE TABLE distrun_open_runs (run_uuid TEXT);
            INSERT INTO metrics VALUES ('loss', 0.5, 1000, 1, 'run1');
            INSERT INTO runs VALUES ('run1', 'RUNNING', NULL, '');
            """
        )


@pytest.fixture
def job_home(tmp_path: Path, distrun_home: Path) -> Path:
    """A prepared job (nothing run) with every file the readers above read, all regular."""
    from distrun.data.assets import DataAsset, create_asset
    from distrun.store.index import JobIndex

    job = job_file(tmp_path / "spec", "command: echo hi\ncode: src\noutputs:\n  model:\n    type: uri_folder\n")
    prepare_local_job(job, NAME)
    JobIndex(distrun_home / "jobs.db").update(NAME, status="Completed")
    folder = distrun_home / "jobs" / NAME
    _make_store(distrun_home / "mlflow.db")
    run = {"tracking_uri": f"sqlite:///{distrun_home / 'mlflow.db'}", "experiment_id": "1"}
    (folder / "tracking.json").write_text(json.dumps({**run, "experiment_name": "exp", "run_id": "run1"}))
    create_asset(distrun_home, DataAsset("ds", "1", "uri_folder", str(tmp_path)))
    (folder / "slurm").mkdir()
    (folder / "slurm" / "attempts.json").write_text(json.dumps([{"attempt": 0, "status": "Failed"}]))
    (folder / "slurm" / "cancel").write_text("12345.5\n")
    (folder / "plan.json").write_text(json.dumps({"nodes": [{"processes": [{"rank": 0}]}]}))
    job_json = json.loads((folder / "job.json").read_text())
    (folder / "job.json").write_text(json.dumps({**job_json, "limits": {"max_restarts": 3}}))
    env_job = tmp_path / "envjob"
    env_job.mkdir()
    (env_job / "reqs.txt").write_text("numpy\n")
    (env_job / "job.yml").write_text(
        "command: echo hi\nenvironment:\n  conda_file:\n    dependencies:\n      - pip:\n        - -r reqs.txt\n"
    )
    return distrun_home


@pytest.mark.parametrize(("reader", "tampering"), CASES)
def test_a_replaced_file_is_never_waited_on_or_read_through(
    job_home: Path, tmp_path: Path, reader: str, tampering: str
) -> None:
    spec = READERS[reader]
    path = spec.target(job_home)
    outside = tmp_path / "outside"
    shutil.copyfile(path, outside)  # what the reader would take for the job's own file
    before = outside.read_bytes()
    path.unlink()
    TAMPERINGS[tampering](path, outside)

    outcome = guarded(lambda: spec.call(job_home))

    assert not outcome.hung, f"{reader} waited on a {tampering} in place of {path.name}"
    assert outcome.raised or outcome.returned is not None, "the reader's process died without a word"
    if outcome.raised:
        assert outcome.raised in ALLOWED_ERRORS, outcome.message
    else:
        assert spec.unread is not None, f"{reader} took a {tampering} for its file: {outcome.returned[:300]}"
        assert outcome.returned == spec.unread, f"{reader} read through a {tampering}: {outcome.returned[:300]}"
    assert outside.read_bytes() == before  # nothing written through a link either


def test_run_show_metrics_and_data_list_end_when_the_job_swaps_its_files_for_pipes(
    write_job, run_cli, distrun_home, monkeypatch
):
    """A real job, tracked by MLflow, that swaps tracking.json and the metrics store for named pipes."""
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")
    # The ranks log over HTTP to distrun's server; the store it serves is DISTRUN_HOME's mlflow.db.
    job = write_job(
        f"""
        command: >-
          data={shlex.quote(str(distrun_home / "mlflow.db"))} &&
          cd "$DISTRUN_JOB_DIR" && rm tracking.json && mkfifo tracking.json &&
          rm "$data" && mkfifo "$data" && mkdir -p "$(dirname "$data")/data/ds" &&
          mkfifo "$(dirname "$data")/data/ds/1.json" && echo swapped
        code: src
        """
    )
    done = run_cli("run", str(job), "--name", "swapper", timeout=180)
    assert "swapped" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "Completed" in done.stdout
    for args in (["job", "show", "swapper"], ["metrics", "swapper"], ["data", "list"]):
        shown = run_capped(distrun_home, *args, timeout=60, text=True)
        assert "Traceback" not in shown.stderr, (args, shown.stderr)
        assert "MemoryError" not in shown.stderr, args
    metrics = run_capped(distrun_home, "metrics", "swapper", timeout=60, text=True)
    assert metrics.returncode != 0 and "not a regular file" in metrics.stderr, metrics.stderr
