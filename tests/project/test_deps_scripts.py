"""The test setup's install steps: apt waits for the package lock, long steps show progress."""

from __future__ import annotations

import re
import subprocess

from support.cli import REPO

DEPS = sorted((REPO / "scripts" / "deps").glob("*.sh"))
PROGRESS = REPO / "scripts" / "lib" / "progress.sh"


def _commands(path):
    """The script's lines without comments, with backslash continuations joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [line.split(" #", 1)[0] for line in text.splitlines() if not line.lstrip().startswith("#")]


def test_every_apt_call_waits_for_the_package_lock():
    calls = [(p.name, line) for p in DEPS for line in _commands(p) if re.search(r"\bapt-get\b", line)]
    assert calls, "no apt-get call found: the check would test nothing"
    for name, line in calls:
        assert "DPkg::Lock::Timeout=" in line, f"{name}: {line.strip()}"


def test_long_steps_print_progress_and_keep_their_exit_status(tmp_path):
    script = f'source "{PROGRESS}"; with_progress "building thing" bash -c "sleep 2.5; exit $CODE"'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={"PROGRESS_INTERVAL": "1", "CODE": "0"}
    )
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "building thing ..." and "  ... still building thing (1 s)" in lines
    assert lines[-1].startswith("  done building thing in ")
    failed = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={"PROGRESS_INTERVAL": "1", "CODE": "3"}
    )
    assert failed.returncode == 3 and "failed building thing after" in failed.stderr


def test_the_horovod_build_runs_with_progress():
    steps = [line for line in _commands(REPO / "scripts" / "deps" / "25-horovod.sh") if "pip wheel" in line]
    build = [line for line in steps if "--no-build-isolation" in line]
    assert build and all("with_progress" in line for line in build)
