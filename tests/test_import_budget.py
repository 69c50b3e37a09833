"""`distrun run` must not pull a heavy module onto its path to the first rank's start.

Each import here costs tenths of a second to seconds on every launch, and the cost grows
silently when a shared module gains a top-level import. The check is on sys.modules after a
real `distrun run` of a no-op job, not on time, so a loaded machine cannot make it flaky.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Modules that `distrun run` of a local job has no use for. Add to this list; do not remove
# from it without moving the import behind the feature that needs it.
FORBIDDEN = (
    "mlflow",
    "ray",
    "kubernetes",
    "torch",
    "tensorflow",
    "horovod",
    "deepspeed",
    "starlette",
    "fastapi",
    "uvicorn",
    "jinja2",
    "fsspec",
    "pandas",
    "numpy",
    "sqlalchemy",
    "alembic",
    "requests",
    "rich.table",
    "rich.live",
    # distrun's own parts that only some jobs need: MPI launchers, conda environments, data
    # inputs and outputs.
    "distrun.agent.mpi_output",
    "distrun.environments.builder",
    "distrun.data.locations",
)

# Runs the real CLI in-process, then records what it imported when the interpreter exits.
# DISTRUN_TEST_EXTRA_IMPORT lets the self-test below prove the check can fail.
_PROBE = """
import atexit, importlib, json, os, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
extra = os.environ.get("DISTRUN_TEST_EXTRA_IMPORT")
if extra:
    importlib.import_module(extra)
sys.argv = ["distrun", "run", sys.argv[2]]
from distrun.entry import main
main()
"""

_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: "true"
environment: azureml:local@latest
compute: local
"""


def imported_by_run(tmp_path: Path, extra_import: str = "") -> set[str]:
    job = tmp_path / "job.yml"
    job.write_text(_JOB)
    out = tmp_path / "modules.json"
    env = {
        **os.environ,
        "DISTRUN_HOME": str(tmp_path / "home"),
        # A fresh home has no tracking store yet: creating its schema needs mlflow once.
        # The steady state (store present) uses distrun's own sqlite writer, checked
        # by the metrics tests; here the launch path itself is measured.
        "DISTRUN_MLFLOW": "0",
        "DISTRUN_TEST_EXTRA_IMPORT": extra_import,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return set(json.loads(out.read_text()))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in FORBIDDEN if m in modules)


def test_run_path_imports_no_heavy_module(tmp_path: Path) -> None:
    modules = imported_by_run(tmp_path)
    assert "distrun.cli" in modules  # the probe really ran the CLI
    assert heavy(modules) == [], f"`distrun run` now imports {heavy(modules)}: import it lazily where it is used"


def test_check_catches_a_new_heavy_import(tmp_path: Path) -> None:
    assert heavy(imported_by_run(tmp_path, extra_import="numpy")) == ["numpy"]
