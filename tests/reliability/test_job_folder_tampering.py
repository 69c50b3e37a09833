"""A job that tampers with its own job folder (class 1 of the hostile-job pass).

Its processes can write the folder: they replace plan.json, job.json or their own log with a
named pipe, a link to a device or a link to a file outside the folder, and plant log names of
ranks that do not exist. Whatever they do, the supervisor and every reader (`logs`, `job
stream`, `job show`, `job cancel`) end, read nothing outside the folder, keep other files'
contents out of the summary and the record, and stay within a bounded amount of memory.
"""

from __future__ import annotations

import os

import pytest

from support.jobs import wait_for
from support.reliability import assert_nothing_left, only_job, record, run_capped, wait_running

READER_TIMEOUT = 90


def reader(home, *args: str):  # type: ignore[no-untyped-def]
    """A distrun command with a memory cap; a hang fails the test (TimeoutExpired) instead of the suite."""
    return run_capped(home, *args, timeout=READER_TIMEOUT, text=False)


def _readers_end_cleanly(home, name: str) -> dict[str, bytes]:
    shown = {}
    for args in (
        ["logs", name],
        ["logs", name, "--rank", "0"],
        ["logs", name, "--tail", "3"],
        ["job", "stream", name],
        ["job", "show", name],
    ):
        done = reader(home, *args)
        assert b"Traceback" not in done.stderr, (args, done.stderr[-2000:])
        assert b"MemoryError" not in done.stderr, args
        shown[" ".join(args)] = done.stdout + done.stderr
    return shown


@pytest.mark.parametrize(
    "tampering",
    [
        "rm plan.json job.json && mkfifo plan.json job.json",
        "ln -sf /dev/zero plan.json && ln -sf /dev/urandom job.json",
        "truncate -s 8G plan.json",
        "rm plan.json && mknod plan.json c 1 5",
    ],
    ids=["named-pipes", "links-to-devices", "an-8-GB-plan", "a-device-node"],
)
def test_metadata_the_job_replaced_hangs_no_reader_and_stays_bounded(run_cli, write_job, distrun_home, tampering):
    job = write_job(f"""command: echo honest line; cd "$DISTRUN_JOB_DIR" && {tampering}\ncode: src\n""")
    result = run_cli("run", str(job), "--name", "tampered", timeout=READER_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = _readers_end_cleanly(distrun_home, "tampered")
    assert b"honest line" in shown["logs tampered --rank 0"]
    assert b"honest line" in shown["logs tampered"]


def test_cancel_ends_when_job_json_is_a_named_pipe(start_cli, write_job, distrun_home):
    job = write_job(
        """
        command: >-
          cd "$DISTRUN_JOB_DIR" && rm job.json && mkfifo job.json && echo swapped && sleep 300
        code: src
        limits:
          grace_period: 2
        """
    )
    start_cli("run", str(job), "--name", "cancelme")
    wait_running(distrun_home, "cancelme")
    log = distrun_home / "jobs" / "cancelme" / "user_logs" / "std_log_process_00.txt"
    wait_for(lambda: log.exists() and b"swapped" in log.read_bytes(), timeout=60)
    done = reader(distrun_home, "job", "cancel", "cancelme")
    assert done.returncode == 0, done.stderr
    assert record(distrun_home, "cancelme")["status"] == "Canceled"
    assert_nothing_left("cancelme")


def test_a_log_swapped_for_a_link_does_not_put_another_file_in_the_record(run_cli, write_job, distrun_home, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text('Traceback (most recent call last):\n  File "x"\nSecretError: SECRET-CONTENT\n')
    job = write_job(
        f"""
        command: >-
          python -c "raise ValueError('the real failure')" ;
          cd "$DISTRUN_JOB_DIR/user_logs" && ln -sf {outside} std_log_process_00.txt; exit 3
        code: src
        """
    )
    result = run_cli("run", str(job), "--name", "linked", timeout=READER_TIMEOUT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "SECRET" not in result.stdout + result.stderr
    rec = record(distrun_home, "linked")
    assert rec["status"] == "Failed"
    assert "SECRET" not in str(rec)
    assert "ValueError: the real failure" in rec["root_cause"]["traceback"]
    shown = _readers_end_cleanly(distrun_home, "linked")
    assert all(b"SECRET" not in text for text in shown.values())


def test_a_log_swapped_for_a_named_pipe_does_not_hang_the_supervisor(run_cli, write_job, distrun_home):
    job = write_job(
        """
        command: >-
          echo before; cd "$DISTRUN_JOB_DIR/user_logs" && rm std_log_process_00.txt && mkfifo std_log_process_00.txt;
          exit 4
        code: src
        """
    )
    result = run_cli("run", str(job), "--name", "fifolog", timeout=READER_TIMEOUT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    rec = record(distrun_home, "fifolog")
    assert rec["status"] == "Failed" and rec["root_cause"]["exit_code"] == 4
    _readers_end_cleanly(distrun_home, "fifolog")


def test_planted_log_names_of_other_ranks_are_never_read_through(run_cli, write_job, distrun_home, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET-CONTENT\n")
    job = write_job(
        f"""
        command: >-
          echo honest line; cd "$DISTRUN_JOB_DIR/user_logs" && mkfifo std_log_process_05.txt
          && ln -s /dev/zero std_log_process_06.txt && ln -s {outside} std_log_process_07.txt
          && mknod std_log_process_08.txt c 1 5 && ln {outside} std_log_process_09.txt 2>/dev/null; true
        code: src
        """
    )
    result = run_cli("run", str(job), "--name", "planted_names", timeout=READER_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    shown = _readers_end_cleanly(distrun_home, name)
    assert b"honest line" in shown[f"logs {name}"]
    assert b"SECRET" not in shown[f"logs {name} --rank 0"]
    assert_nothing_left(name)
    assert os.path.exists(outside) and outside.read_text() == "SECRET-CONTENT\n"
