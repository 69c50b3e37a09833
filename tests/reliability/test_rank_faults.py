"""Faults injected into a job's ranks: each test checks the final record, the logs, and that
no process of the job is left.

Already covered in tests/engines/local/test_local_jobs.py, not repeated here: a rank raising mid-run
(root cause with traceback), a rank SIGKILLed, every rank hanging past limits.timeout.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from support.jobs import four_rank_job
from support.reliability import assert_nothing_left, by_rank, only_job, record, run_bytes, show


def log_of(home, name: str, rank: int) -> bytes:
    return (home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_bytes()


def test_rank_exiting_non_zero_at_start(run_cli, write_job, distrun_home):
    job = write_job(
        four_rank_job(
            'echo "rank $RANK up"; if [ "$RANK" = 1 ]; then echo "rank 1: no data" >&2; exit 3; fi; exec sleep 60'
        )
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    assert rec["reason"] == "rank 1 on node 0 exited with code 3"
    cause = rec["root_cause"]
    assert (cause["rank"], cause["node_rank"], cause["exit_code"], cause["signal"]) == (1, 0, 3, None)
    procs = by_rank(rec)
    assert all(procs[r]["stopped_by_distrun"] for r in (0, 2, 3))
    assert not procs[1]["stopped_by_distrun"]
    # stdout and stderr both reach the rank's log, in order, and the stream.
    assert log_of(distrun_home, name, 1) == b"rank 1 up\nrank 1: no data\n"
    assert "[0/1] rank 1: no data" in result.stdout
    assert "Reason: rank 1 on node 0 exited with code 3" in result.stdout
    assert_nothing_left(name)


def test_rank_failing_at_the_very_end(run_cli, write_job, distrun_home):
    # Every rank finishes its work; rank 3 then fails while saving, after the others exited 0.
    job = write_job(
        four_rank_job(
            'echo "rank $RANK trained"; if [ "$RANK" = 3 ]; then sleep 1; echo "rank 3 saving";'
            ' echo "disk quota exceeded" >&2; exit 4; fi'
        )
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "rank 3 on node 1 exited with code 4"
    procs = by_rank(rec)
    # The others completed on their own: exit 0, not stopped, not counted as failures.
    assert [(procs[r]["exit_code"], procs[r]["stopped_by_distrun"]) for r in (0, 1, 2)] == [(0, False)] * 3
    assert procs[3]["exit_code"] == 4
    assert log_of(distrun_home, name, 3) == b"rank 3 trained\nrank 3 saving\ndisk quota exceeded\n"
    for rank in (0, 1, 2):
        assert log_of(distrun_home, name, rank) == f"rank {rank} trained\n".encode()
    assert "Stopped by distrun" not in result.stdout
    assert_nothing_left(name)


@pytest.mark.parametrize(
    ("crash", "signal_name"),
    [
        ("import ctypes; ctypes.string_at(0)", "SIGSEGV"),  # a real invalid memory access
        ("import os; os.abort()", "SIGABRT"),
    ],
)
def test_rank_killed_by_a_signal_is_named(run_cli, write_job, distrun_home, crash, signal_name):
    job = write_job(
        four_rank_job(
            'if [ "$RANK" = 2 ]; then echo "rank 2 about to crash"; exec python -c "' + crash + '"; fi; exec sleep 60'
        )
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    cause = rec["root_cause"]
    assert (cause["rank"], cause["exit_code"], cause["signal"]) == (2, None, signal_name)
    assert rec["reason"] == f"rank 2 on node 1 was killed by {signal_name}"
    assert "out of memory" not in rec["reason"]  # only SIGKILL suggests that
    assert log_of(distrun_home, name, 2).startswith(b"rank 2 about to crash\n")
    assert f"Reason: rank 2 on node 1 was killed by {signal_name}" in result.stdout
    assert_nothing_left(name)


def test_one_hanging_rank_hits_the_timeout(run_cli, write_job, distrun_home):
    job = write_job(
        four_rank_job('echo "rank $RANK done"; if [ "$RANK" = 0 ]; then echo "rank 0 stuck"; sleep 600; fi')
    )
    result = run_cli("run", str(job), "--set", "limits.timeout=2")
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 2 s"
    procs = by_rank(rec)
    assert procs[0]["stopped_by_distrun"] and procs[0]["signal"] == "SIGTERM"
    assert [procs[r]["exit_code"] for r in (1, 2, 3)] == [0, 0, 0]
    assert log_of(distrun_home, name, 0) == b"rank 0 done\nrank 0 stuck\n"
    assert "Reason: timeout after 2 s" in result.stdout
    assert_nothing_left(name)


def test_rank_ignoring_sigterm_is_killed_after_the_grace_period(run_cli, write_job, distrun_home):
    job = write_job(
        four_rank_job(
            'if [ "$RANK" = 0 ]; then sleep 0.5; echo "rank 0 fails"; exit 9; fi; exec python ignore.py',
            grace=1.5,
        ),
        {
            "ignore.py": """
                import os, signal, sys, time
                def ignore(signum, frame):
                    print("rank", os.environ["RANK"], "ignores SIGTERM", flush=True)
                signal.signal(signal.SIGTERM, ignore)
                print("rank", os.environ["RANK"], "ready", flush=True)
                while True:
                    time.sleep(1)
            """
        },
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["root_cause"]["rank"] == 0 and rec["root_cause"]["exit_code"] == 9
    procs = by_rank(rec)
    cause_ms = rec["root_cause"]["after_ms"]
    for rank in (1, 2, 3):
        assert procs[rank]["signal"] == "SIGKILL" and procs[rank]["stopped_by_distrun"]
        # Killed only once the grace period had passed, never before.
        assert procs[rank]["after_ms"] - cause_ms >= 1500
        assert log_of(distrun_home, name, rank).endswith(f"rank {rank} ignores SIGTERM\n".encode())
    assert_nothing_left(name)


DAEMONIZE = """
    # The classic daemon: fork, setsid, fork again, close stdio, leave the working folder.
    import os, sys, time
    token = sys.argv[1]
    clear_env = sys.argv[2] == "clear-env"
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.chdir("/")
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            argv = ["sleep", "300." + token]
            if clear_env:
                os.execvpe("env", ["env", "-i", "PATH=/usr/bin:/bin", *argv], {})
            os.execvp("sleep", argv)
        os._exit(0)
    os.wait()
    print("daemon started", flush=True)
