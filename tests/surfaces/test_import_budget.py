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

from support.cli import SRC

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
    # pydantic's plugin discovery imports it (14 ms); the command skips that (distrun.core.pydantic_plugins).
    "importlib.metadata",
    # Only an invalid job needs "did you mean" suggestions.
    "difflib",
    # distrun's own parts that only some jobs need: MPI launchers, conda environments, data
    # inputs and outputs.
    "distrun.agent.mpi_output",
    "distrun.environments.builder",
    "distrun.data.locations",
)

# Records what a probe imported when the interpreter exits. DISTRUN_TEST_EXTRA_IMPORT lets the
# self-tests below prove each check can fail.
_RECORD_IMPORTS = """
import atexit, importlib, json, os, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
extra = os.environ.get("DISTRUN_TEST_EXTRA_IMPORT")
if extra:
    importlib.import_module(extra)
"""

# Runs the real CLI in-process.
_PROBE = (
    _RECORD_IMPORTS
    + """
sys.argv = ["distrun", "run", sys.argv[2]]
from distrun.cli.entry import main
main()
"""
)

_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: "true"
environment: azureml:local@latest
compute: local
"""


def imported_by_run(tmp_path: Path, extra_import: str = "") -> set[str]:
    job = tmp_path / "job.yml"
    job.write_text(_JOB)
    env = {
        "DISTRUN_HOME": str(tmp_path / "home"),
        # A fresh home has no tracking store yet: creating its schema needs mlflow once.
        # The steady state (store present) uses distrun's own sqlite writer, checked
        # by the metrics tests; here the launch path itself is measured.
        "DISTRUN_MLFLOW": "0",
    }
    return imported_by_probe(tmp_path, _PROBE, [str(job)], env, extra_import)


def imported_by_probe(tmp_path: Path, probe: str, args: list[str], env: dict[str, str], extra_import: str) -> set[str]:
    """Every module the Python program `probe` (given its output file, then `args`) had imported at its exit."""
    out = tmp_path / "modules.json"
    src = str(SRC)
    env = {
        **os.environ,
        **env,
        "DISTRUN_TEST_EXTRA_IMPORT": extra_import,
        "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-c", probe, str(out), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return set(json.loads(out.read_text()))


def probe_forbidden(
    tmp_path: Path, probe: str, forbidden: tuple[str, ...], args: list[str] | None = None, extra_import: str = ""
) -> tuple[set[str], list[str]]:
    """What `probe` imported, and which of `forbidden` are among it (sorted)."""
    modules = imported_by_probe(tmp_path, probe, args or [], {}, extra_import)
    return modules, sorted(m for m in forbidden if m in modules)


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in FORBIDDEN if m in modules)


def test_run_path_imports_no_heavy_module(tmp_path: Path) -> None:
    modules = imported_by_run(tmp_path)
    assert "distrun.cli.main" in modules  # the probe really ran the CLI
    assert heavy(modules) == [], f"`distrun run` now imports {heavy(modules)}: import it lazily where it is used"


def test_check_catches_a_new_heavy_import(tmp_path: Path) -> None:
    assert heavy(imported_by_run(tmp_path, extra_import="numpy")) == ["numpy"]


# A node agent (one per node of a cluster job, on every start and restart) plans from job.json,
# which was validated when the job was submitted: loading the job models again (pydantic and
# its validators, about 0.3 s) would be paid by every node for facts already checked.
NODE_FORBIDDEN = (*FORBIDDEN, "pydantic", "pydantic_core", "distrun.spec.models", "distrun.loading.loader")

_NODE_PROBE = (
    _RECORD_IMPORTS
    + """
