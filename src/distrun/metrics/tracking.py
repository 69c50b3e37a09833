"""One MLflow run per job, set up before any process starts and closed after the gang ends.

As on Azure ML: the experiment is the job's `experiment_name`, the run is named after the job,
and every process gets MLFLOW_TRACKING_URI, MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID and
MLFLOW_EXPERIMENT_NAME, so `mlflow.log_metric(...)` in any rank lands in the job's run with no
setup. The store is SQLite under DISTRUN_HOME unless the compute target (`tracking_uri`) or the
user's own MLFLOW_TRACKING_URI names another.

Only the supervising distrun sets the run's final status (see sqlite_store for how a rank that
exits early is kept from closing it). mlflow is optional: without it this module does nothing.
distrun's own store is written directly (sqlite_store), and a new DISTRUN_HOME's store is a copy
of an empty one made once per MLflow release (store_template), so `distrun run` imports mlflow
only to make that one or for another store.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from distrun.core.file_modes import copied_mode, make_dirs, open_append, write_file_beneath
from distrun.core.safe_files import read_text, unreadable_because
from distrun.metrics import sqlite_store, store_template, tracking_server
from distrun.metrics.rank_route import UNREACHABLE_URI
from distrun.metrics.rank_token import write_token
from distrun.store.layout import JobFolder

TRACKING_FILE = "tracking.json"  # in the job folder: where the job's run is
TRACKING_FILE_LIMIT = 64 << 10  # a few short strings; anything larger is not distrun's
METRICS_LOG = "metrics.txt"  # in system_logs: why a job's metrics were not recorded
DISABLE_VARIABLE = "DISTRUN_MLFLOW"  # DISTRUN_MLFLOW=0 turns the run off
STARTING_NOTE = "starting the metrics store and server of this DISTRUN_HOME (its first job only)"
# distrun's job statuses -> MLflow's run statuses.
_RUN_STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Canceled": "KILLED"}


@dataclass(frozen=True)
class TrackedRun:
    tracking_uri: str  # the store, as distrun, the web UI and `distrun metrics` read it
    experiment_id: str
    experiment_name: str
    run_id: str
    rank_tracking_uri: str | None = None  # what the ranks log to (distrun's server), if not the store
    server_pid: int | None = None  # the server's keeper, to ask it whether the server failed
    server_started: int | None = None
    # What the ranks send distrun's server (MLFLOW_TRACKING_TOKEN). Never one of the job's
    # variables (its plan, bindings and record are readable by others) nor in TRACKING_FILE: only
    # in the job folder's owner-only token file, which the node agent gives the ranks (rank_token).
    rank_token: str | None = field(default=None, repr=False)

    def environment(self) -> dict[str, str]:
        """What every process of the job gets, as on Azure ML (the token aside: `rank_token`)."""
        found = {
            "MLFLOW_TRACKING_URI": self.rank_tracking_uri or self.tracking_uri,
            "MLFLOW_RUN_ID": self.run_id,
            "MLFLOW_EXPERIMENT_ID": self.experiment_id,
            "MLFLOW_EXPERIMENT_NAME": self.experiment_name,
        }
        if self.rank_tracking_uri == UNREACHABLE_URI:
            found["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"  # fail at once, not after minutes of retries
        return found


def mlflow_available() -> bool:
    """Whether mlflow can be imported, found without importing it (that costs seconds)."""
    if tracking_turned_off():
        return False
    return importlib.util.find_spec("mlflow") is not None


def tracking_turned_off() -> bool:
    """Whether the user turned tracking off (DISTRUN_MLFLOW=0), whether or not mlflow is installed."""
    return os.environ.get(DISABLE_VARIABLE, "").lower() in ("0", "false", "no", "off")


def default_tracking_uri(home: Path) -> str:
    return f"sqlite:///{home / 'mlflow.db'}"


def store_to_make(uri: str, home: Path) -> bool:
    """Whether the job's run is the first in DISTRUN_HOME's own store: mlflow's client makes its
    tables (an mlflow import and its schema's migrations: seconds, up to a minute on a loaded
    machine) and its server is started."""
    return uri == default_tracking_uri(home) and not (home / "mlflow.db").exists()


def start_run(
    folder: JobFolder, home: Path, job_name: str, experiment_name: str, tracking_uri: str | None = None
) -> TrackedRun | None:
    """Create (or reuse) the experiment and create the job's run; None when mlflow is absent.

    A tracking store that cannot be reached must not stop the job: distrun says why on stderr
    and the job runs untracked, as it would without mlflow. The first job of a DISTRUN_HOME makes
    its store: that is said before (it takes seconds, in which nothing else is printed) and after,
    with how long it took.
    """
    if not mlflow_available():
        return None
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(home)
    if not store_to_make(uri, home):
        return _started_run(folder, home, job_name, experiment_name, uri)
    began = time.monotonic()
    print(f"distrun: MLflow: {STARTING_NOTE} ...", file=sys.stderr, flush=True)
    try:
        store_template.place_store(home / "mlflow.db", home / "mlartifacts")
    except Exception:  # mlflow, SQLite, the file system: MLflow's client then makes the store
        pass
    run = _started_run(folder, home, job_name, experiment_name, uri)
    if run is not None:  # otherwise it said why
        print(f"distrun: MLflow: ready in {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
    return run


def _started_run(folder: JobFolder, home: Path, job_name: str, experiment_name: str, uri: str) -> TrackedRun | None:
    tags = {"distrun.job_name": job_name, "distrun.job_folder": str(folder.root)}
    artifacts = home / "mlartifacts"  # not ./mlruns of whatever folder distrun was started in
    try:
        run = _fast_create(uri, experiment_name, job_name, tags, artifacts)
        if run is None:
            run = _client_create(uri, experiment_name, job_name, tags, artifacts if uri.startswith("sqlite:") else None)
    except Exception as exc:  # mlflow raises many kinds (SQLAlchemy, HTTP, its own)
        print(f"distrun: metrics are off for {job_name}: MLflow run not created at {uri}: {exc}", file=sys.stderr)
        return None
    if uri == default_tracking_uri(home):
        run = _served(run, folder, home, job_name)
    recorded = {key: value for key, value in asdict(run).items() if key != "rank_token"}
    write_file_beneath(folder.root, folder.root / TRACKING_FILE, json.dumps(recorded, indent=2).encode("utf-8"))
    if run.rank_token:
        write_token(folder.root, run.rank_token)
    return run


def _served(run: TrackedRun, folder: JobFolder, home: Path, job_name: str) -> TrackedRun:
    """The run with the ranks pointed at DISTRUN_HOME's MLflow server (started if none runs)."""
    try:
        use = tracking_server.use_server(home)
    except tracking_server.ServerUnavailable as exc:
        note_untracked(folder, job_name, f"the MLflow server could not start: {exc}")
        return replace(run, rank_tracking_uri=UNREACHABLE_URI)
    if use.note:
        note_metrics(folder, f"distrun: MLflow: {use.note}")
    return replace(
        run,
        rank_tracking_uri=use.uri,
        server_pid=use.keeper_pid,
        server_started=use.keeper_started,
        rank_token=use.token or None,
    )


