"""Helpers shared by the fault-injection tests: job files, records, leftover processes.

A job's processes are found two ways: by `DISTRUN_JOB_NAME` in their environment (what every
process distrun starts carries) and by a token in their command line, for processes that
cleared their environment on purpose (`env -i`), which the first way cannot see.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from distrun.core import procfs
from support.cli import cli_env, distrun_cli
from support.jobs import only_job, processes_of_job, record, wait_for

__all__ = ["only_job", "record"]  # re-exported: the reliability tests import them from here
from distrun.store.index import JobIndex


def processes_with(token: str) -> list[int]:
    """Live processes whose command line or environment contains `token`."""
    needle = token.encode()
    return [
        pid
        for pid, environ in procfs.environments()
        if pid != os.getpid()
        and (needle in procfs.command_line(pid) or any(needle in entry for entry in environ))
        and procfs.is_alive(pid)
    ]


def leftovers(name: str, *tokens: str) -> list[int]:
    pids = set(processes_of_job(name))
    for token in tokens:
        pids.update(processes_with(token))
    return sorted(pids)


def assert_nothing_left(name: str, *tokens: str, within: float = 10.0) -> None:
    """Every process of the job is gone (allowing `within` s for the kernel to finish kills)."""
    try:
        wait_for(lambda: not leftovers(name, *tokens), timeout=within)
    except AssertionError:
        left = leftovers(name, *tokens)
        described = [_describe(pid) for pid in left]
        for pid in left:  # do not leak them into the next test
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        raise AssertionError(f"processes of job {name} left behind: {described}") from None


def _describe(pid: int) -> str:
    command = procfs.command_line(pid).replace(b"\0", b" ").decode(errors="replace")
    return f"{pid}: {command}"


def job_file(folder: Path, yaml_text: str, files: dict[str, str] | None = None) -> Path:
    """job.yml (dedented) in `folder`, with `files` under folder/src."""
    (folder / "src").mkdir(parents=True, exist_ok=True)
    for name, content in (files or {}).items():
        path = folder / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))
    job = folder / "job.yml"
    job.write_text(textwrap.dedent(yaml_text))
    return job


def run_bytes(home: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[bytes]:
    """The CLI with its output kept as bytes (for logs that are not text)."""
    return subprocess.run(
        [sys.executable, "-m", "distrun", *args], capture_output=True, timeout=timeout, env=cli_env(home)
    )


def wait_running(home: Path, name: str | None = None, timeout: float = 60) -> str:
    """The name of the (only, or given) job once its record says Running."""

    def running() -> str | None:
        if not (home / "jobs.db").exists():
            return None
        for job in JobIndex(home / "jobs.db").list():
            if (name is None or job.name == name) and job.status == "Running":
                return job.name
        return None

    return str(wait_for(running, timeout=timeout))


def show(home: Path, name: str) -> dict[str, Any]:
    shown = run_bytes(home, "job", "show", name, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def by_rank(rec: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["rank"]: p for p in rec["processes"]}


MEMORY_CAP = 1 << 30  # a command reading /dev/zero whole passes this long before the machine's memory


def _capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_capped(
    home: Path, *args: str, timeout: float = 120, cwd: Path | None = None, text: bool = True
) -> subprocess.CompletedProcess[Any]:
    """The CLI with a memory cap and a time limit: a hang or a runaway read fails the test, not the machine."""
    return distrun_cli(home, *args, timeout=timeout, cwd=cwd, text=text, preexec_fn=_capped)


def assert_refused(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    """distrun's own error (exit 2), no traceback, each `expected` text in it."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    for text in expected:
        assert text in done.stderr, done.stderr


def wait_gone(pid: int, timeout: float = 30) -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still alive after {timeout} s")