from distrun.agent.node import main
code = main(["--facts", sys.argv[2], "--channel", sys.argv[3]])
assert code == 0, code
"""
)


def imported_by_node_agent(tmp_path: Path, extra_import: str = "") -> set[str]:
    """What the engine-free node agent imports running a real one-node job (`true`) to its end.

    The caller's DISTRUN_HOME (the `distrun_home` fixture) holds the job, prepared as a backend does.
    """
    from support.jobs import one_node_facts, prepare_local_job

    job = tmp_path / "job.yml"
    job.write_text(_JOB)
    prepared = prepare_local_job(job, "node_probe")
    facts_file = one_node_facts(prepared.folder.root, tmp_path / "facts.json")
    return imported_by_probe(tmp_path, _NODE_PROBE, [str(facts_file), str(tmp_path / "channel")], {}, extra_import)


def test_node_agent_plans_without_the_job_models(tmp_path: Path, distrun_home: Path) -> None:
    modules = imported_by_node_agent(tmp_path)
    assert "distrun.agent.gang" in modules  # the probe really ran the node's processes
    found = sorted(m for m in NODE_FORBIDDEN if m in modules)
    assert found == [], f"the node agent now imports {found}: job.json is read as a PlanJob, import it lazily"


def test_node_check_catches_the_job_models(tmp_path: Path, distrun_home: Path) -> None:
    modules = imported_by_node_agent(tmp_path, extra_import="distrun.spec.models")
    assert sorted(m for m in NODE_FORBIDDEN if m in modules)[:2] == ["distrun.spec.models", "pydantic"]


# A Slurm job's batch script runs `python -m distrun.backends.ports N` on the first node before
# it starts the node agents: each module it imports delays every rank. It needs socket and random.
PORTS_STEP_FORBIDDEN = ("typing", "dataclasses", "distrun.core.errors", "distrun.backends.registry", "pydantic")

_PORTS_PROBE = (
    _RECORD_IMPORTS
    + """
import runpy
sys.argv = ["ports", sys.argv[2]]
try:
    runpy.run_module("distrun.backends.ports", run_name="__main__")
except SystemExit as exit:
    assert exit.code == 0, exit.code
"""
)


def imported_by_ports_step(tmp_path: Path, extra_import: str = "") -> set[str]:
    return imported_by_probe(tmp_path, _PORTS_PROBE, ["2"], {}, extra_import)


def test_the_ports_step_imports_only_what_finding_ports_needs(tmp_path: Path) -> None:
    modules = imported_by_ports_step(tmp_path)
    assert {"socket", "random", "distrun.backends"} <= modules  # the probe really ran the step
    found = sorted(m for m in PORTS_STEP_FORBIDDEN if m in modules)
    assert found == [], f"the ports step now imports {found}: import it where it is needed"


def test_ports_step_check_catches_a_new_import(tmp_path: Path) -> None:
    modules = imported_by_ports_step(tmp_path, extra_import="distrun.core.errors")
    assert sorted(m for m in PORTS_STEP_FORBIDDEN if m in modules)[:2] == ["dataclasses", "distrun.core.errors"]


def test_the_ports_step_prints_free_ports_and_names_bad_usage(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    found = subprocess.run(
        [sys.executable, "-m", "distrun.backends.ports", "3"], env=env, capture_output=True, text=True, timeout=60
    )
    assert found.returncode == 0, found.stderr
    ports = [int(p) for p in found.stdout.strip().split(",")]
    assert len(set(ports)) == 3 and all(20000 <= p <= 32767 for p in ports)
    bad = subprocess.run(
        [sys.executable, "-m", "distrun.backends.ports", "three"], env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "usage: python -m distrun.backends.ports N" in bad.stderr


# The Slurm node agent adds Slurm's view of the node to the same agent: its hosts (the Slurm
# client) and MPI's plan inside an allocation. The client's job-state half (the record, the
# tracking store, sqlite) and argparse are for other callers.
SLURM_AGENT_FORBIDDEN = (*NODE_FORBIDDEN, "argparse", "sqlite3", "distrun.store.index", "distrun.metrics.tracking")

_SLURM_AGENT_PROBE = (
    _RECORD_IMPORTS
    + """
from distrun.backends.slurm import node_agent
assert node_agent.parse_args(["--job-dir", sys.argv[2]])[0] is not None
# What run_slurm_node imports when it starts.
import distrun.agent.node, distrun.backends.slurm.mpi, distrun.backends.slurm.client
import distrun.agent.outcome_channel, distrun.backends.slurm.layout, distrun.plan
"""
)


def test_the_slurm_node_agent_leaves_the_record_and_tracking_modules_out(tmp_path: Path) -> None:
    modules, found = probe_forbidden(tmp_path, _SLURM_AGENT_PROBE, SLURM_AGENT_FORBIDDEN, [str(tmp_path)])
    assert "distrun.backends.slurm.client" in modules  # the probe really imported the agent's parts
    assert found == [], f"the Slurm node agent now imports {found}: import it where it is needed"


def test_slurm_agent_check_catches_the_state_module(tmp_path: Path) -> None:
    _, found = probe_forbidden(
        tmp_path, _SLURM_AGENT_PROBE, SLURM_AGENT_FORBIDDEN, [str(tmp_path)], "distrun.backends.slurm.state"
    )
    assert "distrun.store.index" in found


# On Ray, every node's actor (a Ray worker imports `actor` to build it) and the node agent it
# starts import the `distrun.backends.ray` package before any rank runs. The backend itself
# (the job models, the record, the driver) is for the `distrun` process.
RAY_NODE_FORBIDDEN = (*NODE_FORBIDDEN, "distrun.backends.base", "distrun.backends.ray.backend", "distrun.store.index")

_RAY_NODE_PROBE = (
    _RECORD_IMPORTS
    + """
