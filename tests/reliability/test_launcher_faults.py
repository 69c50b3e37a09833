"""Faults injected into distrun itself while ranks run: signals, the terminal closing, being
SIGKILLed, and `job cancel` racing the job's own start and end.

Already covered in tests/engines/local/test_local_jobs.py: Ctrl-C (SIGINT), `job cancel` of a running job,
SIGKILL of `distrun run` with setsid grandchildren.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import termios
import time

import pytest

from distrun.agent.cgroup import cgroup_path
from distrun.runner.jobs import cancel_job
from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from support.cli import cli_env
from support.jobs import four_rank_job, wait_for
from support.reliability import (
    assert_nothing_left,
    only_job,
    processes_with,
    record,
    show,
    wait_gone,
    wait_running,
)


def token() -> str:
    return str(random.randrange(10**8, 10**9))


def test_sigterm_to_distrun_cancels_the_job(start_cli, write_job, distrun_home):
    mark = token()
    job = write_job(four_rank_job(f"(setsid sleep 300.{mark} &); echo rank $RANK up; exec sleep 300"))
    proc = start_cli("run", str(job))
    name = wait_running(distrun_home)
    wait_for(lambda: len(processes_with(f"300.{mark}")) == 4)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 130, output
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled" and rec["reason"] == "canceled (SIGTERM)"
    assert all(p["stopped_by_distrun"] for p in rec["processes"])
    assert "distrun: SIGTERM received, stopping the job" in output
    assert "Status: Canceled" in output and "Traceback" not in output
    assert_nothing_left(name, mark)


def _run_in_a_terminal(home, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """`distrun` with a pseudo-terminal as its controlling terminal, as in an ssh session."""
    master, slave = os.openpty()

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "distrun", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_terminal,
        env=cli_env(home),
    )
    os.close(slave)
    os.set_blocking(master, False)
    return proc, master


def _read_terminal(master: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except (BlockingIOError, OSError):
            return data
        if not chunk:
            return data
        data += chunk


def test_terminal_closing_cancels_the_job(write_job, distrun_home):
    mark = token()
    job = write_job(four_rank_job(f"(setsid sleep 300.{mark} &); echo rank $RANK up; exec sleep 300"))
    proc, master = _run_in_a_terminal(distrun_home, "run", str(job))
    try:
        seen = b""

        def started() -> bool:
            nonlocal seen
            seen += _read_terminal(master)
            return seen.count(b" up") == 4

        wait_for(started, timeout=60)
        name = only_job(distrun_home)
    finally:
        os.close(master)  # the terminal window closes: the kernel hangs up the session
    assert proc.wait(timeout=30) == 130
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled" and rec["reason"] == "canceled: the terminal closed"
    assert all(p["stopped_by_distrun"] for p in rec["processes"])
    assert_nothing_left(name, mark)
    assert not (distrun_home / "jobs" / name / "system_logs" / "launcher.txt").exists()


def test_sigkill_of_distrun_stops_daemons_that_cleared_their_environment(start_cli, write_job, distrun_home):
    # Found by nothing but the launch's cgroup: no marker in the environment, and once the
    # agent is gone no subreaper either.
    mark = token()
    job = write_job(
        four_rank_job(f"(setsid env -i sleep 300.{mark} &); echo up; exec sleep 300"),
    )
    proc = start_cli("run", str(job))
    name = wait_running(distrun_home)
    wait_for(lambda: len(processes_with(f"300.{mark}")) == 4)
    cgroup = cgroup_path(f"{name}-{proc.pid}")
    assert cgroup is not None and cgroup.is_dir()
    proc.kill()
    proc.wait()
    assert_nothing_left(name, mark)
    rec = show(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"].startswith("launcher lost")
    wait_for(lambda: not cgroup.exists(), timeout=10)


def test_sigkill_of_the_background_launcher(run_cli, write_job, distrun_home):
    mark = token()
    job = write_job(four_rank_job(f"(setsid sleep 300.{mark} &); echo up; exec sleep 300"))
    created = run_cli("job", "create", "--file", str(job), "--name", "bg_killed")
    assert created.returncode == 0, created.stderr
    wait_running(distrun_home, "bg_killed")
    wait_for(lambda: len(processes_with(f"300.{mark}")) == 4)
    launcher = record(distrun_home, "bg_killed")["launcher_pid"]
    os.kill(launcher, signal.SIGKILL)
    wait_gone(launcher)
    assert_nothing_left("bg_killed", mark)
    rec = show(distrun_home, "bg_killed")
    assert rec["status"] == "Failed" and rec["reason"].startswith("launcher lost")
    listed = run_cli("job", "list", "--output", "json")
    assert '"status": "Failed"' in listed.stdout


def test_a_second_interrupt_does_not_wait_for_the_grace_period(start_cli, write_job, distrun_home):
    job = write_job(
        four_rank_job("exec python stubborn.py", grace=600),
        {
            "stubborn.py": """
                import signal, time
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                print("up", flush=True)
                time.sleep(600)
            """
        },
    )
    proc = start_cli("run", str(job))
    name = wait_running(distrun_home)
    logs = distrun_home / "jobs" / name / "user_logs"
    wait_for(lambda: all((logs / f"std_log_process_{r:02d}.txt").read_bytes() for r in range(4)))  # all ignore TERM
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130  # not the 600 s grace period
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled" and "SIGINT" in rec["reason"]
    assert {p["signal"] for p in rec["processes"]} == {"SIGKILL"}
    assert_nothing_left(name)


GATED = """
    command: >-
      echo rank $RANK waiting; while [ ! -e "$GO" ]; do sleep 0.005; done; echo rank $RANK done
    resources:
      instance_count: 1
    distribution:
      type: pytorch
      process_count_per_instance: 2
    environment_variables:
      GO: {go}
    limits:
      grace_period: 2
