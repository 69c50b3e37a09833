"""pyproject.toml declares what distrun's code imports, and nothing in its core goes unused.

`deptry src` reads every import under src/ and the dependencies in pyproject.toml. It fails on
an import that no declared distribution provides (DEP001), on one that only a dependency's
dependency provides (DEP003), on one that only the `test` or `examples` extras provide
(DEP004), and on a core dependency that nothing imports (DEP002). The suite runs in a virtual
environment made fresh from pyproject.toml (scripts/test.sh), so deptry sees the declared
distributions, not whatever else the machine has installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_pyproject_declares_every_import_of_src_and_uses_every_core_dependency():
    assert importlib.util.find_spec("deptry") is not None, "deptry is missing: pip install -e '.[test]'"
    result = subprocess.run(
        [sys.executable, "-m", "deptry", "--no-ansi", "src"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"deptry found dependency problems:\n{result.stdout}{result.stderr}"
    assert "No dependency issues found" in result.stdout + result.stderr