import distrun.backends.ray.actor, distrun.backends.ray.node_agent
# What the Ray node agent's run imports when it starts.
import distrun.agent.node, distrun.agent.outcome_channel, distrun.agent.watchdog, distrun.core.file_modes
import distrun.store.layout
"""
)


def test_the_ray_actor_and_node_agent_leave_the_backend_out(tmp_path: Path) -> None:
    modules, found = probe_forbidden(tmp_path, _RAY_NODE_PROBE, RAY_NODE_FORBIDDEN)
    assert "distrun.backends.ray.actor" in modules and "distrun.agent.node" in modules  # the probe ran
    assert found == [], f"a Ray node now imports {found} before its ranks start: import it where it is needed"


def test_ray_node_check_catches_the_backend(tmp_path: Path) -> None:
    _, found = probe_forbidden(
        tmp_path, _RAY_NODE_PROBE, RAY_NODE_FORBIDDEN, extra_import="distrun.backends.ray.backend"
    )
    assert {"distrun.backends.ray.backend", "distrun.spec.models", "pydantic"} <= set(found)


# A Kubernetes pod's agent runs from its job's zip on any image's Python: it reads the job as plain
# data, without the job models (pydantic), and the backend (the API client, the record,
# submission, rendering) is for the `distrun` process. (Imports only the standard library, all of
# it in the zip: tests/unit/test_pod_agent_closure.py, tests/agent/test_pod_agent_zip.py.)
K8S_POD_FORBIDDEN = (
    "distrun.spec.models",
    "pydantic",
    "distrun.backends.kubernetes.render",
    "distrun.backends.kubernetes.manifests",
    "distrun.backends.kubernetes.backend",
    "distrun.backends.kubernetes.client",
    "distrun.backends.kubernetes.cluster",
    "distrun.backends.kubernetes.observe",
    "distrun.backends.base",
    "distrun.prepare.submission",
    "distrun.store.index",
    "sqlite3",
)

_K8S_POD_PROBE = (
    _RECORD_IMPORTS
    + """
import distrun.backends.kubernetes.pod_agent
# What run_pod imports when it starts.
import distrun.agent.node, distrun.backends.kubernetes.pod_contract, distrun.backends.kubernetes.bundle
import distrun.plan, distrun.agent.watchdog, distrun.restarts.policy, distrun.core.job_status
"""
)


def test_a_kubernetes_pod_agent_leaves_the_backend_out(tmp_path: Path) -> None:
    modules, found = probe_forbidden(tmp_path, _K8S_POD_PROBE, K8S_POD_FORBIDDEN)
    assert "distrun.backends.kubernetes.pod_contract" in modules  # the probe ran
    assert found == [], f"a pod's agent now imports {found} before its ranks start: import it where it is needed"


def test_pod_check_catches_the_backend(tmp_path: Path) -> None:
    _, found = probe_forbidden(
        tmp_path, _K8S_POD_PROBE, K8S_POD_FORBIDDEN, extra_import="distrun.backends.kubernetes.backend"
    )
    assert {"distrun.backends.kubernetes.backend", "distrun.backends.base", "distrun.prepare.submission"} <= set(found)


def test_the_ports_step_says_when_no_port_is_free(monkeypatch, capsys) -> None:
    from distrun.backends import ports

    monkeypatch.setattr(ports, "PORT_RANGE", (20000, 20000))  # one port, asked for two
    assert ports.main(["2"]) == 1
    assert capsys.readouterr().err == "distrun: no 2 free TCP port(s) found in 20000-20000\n"
