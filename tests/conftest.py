"""Fixtures every test may use: a private DISTRUN_HOME, a CLI runner, job files.

Helpers live in tests/support/ (importable as `support.*`); each engine's cluster fixture lives
in the conftest.py of tests/engines/<engine>/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent / "src"))  # test this checkout's distrun, not an installed one
sys.path.insert(0, str(TESTS))  # the helpers: `from support.cli import ...`

from support.cli import distrun_cli, kill_left, start_distrun_cli  # noqa: E402
from support.knobs import apply_test_time_knobs  # noqa: E402

apply_test_time_knobs()  # shorter restart pauses and polls for this process and every distrun it starts

# Tests that share a session-scoped cluster run on one xdist worker, so each cluster starts once
# and no two workers compete for it (`--dist loadgroup`, scripts/test.sh). Two folders take one
# worker each too: the real frameworks (TensorFlow, DeepSpeed, Horovod: seconds of CPU per rank;
# side by side on two cores their 4-rank jobs ran past their timeouts), and the Kubernetes tests,
# whose emulated pods are local processes on ports and loopback names every emulated cluster
# picks the same way.
CLUSTER_GROUPS = {"slurm_cluster": "slurm", "ray_cluster": "ray", "spark_cluster": "spark"}
FOLDER_GROUPS = {TESTS / "frameworks": "frameworks", TESTS / "engines" / "kubernetes": "kubernetes"}


# tryfirst: an xdist worker reads the groups in its own hook of the same name, so they must be
# set before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        groups = [group for fixture, group in CLUSTER_GROUPS.items() if fixture in getattr(item, "fixturenames", ())]
        folders = Path(str(item.path)).parents
        groups += [group for folder, group in FOLDER_GROUPS.items() if folder in folders]
        for group in groups[:1]:
            item.add_marker(pytest.mark.xdist_group(group))


# On each worker, pytest-xdist appends "@group" to each grouped test's id, and the controller
# sends the tests of one "@group" to one worker. If a pytest or xdist upgrade stops that, several
# workers would each start a cluster and the suite would time out an hour later: the controller
# says so now, from the ids of the folders that are always grouped.
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    folders = [str(folder.relative_to(TESTS.parent)) + "/" for folder in FOLDER_GROUPS]
    ungrouped = [i for i in ids if i.startswith(tuple(folders)) and "@" not in i.rpartition("]")[2]]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist did not put {ungrouped[0]} in its xdist_group, so grouped tests would "
            "run on several workers at once; install the pytest and pytest-xdist versions "
            "pyproject.toml names (bash scripts/test.sh does)"
        )


@pytest.fixture
def distrun_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("DISTRUN_HOME", str(home))
    # No MLflow run per job unless a test asks (DISTRUN_MLFLOW=1): the first job of a fresh
    # DISTRUN_HOME would import mlflow to create its store (seconds), in every test.
    monkeypatch.setenv("DISTRUN_MLFLOW", os.environ.get("DISTRUN_MLFLOW", "0"))
    return home


@pytest.fixture
def run_cli(distrun_home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        *args: str, timeout: float = 180, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return distrun_cli(distrun_home, *args, timeout=timeout, cwd=cwd, env=env)

    return run


@pytest.fixture
def start_cli(distrun_home: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start the CLI in the background; whatever is left is killed at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = start_distrun_cli(distrun_home, *args)
        started.append(proc)
        return proc

    yield start
    kill_left(started)


@pytest.fixture
def write_job(tmp_path: Path) -> Callable[..., Path]:
    """Write job.yml (dedented) and files under src/ into a fresh folder."""
    counter = iter(range(1000))

    def write(yaml_text: str, files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / f"job{next(counter)}"
        (folder / "src").mkdir(parents=True)
        for name, content in (files or {}).items():
            path = folder / "src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(content))
        job = folder / "job.yml"
        job.write_text(textwrap.dedent(yaml_text))
        return job

    return write
