"""The backend seam: layering (store and agent import nothing above them), the registry, the faces.

What every backend must do (the contract itself) is checked once, for every engine, in
tests/unit/test_backend_conformance.py.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import SRC, cli_env


def loaded_modules(statement: str) -> list[str]:
    """The distrun.backends modules a fresh interpreter has loaded after `statement`."""
    code = f"import sys; {statement}; print(sorted(m for m in sys.modules if m.startswith('distrun.backends')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return json.loads(out.stdout.replace("'", '"'))


def test_the_store_imports_nothing_above_itself() -> None:
    statement = "import distrun.store.index, distrun.store.layout, distrun.store.snapshot, distrun.store.port_leases"
    assert loaded_modules(statement) == []


def test_the_node_agent_imports_no_backend() -> None:
    agent = SRC / "distrun" / "agent"
    for path in sorted(agent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(("distrun.backends", "distrun.prepare.submission", "distrun.runner.jobs")), (
                    f"{path.name} imports {name}"
                )
    modules = [f"distrun.agent.{p.stem}" for p in sorted(agent.glob("*.py")) if p.stem != "__init__"]
    assert loaded_modules("; ".join(f"import {m}" for m in modules)) == []


def test_a_backend_missing_from_this_install_says_what_to_install(monkeypatch) -> None:
    from distrun.backends import registry
    from distrun.core.errors import DistrunError

    monkeypatch.setitem(registry.BACKENDS, "ray", registry.BackendEntry("distrun.backends.no_such_ray", "ray"))
    registry._loaded.pop("ray", None)
    with pytest.raises(DistrunError) as caught:
        registry.backend_for("ray")
    assert "compute type 'ray' is not available in this install of distrun" in caught.value.message
    assert "pip install 'distrun[ray]'" in (caught.value.hint or "")
    with pytest.raises(DistrunError, match="not supported by this version"):
        registry.backend_for("mainframe")


def test_compute_create_refuses_a_type_this_install_cannot_run(distrun_home: Path) -> None:
    env = cli_env(distrun_home)
    # Pretend this install has no Ray backend, whatever the checkout has.
    code = (
        "import sys; from distrun.backends import registry; "
        "registry.BACKENDS['ray'] = registry.BackendEntry('distrun.backends.no_such_ray', 'ray'); "
        "from distrun.cli.main import main; "
        "sys.argv = ['distrun', 'compute', 'create', '--name', 'rc', '--type', 'ray']; "
        "main()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode != 0
    assert "compute type 'ray' is not available in this install of distrun" in result.stderr
    assert "pip install 'distrun[ray]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (distrun_home / "config.yaml").exists()  # nothing half-defined


def test_a_grace_period_of_zero_is_zero_when_canceling(distrun_home: Path) -> None:
    from distrun.runner.jobs import _grace_seconds
    from distrun.spec.models import DEFAULT_GRACE_PERIOD
    from distrun.store.layout import Layout

    layout = Layout()
    for name, limits, expected in (("g0", {"grace_period": 0}, 0.0), ("gd", {}, DEFAULT_GRACE_PERIOD)):
        folder = layout.job(name)
        folder.root.mkdir(parents=True)
        folder.job_json.write_text(json.dumps({"command": "true", "limits": limits}))
        assert _grace_seconds(layout, name) == expected


def test_the_faces_never_ask_which_engine_a_job_runs_on() -> None:
    faces = [
        *sorted((SRC / "distrun" / "cli").glob("*.py")),
        *sorted((SRC / "distrun" / "runner").glob("*.py")),
        *sorted((SRC / "distrun" / "sdk").glob("*.py")),
    ]
    assert len(faces) > 20  # the folders are there: a move would otherwise leave nothing to check
    for path in faces:
        text = path.read_text()
        for probe in (
            '.type == "',
            'kind == "',
            "hasattr(backend",
            "getattr(backend",
            "backends.local",
            "backends.slurm",
        ):
            assert probe not in text, f"{path.name} tests a backend's kind ({probe})"