"""


@pytest.mark.parametrize("variant", ["keeps-env", "clear-env", "shell-background"])
@pytest.mark.parametrize("ending", ["completes", "fails"])
def test_daemonized_grandchildren_end_with_the_job(run_cli, write_job, distrun_home, variant, ending):
    token = str(random.randrange(10**8, 10**9))
    if variant == "shell-background":
        # A background job that leaves the session and keeps the output pipe open.
        start = f"(setsid sleep 300.{token} &); nohup setsid sleep 301.{token} > /dev/null 2>&1 &"
    else:
        start = f"python daemon.py {token} {variant};"
    finish = 'if [ "$RANK" = 1 ]; then sleep 1; exit 5; fi; sleep 30' if ending == "fails" else "sleep 0.5"
    job = write_job(four_rank_job(f"{start} echo rank $RANK working; {finish}"), {"daemon.py": DAEMONIZE})
    result = run_cli("run", str(job))
    assert result.returncode == (1 if ending == "fails" else 0), result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == ("Failed" if ending == "fails" else "Completed")
    for rank in range(4):
        assert f"rank {rank} working\n".encode() in log_of(distrun_home, name, rank)
    # Already gone when `distrun run` returns: no waiting here beyond the kernel's reaping.
    assert_nothing_left(name, token, within=1)


def test_rank_closing_its_stdout_early(run_cli, write_job, distrun_home):
    job = write_job(
        four_rank_job("exec python worker.py"),
        {
            "worker.py": """
                import os, sys, time
                rank = os.environ["RANK"]
                print("rank", rank, "before closing", flush=True)
                if rank == "1":
                    os.close(1)
                    os.close(2)
                    time.sleep(1.5)  # still working with no output at all
                    with open("outputs/rank1.txt", "w") as out:
                        out.write("finished")
                    os._exit(7)
                time.sleep(0.2)
                print("rank", rank, "done", flush=True)
            """,
            "outputs/.keep": "",
        },
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    # distrun waited for the process itself, not for its pipe: its exit is the root cause.
    assert rec["root_cause"]["rank"] == 1 and rec["root_cause"]["exit_code"] == 7
    assert (distrun_home / "jobs" / name / "code" / "outputs" / "rank1.txt").read_text() == "finished"
    assert log_of(distrun_home, name, 1) == b"rank 1 before closing\n"
    for rank in (0, 2, 3):
        assert log_of(distrun_home, name, rank) == f"rank {rank} before closing\nrank {rank} done\n".encode()
    assert_nothing_left(name)


def test_a_20_mb_line_without_newline(distrun_home, write_job):
    size = 20 * 1024 * 1024
    job = write_job(
        four_rank_job(
            'if [ "$RANK" = 0 ]; then python -c "import sys; sys.stdout.write(\'x\' * '
            + str(size)
            + ')"; else echo "rank $RANK fine"; fi'
        )
    )
    result = run_bytes(distrun_home, "run", str(job))
    assert result.returncode == 0, result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    log = log_of(distrun_home, name, 0)
    assert len(log) == size and log.count(b"x") == size  # the file keeps the line whole
    # The live stream passes it on in prefixed pieces (memory stays bounded); no byte is lost.
    pieces = [line[6:] for line in result.stdout.split(b"\n") if line.startswith(b"[0/0] ")]
    assert b"".join(pieces) == log
    assert b"[0/1] rank 1 fine\n" in result.stdout
    shown = run_bytes(distrun_home, "logs", name, "--rank", "0")
    assert shown.returncode == 0 and shown.stdout == log  # whole, byte for byte
    assert_nothing_left(name)


def test_binary_garbage_output(distrun_home, write_job):
    garbage = random.Random(20240601).randbytes(1 << 20)
    job = write_job(
        four_rank_job('if [ "$RANK" = 3 ]; then python garbage.py; else echo "rank $RANK fine"; fi'),
        {
            "garbage.py": """
                import random, sys
                sys.stdout.buffer.write(random.Random(20240601).randbytes(1 << 20))
                sys.stdout.buffer.flush()
                raise RuntimeError("after the garbage")
            """
        },
    )
    result = run_bytes(distrun_home, "run", str(job))
    assert result.returncode == 1, result.stderr
    name = only_job(distrun_home)
    log = log_of(distrun_home, name, 3)
    # Byte for byte: no decoding, no newline translation, nothing dropped.
    assert hashlib.sha256(log[: len(garbage)]).digest() == hashlib.sha256(garbage).digest()
    assert log[len(garbage) :].endswith(b"RuntimeError: after the garbage\n")
    rec = show(distrun_home, name)
    assert rec["status"] == "Failed" and rec["root_cause"]["rank"] == 3
    assert rec["root_cause"]["traceback"].endswith("RuntimeError: after the garbage")
    shown = run_bytes(distrun_home, "logs", name, "--rank", "3")
    assert shown.returncode == 0 and shown.stdout == log
    everything = run_bytes(distrun_home, "logs", name)
    assert everything.returncode == 0 and b"[0/1] rank 1 fine\n" in everything.stdout
    assert b"Traceback" not in result.stderr + shown.stderr + everything.stderr
    assert_nothing_left(name)
