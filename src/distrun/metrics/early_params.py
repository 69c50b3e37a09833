"""The params and tags a rank logs while `mlflow server` starts, written as MLflow's SQL store
writes them (the keeper's early answers, `early_answers`, call these).

A param, once logged, keeps its value: logging it again with the same value is accepted, with
another value it is MLflow's error, so such a request is left to the server (which says it). A
tag is replaced by a later one. `mlflow.runName` is not a plain tag: MLflow's SQL store renames
the run for it, the run's name and that tag together, and does nothing for an empty one; so it
is written here, whether it comes as a tag (`set_tag`, a log-batch's tags) or as the run name of
`runs/update` (what `mlflow.start_run(run_name=...)` sends). A name longer than the store's
column is left to the server. Names follow MLflow's rules; values its length limits.
"""

from __future__ import annotations

import re
import sqlite3

Entry = tuple[str, str]  # key, value

_NAME = re.compile(r"^[\w.\- :/]{1,250}$")  # MLflow's param and tag names (no `..`, not absolute: below)
_PARAM_VALUE_LIMIT = 6000  # MLflow's longest param value
_TAG_VALUE_LIMIT = 8000  # and tag value
_BATCH_LIMIT = 100  # MLflow's most params, and tags, in one log-batch
RUN_NAME_TAG = "mlflow.runName"
_RUN_NAME_LIMIT = 250  # the SQL store's `runs.name` column (SQLite would take more: the server then)


def entry(fields: object, tag: bool) -> Entry | None:
    """The (key, value) of one `log-parameter` or `set-tag` body, or of one item of a log-batch's
    `params` or `tags`; None when MLflow would refuse it or the server must answer it."""
    if not isinstance(fields, dict) or set(fields) - {"key", "value", "run_id", "run_uuid"}:
        return None
    key, value = fields.get("key"), fields.get("value")
    if not isinstance(key, str) or not _NAME.match(key) or ".." in key or key.startswith("/"):
        return None
    if not isinstance(value, str) or len(value) > (_TAG_VALUE_LIMIT if tag else _PARAM_VALUE_LIMIT):
        return None
    if tag and key == RUN_NAME_TAG and len(value) > _RUN_NAME_LIMIT:
        return None
    return key, value


def entries(items: object, tag: bool) -> list[Entry] | None:
    """A log-batch's `params` or `tags`, each understood, or None."""
    if items is None:
        return []
    if not isinstance(items, list) or len(items) > _BATCH_LIMIT:
        return None
    found = [entry(item, tag) for item in items]
    return None if None in found else [item for item in found if item is not None]


def write_params(conn: sqlite3.Connection, run_id: str, params: list[Entry]) -> bool:
    """Insert the params not logged yet; False (nothing to write) when one was logged with
    another value (or one batch gives it two): MLflow refuses that, and the server's answer says so."""
    if len(dict(params)) != len(set(params)):
        return False
    for key, value in params:
        row = conn.execute("SELECT value FROM params WHERE key = ? AND run_uuid = ?", (key, run_id)).fetchone()
        if row is not None and row[0] != value:
            return False
    conn.executemany(
        "INSERT OR IGNORE INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
        [(key, value, run_id) for key, value in params],
    )
    return True


def write_tags(conn: sqlite3.Connection, run_id: str, tags: list[Entry]) -> None:
    """Each tag in its order; `mlflow.runName` renames the run (an empty one changes nothing)."""
    for key, value in tags:
        if key != RUN_NAME_TAG:
            _write_tag(conn, run_id, key, value)
        elif value:
            rename_run(conn, run_id, value)


def _write_tag(conn: sqlite3.Connection, run_id: str, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", (key, value, run_id))


def new_run_name(fields: dict[str, object]) -> str | None:
    """The run name a `runs/update` body sets: "" for none (MLflow renames only to a non-empty
    name), None when it is one this module leaves to the server."""
    name = fields.get("run_name")
    if name is None or name == "":
        return ""
    return name if isinstance(name, str) and len(name) <= _RUN_NAME_LIMIT else None


def rename_run(conn: sqlite3.Connection, run_id: str, name: str) -> None:
    """The run's name and its `mlflow.runName` tag, as MLflow's SQL store renames a run."""
    conn.execute("UPDATE runs SET name = ? WHERE run_uuid = ?", (name, run_id))
    _write_tag(conn, run_id, RUN_NAME_TAG, name)
