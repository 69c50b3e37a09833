"""A ready-made empty MLflow store per MLflow version, copied into each new DISTRUN_HOME.

MLflow makes a fresh SQLite store by running its schema's migrations one by one: 20 s on a loaded
2-core machine (`import mlflow` 4 s more), where opening a store already made takes 0.07 s. A
DISTRUN_HOME's first job paid that before any rank started. The empty store is the same for
every DISTRUN_HOME of one MLflow release, so it is made once per machine and release, in the
user's cache folder ($XDG_CACHE_HOME/distrun, else ~/.cache/distrun), and each new DISTRUN_HOME
gets a copy. Its `Default` experiment (which MLflow always makes) is pointed at the new home's
artifact folder, as the first run's would be. Whatever fails here, the caller lets MLflow make
the store as before.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from distrun.core.safe_files import refuse_special_store

CACHE_VARIABLE = "XDG_CACHE_HOME"


def template_path() -> Path | None:
    """Where this MLflow release's empty store is kept; None when no MLflow release is installed."""
    import importlib.metadata  # here: `distrun run` of a job without metrics never needs it

    try:
        version = importlib.metadata.version("mlflow")
    except importlib.metadata.PackageNotFoundError:
        return None
    cache = os.environ.get(CACHE_VARIABLE) or str(Path.home() / ".cache")
    return Path(cache) / "distrun" / "mlflow-stores" / f"mlflow-{version}.db"


def make_template(template: Path) -> None:
    """Let MLflow make an empty store, then put it at `template` in one step (another process
    making the same template at the same moment makes an equal one)."""
    import logging

    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its migration lines are not the user's
    template.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=template.parent, prefix=".making-") as making:
        store = Path(making) / "store.db"
        MlflowClient(tracking_uri=f"sqlite:///{store}").search_experiments()
        os.replace(store, template)


def place_store(db: Path, artifacts: Path) -> bool:
    """Copy the empty store to `db` (made first when this release has none); whether `db` is a
    store now. `db` is never replaced: a store another job placed first is kept."""
    template = template_path()
    if template is None:
        return False
    if not template.is_file() or template.is_symlink():
        make_template(template)
    refuse_special_store(template)
    fd, staged = tempfile.mkstemp(dir=db.parent, prefix=".mlflow.db.")
    try:
        with os.fdopen(fd, "wb") as out, open(template, "rb") as source:
            out.write(source.read())
        with sqlite3.connect(staged, isolation_level=None) as conn:
            conn.execute(
                "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0", ((artifacts / "0").as_uri(),)
            )
        conn.close()
        try:
            os.link(staged, db)
        except FileExistsError:
            pass
    finally:
        os.unlink(staged)
    return db.is_file()
