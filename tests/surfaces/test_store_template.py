"""A new DISTRUN_HOME's MLflow store is a copy of an empty one MLflow made once per release
(metrics/store_template.py): the copy is a store MLflow and distrun both take, its Default
experiment points into its own home, and a store already there is never replaced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from distrun.metrics import sqlite_store, store_template

pytestmark = pytest.mark.slow  # MLflow makes the first empty store (its migrations: seconds)


def head(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def test_each_new_home_gets_a_copy_of_one_empty_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(store_template.CACHE_VARIABLE, str(tmp_path / "cache"))
    template = store_template.template_path()
    assert template is not None and template.parent.is_relative_to(tmp_path / "cache")
    homes = [tmp_path / "one", tmp_path / "two"]
    for home in homes:
        home.mkdir()
        assert store_template.place_store(home / "mlflow.db", home / "mlartifacts")
    assert template.is_file() and head(homes[0] / "mlflow.db") == head(homes[1] / "mlflow.db") == head(template)
    with sqlite3.connect(homes[1] / "mlflow.db") as conn:
        default = conn.execute("SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()[0]
    assert default == (homes[1] / "mlartifacts" / "0").as_uri()
    # distrun writes runs into the copy, and MLflow's own client reads them.
    made = sqlite_store.create_run(homes[1] / "mlflow.db", "exp", "job1", {"k": "v"}, homes[1] / "mlartifacts")
    assert made is not None
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=f"sqlite:///{homes[1] / 'mlflow.db'}").get_run(made[1])
    assert run.info.run_name == "job1" and run.data.tags["k"] == "v"
    # Placing again keeps the store that is there, its run included.
    assert store_template.place_store(homes[1] / "mlflow.db", homes[1] / "mlartifacts")
    with sqlite3.connect(homes[1] / "mlflow.db") as conn:
        assert conn.execute("SELECT name FROM runs").fetchall() == [("job1",)]
    assert sorted(path.name for path in homes[1].iterdir()) == ["mlflow.db"]  # no staged copy left
