"""The MLflow model registry of distrun's tracking store (DISTRUN_HOME/mlflow.db): the rows that
make a model registered in distrun visible to `MlflowClient().search_registered_models()`, the
MLflow UI and `mlflow.pyfunc.load_model("models:/NAME/N")`.

The rows are written with sqlite3 in the columns every MLflow release since 1.x has had (as
`sqlite_store` writes runs): importing mlflow costs seconds. Only when the store lacks the
registry's tables (a new DISTRUN_HOME) is mlflow itself asked to create them.

Each version distrun registers carries the tags `distrun.version` (its Azure ML version, any
string), `distrun.type` (custom_model, mlflow_model, triton_model) and `distrun.job` (the job it
came from, where one did). A version without `distrun.version` was registered by someone else
(`mlflow.register_model` in a job): `foreign_versions` lists those.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from distrun.metrics.sqlite_store import _connect, _names

VERSION_TAG = "distrun.version"
TYPE_TAG = "distrun.type"
JOB_TAG = "distrun.job"
ARCHIVED_STAGE = "Archived"
_REGISTRY_TABLES = frozenset({"registered_models", "model_versions", "model_version_tags"})


class RegistryUnavailable(Exception):
    """The MLflow registry cannot be written (mlflow absent, or a store it did not create)."""


@dataclass(frozen=True)
class RegistryVersion:
    """One row of `model_versions` with its tags."""

    name: str
    number: int
    source: str
    run_id: str | None
    stage: str
    description: str | None
    tags: dict[str, str]
    storage_location: str | None = None


def store_path(home: Path) -> Path:
    return home / "mlflow.db"


def ensure_registry(home: Path) -> None:
    """Make sure the store has the registry's tables (mlflow creates them on first use)."""
    from distrun.metrics.tracking import tracking_turned_off

    if tracking_turned_off():
        raise RegistryUnavailable("MLflow is turned off (DISTRUN_MLFLOW=0)")
    path = store_path(home)
    if path.is_file():
        with _connect(path) as conn:
            if _REGISTRY_TABLES <= _names(conn):
                return
    try:
        from mlflow import MlflowClient
    except ImportError:
        raise RegistryUnavailable("mlflow is not installed (pip install 'distrun[mlflow]')") from None
    uri = f"sqlite:///{path}"
    MlflowClient(tracking_uri=uri, registry_uri=uri).search_registered_models(max_results=1)


def add_version(
    home: Path, name: str, source: str, description: str | None, tags: dict[str, str], run_id: str | None = None
) -> int:
    """A new READY version of `name` (the registered model made when new); its number."""
    ensure_registry(home)
    now = int(time.time() * 1000)
    with _connect(store_path(home)) as conn:
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(model_versions)")}
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR IGNORE INTO registered_models (name, creation_time, last_updated_time, description)"
                " VALUES (?, ?, ?, NULL)",
                (name, now, now),
            )
            row = conn.execute("SELECT MAX(version) FROM model_versions WHERE name = ?", (name,)).fetchone()
            number = int(row[0] or 0) + 1
            values: dict[str, object] = {
                "name": name,
                "version": number,
                "creation_time": now,
                "last_updated_time": now,
                "description": description,
                "current_stage": "None",
                "source": source,
                "run_id": run_id,
                "status": "READY",
            }
            if "storage_location" in columns:
                values["storage_location"] = source
            conn.execute(
                f"INSERT INTO model_versions ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                tuple(values.values()),
            )
            conn.executemany(
                "INSERT INTO model_version_tags (key, value, name, version) VALUES (?, ?, ?, ?)",
                [(key, value, name, number) for key, value in tags.items()],
            )
            conn.execute("UPDATE registered_models SET last_updated_time = ? WHERE name = ?", (now, name))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return number


def finish_version(home: Path, name: str, number: int, source: str, version: str) -> None:
    """Point a version's row at its files, now that they are in place, and say its Azure ML version."""
    with _connect(store_path(home)) as conn:
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(model_versions)")}
        where = ", storage_location = ?" if "storage_location" in columns else ""
        conn.execute(
            f"UPDATE model_versions SET source = ?{where} WHERE name = ? AND version = ?",
            (source, source, name, number) if where else (source, name, number),
        )
        conn.execute(
            "INSERT OR REPLACE INTO model_version_tags (key, value, name, version) VALUES (?, ?, ?, ?)",
            (VERSION_TAG, version, name, number),
        )


def remove_version(home: Path, name: str, number: int) -> None:
    """Take back a version whose registration failed after its row was written."""
    with _connect(store_path(home)) as conn:
        conn.execute("DELETE FROM model_version_tags WHERE name = ? AND version = ?", (name, number))
        conn.execute("DELETE FROM model_versions WHERE name = ? AND version = ?", (name, number))


def set_stage(home: Path, name: str, number: int, archived: bool) -> None:
    """Archive (MLflow's stage `Archived`) or restore (stage `None`) a version."""
    stage = ARCHIVED_STAGE if archived else "None"
    with _connect(store_path(home)) as conn:
        conn.execute(
            "UPDATE model_versions SET current_stage = ?, last_updated_time = ? WHERE name = ? AND version = ?",
            (stage, int(time.time() * 1000), name, number),
        )


def foreign_versions(home: Path) -> list[RegistryVersion]:
    """The READY versions not registered through distrun (no `distrun.version` tag), oldest first."""
    path = store_path(home)
    if not path.is_file():
        return []
    with _connect(path) as conn:
        if not _REGISTRY_TABLES <= _names(conn):
            return []
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(model_versions)")}
        storage = "storage_location" if "storage_location" in columns else "NULL"
        rows = conn.execute(
            f"SELECT name, version, source, run_id, current_stage, description, {storage} FROM model_versions v"
            " WHERE status = 'READY' AND NOT EXISTS (SELECT 1 FROM model_version_tags t"
            " WHERE t.name = v.name AND t.version = v.version AND t.key = ?) ORDER BY creation_time",
            (VERSION_TAG,),
        ).fetchall()
        found = []
        for name, number, source, run_id, stage, description, location in rows:
            tags = dict(
                conn.execute(
                    "SELECT key, value FROM model_version_tags WHERE name = ? AND version = ?", (name, number)
                ).fetchall()
            )
            found.append(
                RegistryVersion(name, int(number), str(source or ""), run_id, str(stage), description, tags, location)
            )
    return found


def tag_version(home: Path, name: str, number: int, tags: dict[str, str]) -> None:
    """Add tags to a version (distrun's, once it has taken a foreign version into its store)."""
    with _connect(store_path(home)) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO model_version_tags (key, value, name, version) VALUES (?, ?, ?, ?)",
            [(key, value, name, number) for key, value in tags.items()],
        )
