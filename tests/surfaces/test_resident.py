"""The resident process (`distrun resident start`): `distrun run` handed to a forked copy of it.

Real processes throughout: a resident started by the CLI, `distrun run` commands that hand
their work to it, and the checks that they ran there (its count) and as they would cold.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import SRC, distrun_cli, start_distrun_cli
from support.jobs import processes_of_job, wait_for


@pytest.fixture
def home() -> Iterator[Path]:
    # A short folder: a Unix socket's path holds at most 107 bytes, and pytest's tmp_path can be longer.
    folder = Path(tempfile.mkdtemp(prefix="dr-", dir="/tmp"))
    try:
        yield folder
    finally:
        _cli(folder, "resident", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def _cli(home: Path, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    return distrun_cli(home, *args, timeout=120, **options)


def _ended(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _counts(home: Path) -> str:
    shown = _cli(home, "resident", "status")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return next(line.strip() for line in shown.stdout.splitlines() if "commands run" in line)


def _job(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    job = folder / "job.yml"
    job.write_text(text)
    return job


def _only_job(home: Path) -> str:
    names = [entry.name for entry in (home / "jobs").iterdir()]
    assert len(names) == 1, names
    return names[0]


def test_a_run_is_handed_to_the_resident_and_runs_as_it_would_cold(home, tmp_path):
    started = _cli(home, "resident", "start")
    assert started.returncode == 0, started.stderr
    assert "commands run: 0" in started.stdout
    where = tmp_path / "where"
    job = _job(where, "command: echo greeting=$GREETING\n")  # named relative to the caller's folder below
    ran = _cli(home, "run", "job.yml", cwd=where, env={"GREETING": "from-the-caller"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "greeting=from-the-caller" in ran.stdout
    assert "Status: Completed" in ran.stdout
    assert _counts(home) == "commands run: 1, running now: 0, run cold: 0"
    # A failing command's code comes back as cold.
    failing = _job(tmp_path / "failing", "command: exit 3\n")
    failed = _cli(home, "run", str(failing))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Status: Failed" in failed.stdout
    assert _counts(home) == "commands run: 2, running now: 0, run cold: 0"
    assert job.exists()


def _sleeping_job_through_the_resident(home: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """A resident started, and a `distrun run` of `sleep 60` through it, its rank running."""
    assert _cli(home, "resident", "start").returncode == 0
    caller = start_distrun_cli(home, "run", str(_job(tmp_path / "sleep", "command: sleep 60\n")))
    name = wait_for(lambda: (home / "jobs").is_dir() and any((home / "jobs").iterdir()) and _only_job(home))
    wait_for(lambda: processes_of_job(name))
    return caller, str(name)


def test_ctrl_c_at_the_caller_cancels_the_job_the_resident_runs(home, tmp_path):
    caller, name = _sleeping_job_through_the_resident(home, tmp_path)
    caller.send_signal(signal.SIGINT)
    out, _ = caller.communicate(timeout=60)
    assert caller.returncode == 130, out
    assert "Status: Canceled" in out
    wait_for(lambda: not processes_of_job(name), timeout=30)
    assert _counts(home) == "commands run: 1, running now: 0, run cold: 0"


def test_a_caller_killed_outright_cancels_its_job_as_a_closed_terminal(home, tmp_path):
    caller, name = _sleeping_job_through_the_resident(home, tmp_path)
    caller.kill()
    caller.wait(timeout=30)
    wait_for(lambda: not processes_of_job(name), timeout=30)
    shown = wait_for(lambda: "Canceled" in (s := _cli(home, "job", "show", name).stdout) and s, timeout=30)
    assert "terminal closed" in str(shown)


def test_the_caller_still_learns_the_exit_code_when_the_resident_is_killed_meanwhile(home, tmp_path):
    started = _cli(home, "resident", "start")
    assert started.returncode == 0
    pid = int(started.stdout.split("pid ")[1].split()[0])
    job = _job(tmp_path / "late", "command: sleep 2; exit 4\n")
    caller = start_distrun_cli(home, "run", str(job))
    wait_for(lambda: (home / "jobs").is_dir() and any((home / "jobs").iterdir()))
    os.kill(pid, signal.SIGKILL)
    out, _ = caller.communicate(timeout=60)
    assert caller.returncode == 1, out  # a failed job, as cold
    assert "Status: Failed" in out
    assert _cli(home, "resident", "status").returncode == 3


def test_a_caller_whose_limits_differ_runs_cold_and_the_resident_says_why(home, tmp_path):
    assert _cli(home, "resident", "start").returncode == 0
    job = _job(tmp_path / "true", "command: echo ran\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, 512) - 1

    def lower_open_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))

    ran = _cli(home, "run", str(job), preexec_fn=lower_open_files)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Status: Completed" in ran.stdout
    shown = _cli(home, "resident", "status").stdout
    assert "commands run: 0, running now: 0, run cold: 1" in shown
    assert "resource limits" in shown


def test_a_caller_with_another_module_search_path_runs_cold(home, tmp_path):
    """A module distrun imports later (Ray, the Kubernetes client) could come from another folder
    than the resident would look in: a caller whose PYTHONPATH differs is not served. An empty
    entry (the working folder) is the same entry wherever the caller works."""
    search = {"PYTHONPATH": f"{SRC}{os.pathsep}"}  # ends in an empty entry: the working folder
    assert _cli(home, "resident", "start", env=search).returncode == 0
    job = _job(tmp_path / "true", "command: echo ran\n")
    (tmp_path / "more").mkdir()
    ran = _cli(home, "run", str(job), env={"PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path / 'more'}"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Status: Completed" in ran.stdout
    shown = _cli(home, "resident", "status").stdout
    assert "commands run: 0, running now: 0, run cold: 1" in shown
    assert "another module search path" in shown
    served = _cli(home, "run", str(job), cwd=tmp_path, env=search)  # another working folder
    assert served.returncode == 0 and "Status: Completed" in served.stdout
    assert "commands run: 1, running now: 0, run cold: 1" in _cli(home, "resident", "status").stdout


def test_after_stop_runs_are_cold_and_the_socket_is_gone(home, tmp_path):
    assert _cli(home, "resident", "start").returncode == 0
    assert (home / "resident.sock").exists()
    stopped = _cli(home, "resident", "stop")
    assert stopped.returncode == 0 and "stopped the resident process" in stopped.stdout
    assert not (home / "resident.sock").exists()
    ran = _cli(home, "run", str(_job(tmp_path / "true", "command: echo ran\n")))
    assert ran.returncode == 0 and "Status: Completed" in ran.stdout
    assert _cli(home, "resident", "status").returncode == 3


def test_a_resident_left_by_a_killed_one_socket_is_replaced_and_a_second_start_finds_the_first(home):
    first = _cli(home, "resident", "start")
    pid = int(first.stdout.split("pid ")[1].split()[0])
    again = _cli(home, "resident", "start")
    assert f"pid {pid} " in again.stdout  # the same one
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _ended(pid))
    time.sleep(0.1)
    assert (home / "resident.sock").exists()  # left behind
    fresh = _cli(home, "resident", "start")
    assert fresh.returncode == 0 and f"pid {pid} " not in fresh.stdout


def test_a_resident_whose_code_changed_sends_the_run_cold_and_leaves(home, tmp_path):
    # A copy of distrun to edit: the caller and the resident both import it.
    copy = tmp_path / "src"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def distrun(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(home, *args, env={"PYTHONPATH": str(copy)})

    started = distrun("resident", "start")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("pid ")[1].split()[0])
    job = _job(tmp_path / "true", "command: echo ran\n")
    assert "Status: Completed" in distrun("run", str(job)).stdout
    edited = copy / "distrun" / "jobs.py"
    edited.write_text(edited.read_text() + "\n# an upgrade\n")
    os.utime(edited, (time.time() + 5, time.time() + 5))
    ran = distrun("run", str(job))
    assert ran.returncode == 0 and "Status: Completed" in ran.stdout  # cold, from the edited code
    wait_for(lambda: _ended(pid))
    assert "distrun's code changed" in (home / "resident.log").read_text()
    assert not (home / "resident.sock").exists()


def test_ctrl_c_is_not_held_up_by_a_resident_that_does_not_answer(home, tmp_path):
    started = _cli(home, "resident", "start")
    pid = int(started.stdout.split("pid ")[1].split()[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        caller = start_distrun_cli(home, "run", str(_job(tmp_path / "true", "command: echo ran\n")))
        time.sleep(1)
        assert caller.poll() is None  # waiting for the resident's answer
        caller.send_signal(signal.SIGINT)
        # wait, not communicate: the resident holds the caller's stdout, sent with the request, unread.
        assert caller.wait(timeout=10) == 130
    finally:
        os.kill(pid, signal.SIGCONT)
    # The resident then takes the request and finds the caller gone: it refuses it (the caller's
    # context is unreadable), or its copy sees the closed connection and ends unstarted.
    answered = ("commands run: 0, running now: 0, run cold: 1", "commands run: 1, running now: 0, run cold: 0")
    wait_for(lambda: _counts(home) in answered, timeout=30)
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())
    assert caller.communicate(timeout=10)[0] == ""