def note_untracked(folder: JobFolder, job_name: str, reason: str) -> None:
    """Say on stderr and in the job's system log why its ranks' MLflow calls record nothing."""
    note_metrics(
        folder,
        f"distrun: metrics of {job_name} are not recorded: {reason}; the job runs untracked (MLFLOW_RUN_ID is set)",
    )


def note_metrics(folder: JobFolder, line: str) -> None:
    """Say `line` on stderr and in the job's system_logs/metrics.txt."""
    print(line, file=sys.stderr)
    try:
        fd = open_append(folder.system_logs / METRICS_LOG, root=folder.root)  # never through a link the job planted
    except OSError:
        return
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    except OSError:
        pass
    finally:
        os.close(fd)


def hold_server(folder: JobFolder, home: Path) -> bool:
    """The job's supervisor (or node agent) takes its own use of the server its ranks were given,
    if that one still runs on this machine; whether it did.

    (A job started in the background is prepared by one process and supervised by another.) A
    server that ended meanwhile is not replaced: its successor would have another port.
    """
    run = read_tracked_run(folder)
    if run is None or run.server_pid is None or run.server_started is None:
        return False
    return tracking_server.join_server(home, run.server_pid, run.server_started)


def lease_server(folder: JobFolder, home: Path) -> None:
    """A submitted job that no distrun process here follows (a detached Slurm job) keeps the server
    its ranks were given until its node agent holds a use, its run is closed, or
    `tracking_server.LEASE_SECONDS` pass (the submitter, which held the use, exits now)."""
    run = read_tracked_run(folder)
    if run is None or run.server_pid is None:
        return
    try:
        tracking_server.leave_lease(home, folder.root.name)
    except (OSError, tracking_server.ServerUnavailable) as exc:
        note_untracked(folder, folder.root.name, f"the MLflow server cannot be kept for it: {exc}")


def _fast_create(uri: str, experiment: str, job_name: str, tags: dict[str, str], artifacts: Path) -> TrackedRun | None:
    path = sqlite_store.sqlite_file(uri)
    if path is None:
        return None
    try:
        created = sqlite_store.create_run(path, experiment, job_name, tags, artifacts)
    except sqlite3.Error:
        return None  # a layout this code does not know: mlflow's client knows it
    if created is None:
        return None  # not created by mlflow yet: its client creates the schema
    return TrackedRun(uri, created[0], experiment, created[1])


