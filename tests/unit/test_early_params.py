"""The keeper's early answers for params and tags (metrics/early_params.py): what MLflow's SQL
store would write, and what only the server may answer left to it. The store here holds the
columns those answers read and write (MLflow's own schema costs seconds to make)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from distrun.metrics.early_answers import LOG_BATCH, LOG_PARAM, RUNS_UPDATE, SET_TAG, answer

RUN = "a" * 32


def store(tmp_path: Path) -> Path:
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(
            """
            CREATE TABLE runs (run_uuid TEXT PRIMARY KEY, name TEXT, experiment_id INTEGER, user_id TEXT,
                status TEXT, start_time INTEGER, end_time INTEGER, artifact_uri TEXT, lifecycle_stage TEXT);
            CREATE TABLE params (key TEXT, value TEXT, run_uuid TEXT, PRIMARY KEY (key, run_uuid));
            CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT, PRIMARY KEY (key, run_uuid));
            CREATE TABLE distrun_open_runs (run_uuid TEXT PRIMARY KEY);
            """
        )
        conn.execute("INSERT INTO runs VALUES (?, 'r', 1, 'u', 'RUNNING', 1, NULL, '', 'active')", (RUN,))
        conn.execute("INSERT INTO distrun_open_runs VALUES (?)", (RUN,))
    return db


def rows(db: Path, table: str) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute(f"SELECT key, value FROM {table} WHERE run_uuid = ?", (RUN,)))


def post(db: Path, path: str, fields: dict[str, object]) -> bytes | None:
    return answer(db, "POST", path, json.dumps({"run_id": RUN, **fields}).encode())


def test_params_and_tags_are_written_and_what_mlflow_refuses_is_left_to_the_server(tmp_path: Path) -> None:
    db = store(tmp_path)
    assert post(db, LOG_PARAM, {"key": "lr", "value": "0.1"}) is not None
    assert post(db, LOG_PARAM, {"key": "lr", "value": "0.1"}) is not None  # the same value again: accepted
    assert post(db, SET_TAG, {"key": "stage", "value": "a"}) is not None
    assert post(db, SET_TAG, {"key": "stage", "value": "b"}) is not None  # a tag is replaced
    batch = {"params": [{"key": "epochs", "value": "3"}], "tags": [{"key": "t", "value": "1"}], "metrics": []}
    assert post(db, LOG_BATCH, batch) is not None
    assert rows(db, "params") == {"lr": "0.1", "epochs": "3"}
    assert rows(db, "tags") == {"stage": "b", "t": "1"}
    # The server's to answer (MLflow's own error or more than a row): nothing written here.
    assert post(db, LOG_PARAM, {"key": "lr", "value": "0.2"}) is None  # a logged param changed
    twice = {"params": [{"key": "x", "value": "1"}, {"key": "x", "value": "2"}]}
    assert post(db, LOG_BATCH, {**twice, "tags": [{"key": "u", "value": "1"}]}) is None
    assert post(db, SET_TAG, {"key": "mlflow.runName", "value": "n" * 251}) is None  # more than the column holds
    assert post(db, LOG_PARAM, {"key": "../x", "value": "1"}) is None
    assert post(db, LOG_PARAM, {"key": "big", "value": "v" * 6001}) is None
    assert answer(db, "POST", LOG_PARAM, json.dumps({"run_id": "b" * 32, "key": "k", "value": "1"}).encode()) is None
    assert rows(db, "params") == {"lr": "0.1", "epochs": "3"} and rows(db, "tags") == {"stage": "b", "t": "1"}


def test_a_run_name_given_to_runs_update_renames_the_run_as_the_sql_store_does(tmp_path: Path) -> None:
    """`mlflow.start_run(run_name=...)` of distrun's run sends `runs/update` with the name: the
    run's name and its `mlflow.runName` tag change together; a name the column cannot hold, or
    one that is no text, is the server's to answer."""
    db = store(tmp_path)
    answered = post(db, RUNS_UPDATE, {"status": "RUNNING", "run_name": "renamed"})
    assert answered is not None and json.loads(answered.split(b"\r\n\r\n", 1)[1])["run_info"]["run_name"] == "renamed"
    assert rows(db, "tags") == {"mlflow.runName": "renamed"}
    assert post(db, RUNS_UPDATE, {"status": "RUNNING", "run_name": ""}) is not None  # no rename, as MLflow
    assert post(db, RUNS_UPDATE, {"status": "RUNNING", "run_name": "n" * 251}) is None
    assert post(db, RUNS_UPDATE, {"status": "RUNNING", "run_name": 7}) is None
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM runs WHERE run_uuid = ?", (RUN,)).fetchone() == ("renamed",)
    assert rows(db, "tags") == {"mlflow.runName": "renamed"}


def test_a_run_name_set_as_a_tag_renames_the_run_as_the_sql_store_does(tmp_path: Path) -> None:
    """`mlflow.set_tag("mlflow.runName", ...)` (and the tag in a log-batch) renames the run, its
    name and tag together; an empty one changes nothing, as MLflow's store."""
    db = store(tmp_path)

    def name() -> tuple[str, dict[str, str]]:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT name FROM runs WHERE run_uuid = ?", (RUN,)).fetchone()[0], rows(db, "tags")

    assert post(db, SET_TAG, {"key": "mlflow.runName", "value": "tagged"}) is not None
    assert name() == ("tagged", {"mlflow.runName": "tagged"})
    assert post(db, SET_TAG, {"key": "mlflow.runName", "value": ""}) is not None
    assert name() == ("tagged", {"mlflow.runName": "tagged"})
    batch = {"tags": [{"key": "t", "value": "1"}, {"key": "mlflow.runName", "value": "batched"}]}
    assert post(db, LOG_BATCH, batch) is not None
    assert name() == ("batched", {"mlflow.runName": "batched", "t": "1"})
