"""A failed job shows its cause: the log's last lines without a traceback, whole multi-line
messages, only processes distrun signalled listed as stopped, a Duration that covers them."""

from __future__ import annotations

import os
import signal
import time

from distrun.core.errors import JobFailedError
from support.jobs import four_rank_job, only_job, processes_of_job, record, recorded_job, wait_for


def test_a_failure_without_a_traceback_shows_the_last_lines_of_the_log(run_cli, write_job, distrun_home):
    job = write_job("command: python trian.py\ncode: src\n", {"train.py": "print('hi')\n"})
    result = run_cli("run", str(job))
    assert result.returncode == 1, result.stderr
    assert "Last lines of its log:" in result.stdout
    assert "can't open file" in result.stdout and "trian.py" in result.stdout
    cause = record(distrun_home, only_job(distrun_home))["root_cause"]
    assert "can't open file" in cause["log_tail"] and cause["traceback"] == ""
    error = JobFailedError(only_job(distrun_home), "Failed", cause)  # what the SDK raises
    assert "can't open file" in error.log_tail


def test_a_multi_line_exception_message_is_kept_whole(run_cli, write_job):
    job = write_job(
        "command: python fail.py\ncode: src\n",
        {"fail.py": "raise ValueError('config is invalid:\\n  lr must be positive\\nbatch_size is missing')\n"},
    )
    out = run_cli("run", str(job)).stdout
    assert "  ValueError: config is invalid:\n    lr must be positive\n  batch_size is missing" in out
    assert "Last lines of its log:" not in out


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read()
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"T"


def test_ranks_that_fail_in_the_same_instant_are_not_marked_stopped(start_cli, write_job, distrun_home):
    # Ranks 1 and 2 exit with code 3 while distrun is paused (SIGSTOP), so that when it reads
    # the first exit the second rank has already ended too: distrun's SIGTERM reaches a process
    # that is gone, and that rank failed by itself.
    script = """
        import os, sys, time
        rank = int(os.environ["RANK"])
        go = os.path.join(os.environ["DISTRUN_JOB_DIR"], "go")
        if rank in (1, 2):
            while not os.path.exists(go):
                time.sleep(0.05)
            sys.exit(3)
        time.sleep(120)
    """
    job = write_job(four_rank_job("python rank.py"), {"rank.py": script})
    proc = start_cli("run", str(job))
    try:
        name = wait_for(lambda: recorded_job(distrun_home), timeout=120)
        wait_for(lambda: len(processes_of_job(name)) == 4, timeout=120)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: _stopped(proc.pid))
        (distrun_home / "jobs" / name / "go").write_text("")
        wait_for(lambda: len(processes_of_job(name)) == 2, timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    procs = {p["name"]: p for p in record(distrun_home, name)["processes"]}
    for rank in ("rank_1", "rank_2"):
        assert procs[rank]["exit_code"] == 3 and not procs[rank]["stopped_by_distrun"], procs[rank]
    for rank in ("rank_0", "rank_3"):
        assert procs[rank]["stopped_by_distrun"] and procs[rank]["signal"] == "SIGTERM", procs[rank]
    assert "Stopped by distrun: rank_0, rank_3\n" in out
    duration = float(out.split("Duration: ")[1].split(" s")[0])
    after = float(out.split("Failed first: ")[1].split(" after ")[1].split(" s")[0])
    assert duration >= after
