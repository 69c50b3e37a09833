"""Restarts and preemption on local compute: real ranks, real signals, the record and the logs.

The restart decision itself is pure (`distrun.restarts.policy.decide`): tests/unit/test_restart_decision.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from distrun.restarts.policy import backoff_seconds
from distrun.runner.jobs import cancel_job
from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from support.jobs import processes_of_job, record, wait_for
from support.restart_jobs import CHECKPOINTS, FAIL_ONCE, RANKS, with_limits

# ---------------------------------------------------------------- jobs that restart


def job_folder(home: Path, name: str) -> Path:
    return home / "jobs" / name


def test_a_rank_failing_on_the_first_attempt_only_completes_on_the_second(run_cli, write_job, distrun_home):
    job = write_job(with_limits(FAIL_ONCE, "max_restarts: 2"))
    done = run_cli("run", str(job), "--name", "once")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"distrun: attempt 0 failed: restart 1 of 2: attempt 1 starts in {backoff_seconds(1):g} s" in done.stdout
    assert "Attempts: 2\n  attempt 0: Failed, rank 1 on node 0 exited with code 3\n" in done.stdout
    rec = record(distrun_home, "once")
    assert rec["status"] == "Completed"
    attempts = rec["attempts"]
    assert [(a["attempt"], a["status"], a["restarted"]) for a in attempts] == [
        (0, "Failed", True),
        (1, "Completed", False),
    ]
    assert attempts[0]["root_cause"]["name"] == "rank_1" and attempts[0]["root_cause"]["exit_code"] == 3
    logs = job_folder(distrun_home, "once") / "user_logs"
    assert attempts[0]["logs"] == "user_logs/attempt_0" and attempts[1]["logs"] == "user_logs"
    assert attempts[0]["root_cause"]["log"] == str(logs / "attempt_0" / "std_log_process_01.txt")
    # Both attempts' logs are kept: the latest in user_logs/, the first beside it.
    assert (logs / "attempt_0" / "std_log_process_01.txt").read_text() == "rank 1 attempt 0 0\n"
    assert (logs / "std_log_process_01.txt").read_text() == "rank 1 attempt 1 1\n"
    assert (logs / "std_log_process_00.txt").read_text() == "rank 0 attempt 1 1\n"


def test_max_restarts_on_the_command_line(run_cli, write_job, distrun_home):
    job = write_job(with_limits(FAIL_ONCE))
    done = run_cli("run", str(job), "--name", "cli", "--max-restarts", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(record(distrun_home, "cli")["attempts"]) == 2


def test_a_no_restart_exit_code_fails_at_once(run_cli, write_job, distrun_home):
    job = write_job(with_limits(FAIL_ONCE, "max_restarts: 2", "no_restart_exit_codes: [3]"))
    done = run_cli("run", str(job), "--name", "final")
    assert done.returncode == 1, done.stdout + done.stderr
    rec = record(distrun_home, "final")
    assert rec["status"] == "Failed"
    assert rec["reason"] == (
        "rank 1 on node 0 exited with code 3; not restarted: exit code 3 is in limits.no_restart_exit_codes"
    )
    assert [a["status"] for a in rec["attempts"]] == ["Failed"]
    assert not (job_folder(distrun_home, "final") / "user_logs" / "attempt_0").exists()


def _start(write_job, start_cli, distrun_home: Path, name: str, *limits: str) -> subprocess.Popen[str]:
    proc = start_cli("run", str(write_job(with_limits(CHECKPOINTS, *limits, grace=20))), "--name", name)
    logs = job_folder(distrun_home, name) / "user_logs"

    def both_up() -> bool:
        return all(
            (logs / f"std_log_process_0{rank}.txt").is_file()
            and "attempt 0" in (logs / f"std_log_process_0{rank}.txt").read_text()
            for rank in RANKS
        )

    wait_for(both_up, timeout=120)
    return proc


def test_sigterm_from_outside_preempts_and_restarts_the_job(start_cli, write_job, distrun_home):
    proc = _start(write_job, start_cli, distrun_home, "spot", "max_restarts: 1")
    proc.send_signal(signal.SIGTERM)  # a spot eviction, Slurm preemption: not `job cancel`
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, output
    assert "distrun: SIGTERM from outside: the job is preempted; every process gets 20 s to save its work" in output
    rec = record(distrun_home, "spot")
    assert rec["status"] == "Completed", rec
    attempts = rec["attempts"]
    assert [(a["status"], a["reason"]) for a in attempts] == [
        ("Preempted", "preempted (SIGTERM from outside)"),
        ("Completed", "all processes completed"),
    ]
    logs = job_folder(distrun_home, "spot") / "user_logs"
    for rank in RANKS:
        # Every rank had the grace period to save its checkpoint, and attempt 1 resumed from it.
        assert (logs / "attempt_0" / f"std_log_process_0{rank}.txt").read_text().endswith("saved\n")
        assert (logs / f"std_log_process_0{rank}.txt").read_text() == f"rank {rank} attempt 1 resumed True\n"


def test_preemptions_beyond_max_preemptions_end_the_job_preempted(start_cli, write_job, distrun_home):
    proc = _start(write_job, start_cli, distrun_home, "evicted", "max_restarts: 3", "max_preemptions: 0")
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, output
    rec = record(distrun_home, "evicted")
    assert rec["status"] == "Preempted", rec
    assert rec["reason"] == "preempted (SIGTERM from outside); preempted 1 time(s); limits.max_preemptions is 0"
    assert all(p["stopped_by_distrun"] for p in rec["processes"])  # not a rank failure


def test_a_rank_exiting_on_the_preemptions_sigterm_before_distrun_sees_it_is_not_a_failure(
    start_cli, write_job, distrun_home
):
    # A preemption that signals every process (Slurm's own, `kill` of the whole session): the
    # ranks' checkpoint handlers may exit 143 before distrun handles its own SIGTERM. Held
    # stopped, distrun finds both the ranks' exits and its signal waiting: the signal decides.
    proc = _start(write_job, start_cli, distrun_home, "evicted_all", "max_restarts: 3", "max_preemptions: 0")
    ranks = [pid for pid in processes_of_job("evicted_all") if pid != proc.pid]
    assert len(ranks) == len(RANKS)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        for pid in ranks:
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not set(ranks) & set(processes_of_job("evicted_all")), timeout=30)  # all exited
        os.kill(proc.pid, signal.SIGTERM)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    output = proc.communicate(timeout=120)[0]
    rec = record(distrun_home, "evicted_all")
    assert rec["status"] == "Preempted", output
    assert rec["reason"] == "preempted (SIGTERM from outside); preempted 1 time(s); limits.max_preemptions is 0"
    assert [p["exit_code"] for p in rec["processes"]] == [143] * len(RANKS)
    logs = job_folder(distrun_home, "evicted_all") / "user_logs"
    assert all((logs / f"std_log_process_0{rank}.txt").read_text().endswith("saved\n") for rank in RANKS)


def test_job_cancel_still_cancels_a_job_with_restarts(start_cli, write_job, distrun_home):
    proc = _start(write_job, start_cli, distrun_home, "stop_it", "max_restarts: 3")
    answered = cancel_job(Layout(distrun_home), "stop_it")
    output = proc.communicate(timeout=120)[0]
    assert answered.status == "Canceled" and answered.reason == "canceled (SIGTERM)", output
    assert proc.returncode == 130, output
    assert [a["status"] for a in JobIndex(distrun_home / "jobs.db").get("stop_it").attempts or []] == ["Canceled"]


def test_an_older_index_gains_the_attempts_and_target_columns(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "jobs.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE jobs (name TEXT PRIMARY KEY, status TEXT NOT NULL, display_name TEXT, experiment_name TEXT,"
            " compute TEXT NOT NULL, distribution TEXT, folder TEXT NOT NULL, created_at REAL NOT NULL,"
            " started_at REAL, ended_at REAL, reason TEXT, root_cause TEXT, processes TEXT, launcher_pid INTEGER,"
            " launcher_host TEXT, launcher_started REAL, backend_id TEXT, tags TEXT)"
        )
        conn.execute(
            "INSERT INTO jobs (name, status, compute, folder, created_at) VALUES ('old', 'Completed', 'local', '/x', 1)"
        )
    index = JobIndex(db)
    assert index.get("old").attempts is None
    index.update("old", only_if_not_terminal=False, attempts=[{"attempt": 0}])
    assert index.get("old").attempts == [{"attempt": 0}]
    assert json.loads(json.dumps(index.get("old").to_dict()))["attempts"] == [{"attempt": 0}]
    assert index.get("old").target is None  # an older job: its target is read from config.yaml by name


def test_a_backend_that_cannot_restart_refuses_the_job_before_recording_it(run_cli, write_job, distrun_home):
    # Ray does not restart jobs yet (Slurm and local compute do: tests/engines/slurm/test_slurm_restarts.py).
    created = run_cli("compute", "create", "--name", "rc", "--type", "ray", "--set", "address=127.0.0.1:1")
    assert created.returncode == 0, created.stderr
    job = write_job(with_limits(FAIL_ONCE, "max_restarts: 2"))
    for verb in (["plan"], ["run"]):
        refused = run_cli(*verb, str(job), "--compute", "rc")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "compute target 'rc' (Ray) does not restart jobs yet" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not (distrun_home / "jobs.db").exists() or not JobIndex(distrun_home / "jobs.db").names()
