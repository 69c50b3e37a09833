"""Fixtures shared by the SDK tests (no tests here): a private DISTRUN_HOME, the job's folder as working directory."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from support.cli import with_src_first


@pytest.fixture
def sdk_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DISTRUN_HOME in tmp, cwd = a project folder with src/ and data/ (`./src` is relative to the cwd).

    PYTHONPATH makes the background launcher that create_or_update starts run this checkout.
    Notices are reset so each test sees its own 'said once' warnings.
    """
    from distrun.sdk import notices

    home = tmp_path / "home"
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "sample.txt").write_text("1 2 3\n")
    monkeypatch.setenv("DISTRUN_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", with_src_first(os.environ.get("PYTHONPATH")))
    monkeypatch.chdir(project)
    monkeypatch.setattr(notices, "_said", set())
    return project


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path