def _client_create(
    uri: str, experiment: str, job_name: str, tags: dict[str, str], artifacts: Path | None
) -> TrackedRun:
    import logging

    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    # A first job in a new home creates mlflow's tables: its INFO lines about that are not the user's.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        experiment_id = found.experiment_id
    else:
        try:
            experiment_id = client.create_experiment(experiment, artifact_location=artifacts and artifacts.as_uri())
        except MlflowException:  # another job created it at the same moment
            experiment_id = client.get_experiment_by_name(experiment).experiment_id
    if artifacts is not None:  # mlflow made the store just now: the job's name can be its run id
        named = _fast_create(uri, experiment, job_name, tags, artifacts)
        if named is not None:
            return named
    # A remote server picks its own run ids.
    run = client.create_run(experiment_id, tags={"mlflow.runName": job_name, **tags}, run_name=job_name)
    path = sqlite_store.sqlite_file(uri)
    if path is not None:
        sqlite_store.hold_runs_open(path)
        sqlite_store.open_run(path, run.info.run_id)
    return TrackedRun(uri, str(experiment_id), experiment, run.info.run_id)


def read_tracked_run(folder: JobFolder) -> TrackedRun | None:
    """The job's run as recorded when it started; None for an untracked job."""
    try:
        # The job's own processes can replace this file: read it as every job-folder file is read.
        data = json.loads(read_text(folder.root / TRACKING_FILE, TRACKING_FILE_LIMIT, root=folder.root))
        served = {k: data.get(k) for k in ("rank_tracking_uri", "server_pid", "server_started")}
        return TrackedRun(
            **{k: str(data[k]) for k in ("tracking_uri", "experiment_id", "experiment_name", "run_id")},
            rank_tracking_uri=str(served["rank_tracking_uri"]) if served["rank_tracking_uri"] else None,
            server_pid=int(served["server_pid"]) if served["server_pid"] else None,
            server_started=int(served["server_started"]) if served["server_started"] else None,
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def tracking_file_problem(folder: JobFolder) -> str | None:
    """Why the job's tracking file is there but not read (replaced by a named pipe, a link,
    a folder), or None: a user asking for the job's metrics hears that, not "no MLflow"."""
    why = unreadable_because(folder.root / TRACKING_FILE, root=folder.root)
    return None if why is None else f"the job's tracking file cannot be read: {why}"


def finish_run(folder: JobFolder, status: str) -> None:
    """After the gang: log ./outputs as artifacts, then set the run's final status.

    Called once by the supervising distrun with the job's final status; a failure here is
    reported and leaves the job's own record as it is.
    """
    run = read_tracked_run(folder)
    if run is None:
        return
    if run.server_pid is not None and run.server_started is not None:
        home = folder.root.parent.parent
        tracking_server.drop_lease(home, folder.root.name)
        failure = tracking_server.server_failure(home, run.server_pid, run.server_started)
        if failure:
            note_untracked(folder, folder.root.name, f"the MLflow server failed: {failure}")
    final = _RUN_STATUS.get(status, "FAILED")
    outputs = output_files(folder.code / "outputs")
    try:
        path = sqlite_store.sqlite_file(run.tracking_uri)
        target = sqlite_store.artifact_folder(path, run.run_id) if path is not None else None
        if path is not None and (target is not None or not outputs):
            for source, relative in outputs:
                make_dirs(target / "outputs" / relative)  # type: ignore[operator]
                copied = target / "outputs" / relative / source.name  # type: ignore[operator]
                shutil.copyfile(source, copied)
                os.chmod(copied, copied_mode(os.stat(copied).st_mode))  # never world-writable
            sqlite_store.close_run(path, run.run_id, final)
            return
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=run.tracking_uri)
        for source, relative in outputs:
            client.log_artifact(run.run_id, str(source), artifact_path=str(Path("outputs") / relative))
        client.set_terminated(run.run_id, status=final)
    except Exception as exc:
        print(f"distrun: MLflow run {run.run_id} not closed: {exc}", file=sys.stderr)


def output_files(root: Path) -> list[tuple[Path, Path]]:
    """Regular files under `root` with their folder relative to it; links are never followed
    (a job's own processes write there, and a link could point anywhere)."""
    if root.is_symlink() or not root.is_dir():
        return []
    found = []
    for current, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(current, d)))
        for name in sorted(files):
            path = Path(current) / name
            if path.is_file() and not path.is_symlink():
                found.append((path, path.parent.relative_to(root)))
    return found
