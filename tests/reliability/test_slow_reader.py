"""A slow reader never stalls supervision (class 5).

When nobody reads distrun's live stream (`| less` left open, Ctrl-S, a pipe nobody drains), the
ranks keep running, their logs keep being written whole, timeouts and `job cancel` still work,
and the record is written; the live stream skips ahead with a marker saying how many bytes it
did not show.
"""

from __future__ import annotations

import subprocess
import sys
import threading

from support.cli import cli_env
from support.jobs import wait_for
from support.reliability import assert_nothing_left, record, run_capped, wait_running

MB = 1 << 20
FLOOD = "python -c \"import sys; [sys.stdout.write('x' * 1023 + '\\n') for _ in range(40 * 1024)]; sys.stdout.flush()\""


def _start_unread(home, job) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    """`distrun run` with its stdout a pipe that nobody reads (yet)."""
    return subprocess.Popen(
        [sys.executable, "-m", "distrun", "run", str(job), "--name", "stalled"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=cli_env(home),
    )


def _read_all(proc: subprocess.Popen[bytes]) -> bytes:
    out = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait(timeout=120)
    return out


def _log(home) -> bytes:  # type: ignore[no-untyped-def]
    return (home / "jobs" / "stalled" / "user_logs" / "std_log_process_00.txt").read_bytes()


def _ended(home) -> bool:  # type: ignore[no-untyped-def]
    from distrun.core.errors import JobNotFoundError

    if not (home / "jobs.db").exists():
        return False
    try:  # jobs.db can exist a moment before the job's row is in it
        return record(home, "stalled")["status"] in ("Completed", "Failed", "Canceled")
    except JobNotFoundError:
        return False


def test_ranks_run_and_the_record_is_written_while_nobody_reads(write_job, distrun_home, tmp_path):
    flag = tmp_path / "kept-running"
    job = write_job(f"command: {FLOOD} && touch {flag}\ncode: src\n")
    proc = _start_unread(distrun_home, job)
    try:
        wait_for(flag.exists, timeout=120)  # the rank got past 40 MB of output nobody read
        wait_for(lambda: _ended(distrun_home), timeout=120)
        assert record(distrun_home, "stalled")["status"] == "Completed"
    finally:
        out = _read_all(proc)
    assert proc.returncode == 0
    assert _log(distrun_home) == (b"x" * 1023 + b"\n") * 40 * 1024  # the log has every byte
    assert b"bytes of output not shown here" in out
    assert b"Status: Completed" in out
    for line in out.splitlines():  # what is shown is whole lines
        if line.startswith(b"[0/0] x"):
            assert line == b"[0/0] " + b"x" * 1023


def test_a_timeout_fires_while_nobody_reads(write_job, distrun_home):
    job = write_job(f"command: {FLOOD} && sleep 600\ncode: src\nlimits:\n  timeout: 15\n  grace_period: 1\n")
    proc = _start_unread(distrun_home, job)
    try:
        wait_for(lambda: _ended(distrun_home), timeout=120)
        rec = record(distrun_home, "stalled")
        assert rec["status"] == "Failed" and "timeout after 15 s" in rec["reason"]
    finally:
        out = _read_all(proc)
    assert b"Status: Failed" in out
    # Far more than the pipe and the stream's backlog hold: the supervisor kept reading the rank.
    # (On a loaded machine the timeout may come before all 40 MB; what is there is whole lines.)
    logged = _log(distrun_home)
    assert len(logged) > 6 * MB and len(logged) % 1024 == 0
    assert_nothing_left("stalled")


def test_cancel_works_while_nobody_reads(write_job, distrun_home):
    job = write_job(f"command: {FLOOD} && sleep 600\ncode: src\nlimits:\n  grace_period: 1\n")
    proc = _start_unread(distrun_home, job)
    try:
        wait_running(distrun_home, "stalled")
        wait_for(lambda: len(_log(distrun_home)) == 40 * MB, timeout=120)
        canceler = threading.Thread(target=lambda: run_capped(distrun_home, "job", "cancel", "stalled", timeout=120))
        canceler.start()
        wait_for(lambda: _ended(distrun_home), timeout=120)
        assert record(distrun_home, "stalled")["status"] == "Canceled"
    finally:
        out = _read_all(proc)
        canceler.join(timeout=120)
    assert b"Status: Canceled" in out
    assert_nothing_left("stalled")