"""


@pytest.mark.slow
def test_cancel_racing_the_jobs_own_end(start_cli, write_job, distrun_home, tmp_path):
    """The job ends on its own while `job cancel` arrives: whichever wins, the record is true."""
    outcomes = []
    layout = Layout(distrun_home)
    for attempt, delay in enumerate([0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.08, 0.12]):
        go = tmp_path / f"go{attempt}"
        proc = start_cli("run", str(write_job(GATED.replace("{go}", str(go)))), "--name", f"race{attempt}")
        name = wait_running(distrun_home, f"race{attempt}")
        wait_for(
            lambda name=name: (
                b"waiting" in (distrun_home / "jobs" / name / "user_logs" / "std_log_process_01.txt").read_bytes()
            )
        )
        go.touch()  # the ranks finish within a few ms ...
        time.sleep(delay)
        answered = cancel_job(layout, name)  # ... while the cancel arrives
        output = proc.communicate(timeout=60)[0]
        rec = record(distrun_home, name)
        outcomes.append(rec["status"])
        assert answered.status == rec["status"], (delay, answered, output)
        if rec["status"] == "Completed":
            assert proc.returncode == 0, output
            assert [p["exit_code"] for p in rec["processes"]] == [0, 0]
        else:
            assert rec["status"] == "Canceled", (delay, rec, output)
            assert proc.returncode == 130, output
        assert "Traceback" not in output
        assert_nothing_left(name)
    assert set(outcomes) <= {"Completed", "Canceled"}


@pytest.mark.slow
def test_cancel_racing_the_jobs_start(run_cli, write_job, distrun_home, tmp_path):
    """`job cancel` right after `job create`, while the background launcher starts."""
    layout = Layout(distrun_home)
    for attempt, delay in enumerate([0.0, 0.05, 0.15, 0.3]):
        mark = token()
        job = write_job(four_rank_job(f"echo up {mark}; exec sleep 300.{mark}"))
        created = run_cli("job", "create", "--file", str(job), "--name", f"early{attempt}")
        assert created.returncode == 0, created.stderr
        time.sleep(delay)
        answered = cancel_job(layout, f"early{attempt}")
        rec = record(distrun_home, f"early{attempt}")
        assert answered.status == rec["status"] == "Canceled", (delay, rec)
        launcher = rec["launcher_pid"]
        if launcher:
            wait_gone(launcher)
        assert_nothing_left(f"early{attempt}", mark)
        # The record stays true after the launcher is gone.
        assert record(distrun_home, f"early{attempt}")["status"] == "Canceled"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_while_the_job_is_prepared_or_starts(start_cli, write_job, distrun_home, sig):
    """A stop signal at any moment from the record's creation on: the job ends Canceled, never
    Queued or Running forever, and no process starts after it."""
    mark = token()
    # Many files: the code snapshot takes long enough to be interrupted in the middle.
    files = {f"data/part{i:04d}.txt": "x" * 2000 for i in range(300)}
    job = write_job(four_rank_job(f"echo up; exec sleep 300.{mark}"), files)
    index = JobIndex(distrun_home / "jobs.db")
    seen: set[str] = set()
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.2):
        proc = start_cli("run", str(job))

        def new_job() -> str | None:
            if not (distrun_home / "jobs.db").exists():
                return None
            fresh = set(index.names()) - seen
            return fresh.pop() if fresh else None

        name = str(wait_for(new_job, interval=0.005))
        seen.add(name)
        time.sleep(delay)
        proc.send_signal(sig)
        output = proc.communicate(timeout=30)[0]
        assert proc.returncode == 130, (delay, output)
        assert "Traceback" not in output, output
        rec = show(distrun_home, name)
        assert rec["status"] == "Canceled", (delay, rec, output)
        assert_nothing_left(name, mark)


def test_job_cancel_while_the_job_is_prepared(start_cli, write_job, distrun_home):
    """The supervisor of a job being prepared is not signalled (with the SDK it is the user's own
    Python process): the cancel is written to the index, and preparation stops there."""
    mark = token()
    files = {f"data/part{i:04d}.txt": "x" * 2000 for i in range(1500)}
    proc = start_cli("run", str(write_job(four_rank_job(f"echo up; exec sleep 300.{mark}"), files)))
    index = JobIndex(distrun_home / "jobs.db")
    name = str(
        wait_for(lambda: (distrun_home / "jobs.db").exists() and next(iter(index.names()), None), interval=0.005)
    )
    answered = cancel_job(Layout(distrun_home), name)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output
    assert answered.status == "Canceled" and answered.reason == "canceled before it was running"
    assert f"job {name} was canceled while it was being prepared" in output and "Traceback" not in output
    rec = record(distrun_home, name)
    assert (rec["status"], rec["processes"]) == ("Canceled", None)
    assert not list((distrun_home / "jobs" / name / "user_logs").iterdir())  # nothing started
    assert_nothing_left(name, mark)


def test_sigterm_to_the_background_launcher_while_it_starts(run_cli, write_job, distrun_home):
    """A SIGTERM that reaches the launcher before Python has even started is held, not fatal."""
    mark = token()
    job = write_job(four_rank_job(f"echo up; exec sleep 300.{mark}"))
    created = run_cli("job", "create", "--file", str(job), "--name", "bg_term")
    assert created.returncode == 0, created.stderr
    launcher = record(distrun_home, "bg_term")["launcher_pid"]
    os.kill(launcher, signal.SIGTERM)  # at once: the launcher is still starting Python
    wait_gone(launcher)
    rec = record(distrun_home, "bg_term")
    assert rec["status"] == "Canceled" and rec["reason"] == "canceled (SIGTERM)", rec
    assert_nothing_left("bg_term", mark)
