"""Store damage (class 8): reported, not raised.

A malformed row in jobs.db, or jobs.db removed while a job runs, gives distrun's own message and
leaves a state to recover from: the other jobs still list, and the running job can still be
canceled by name (its processes are stopped, nothing is left).
"""

from __future__ import annotations

import sqlite3
import time

from support.reliability import assert_nothing_left, run_capped, wait_running


def _two_jobs(run_cli, write_job, distrun_home) -> None:  # type: ignore[no-untyped-def]
    job = write_job("command: echo hi\ncode: src\n")
    for name in ("good", "bad"):
        assert run_cli("run", str(job), "--name", name).returncode == 0


def _damage(distrun_home, sql: str) -> None:  # type: ignore[no-untyped-def]
    conn = sqlite3.connect(distrun_home / "jobs.db")
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_a_row_with_broken_json_is_reported_and_the_others_still_list(run_cli, write_job, distrun_home):
    _two_jobs(run_cli, write_job, distrun_home)
    _damage(distrun_home, "UPDATE jobs SET processes = '[{broken', tags = 'x' WHERE name = 'bad'")
    listed = run_capped(distrun_home, "job", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert '"good"' in listed.stdout and "Traceback" not in listed.stderr
    assert "bad" in listed.stderr and "damaged" in listed.stderr
    for args in (["job", "show", "bad"], ["job", "cancel", "bad"], ["logs", "bad"]):
        done = run_capped(distrun_home, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert "record of job 'bad' in" in done.stderr and "is damaged" in done.stderr, done.stderr


def test_a_row_with_values_of_the_wrong_type_is_reported(run_cli, write_job, distrun_home):
    _two_jobs(run_cli, write_job, distrun_home)
    _damage(distrun_home, "UPDATE jobs SET created_at = 'yesterday', launcher_pid = 'me' WHERE name = 'bad'")
    for args in (["job", "list"], ["job", "list", "-o", "json"]):
        listed = run_capped(distrun_home, *args)
        assert listed.returncode == 0, listed.stderr
        assert "good" in listed.stdout and "Traceback" not in listed.stderr
    shown = run_capped(distrun_home, "job", "show", "bad")
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert "created_at" in shown.stderr


def test_a_job_whose_index_was_removed_can_still_be_canceled_by_name(start_cli, write_job, distrun_home):
    job = write_job("command: sleep 600\ncode: src\nlimits:\n  grace_period: 2\n")
    proc = start_cli("run", str(job), "--name", "orphaned")
    wait_running(distrun_home, "orphaned")
    for suffix in ("", "-wal", "-shm"):
        (distrun_home / f"jobs.db{suffix}").unlink(missing_ok=True)
    listed = run_capped(distrun_home, "job", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    canceled = run_capped(distrun_home, "job", "cancel", "orphaned")
    assert canceled.returncode == 0, canceled.stdout + canceled.stderr
    assert "not in the job index" in canceled.stdout + canceled.stderr
    proc.wait(timeout=60)  # it ends: the cancel reached it
    assert_nothing_left("orphaned")
    # A name that is neither recorded nor running is still distrun's plain "no job named".
    missing = run_capped(distrun_home, "job", "cancel", "never_was")
    assert missing.returncode == 2 and "no job named 'never_was'" in missing.stderr


def test_a_job_whose_index_was_replaced_while_running_records_its_end(start_cli, write_job, distrun_home):
    job = write_job("command: sleep 3\ncode: src\n")
    proc = start_cli("run", str(job), "--name", "survivor")
    wait_running(distrun_home, "survivor")
    for suffix in ("", "-wal", "-shm"):
        (distrun_home / f"jobs.db{suffix}").unlink(missing_ok=True)
    assert proc.wait(timeout=120) == 0
    time.sleep(0.2)
    shown = run_capped(distrun_home, "job", "show", "survivor", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert '"status": "Completed"' in shown.stdout
