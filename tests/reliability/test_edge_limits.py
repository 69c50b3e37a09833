"""Limits at the edges (class 2): timeouts and grace periods of days, weeks or more than the OS
can wait, and a pinned MASTER_PORT that no socket can have.

A 30-day timeout is an ordinary training job; a value beyond what the kernel can wait for in one
call is clamped, never a crash of the supervisor. MASTER_PORT outside 1-65535 or not a number is
a validation error (with file:line:col), not a job that fails when its ranks try to bind it.
"""

from __future__ import annotations

import pytest

from support.reliability import assert_nothing_left, by_rank, record

DAY = 24 * 3600


@pytest.mark.parametrize(
    ("timeout", "grace"),
    [(30 * DAY, 14 * DAY), (1e300, 1e300), (365 * DAY, 0)],
    ids=["30-days-2-weeks", "beyond-any-wait", "a-year-no-grace"],
)
def test_long_limits_let_a_job_complete(run_cli, write_job, distrun_home, timeout, grace):
    job = write_job(
        f"""
        command: echo finished
        code: src
        limits:
          timeout: {timeout!r}
          grace_period: {grace!r}
        """
    )
    result = run_cli("run", str(job), "--name", "long", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "finished" in result.stdout
    assert record(distrun_home, "long")["status"] == "Completed"


def test_a_failure_under_a_grace_period_of_weeks_still_ends_the_job(run_cli, write_job, distrun_home):
    """The failing rank starts the stop; the other rank ends on SIGTERM, so nobody waits the grace period."""
    job = write_job(
        """
        command: >-
          python -c "import os, sys, time; time.sleep(0.5);
          sys.exit(5) if os.environ['RANK'] == '0' else time.sleep(600)"
        code: src
        distribution:
          type: pytorch
          process_count_per_instance: 2
        limits:
          timeout: 3e9
          grace_period: 1.5e9
        """
    )
    result = run_cli("run", str(job), "--name", "weeks", timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    rec = record(distrun_home, "weeks")
    assert rec["status"] == "Failed"
    ranks = by_rank(rec)
    assert ranks[0]["exit_code"] == 5
    assert ranks[1]["stopped_by_distrun"] and ranks[1]["signal"] == "SIGTERM"
    assert_nothing_left("weeks")


def test_a_timeout_of_days_is_still_enforced_next_to_a_short_one(run_cli, write_job, distrun_home):
    job = write_job(
        """
        command: sleep 600
        code: src
        limits:
          timeout: 2
          grace_period: 1e12
        """
    )
    result = run_cli("run", str(job), "--name", "short", timeout=120)
    assert result.returncode == 1
    rec = record(distrun_home, "short")
    assert rec["status"] == "Failed" and "timeout after 2 s" in rec["reason"]
    assert_nothing_left("short")


@pytest.mark.parametrize("port", ["0", "65536", "-1", "29500x", "1e4", "٣٣٣"])
def test_master_port_that_no_socket_can_have_is_a_validation_error(run_cli, write_job, distrun_home, port):
    job = write_job(f"command: echo hi\nenvironment_variables:\n  MASTER_PORT: '{port}'\n")
    result = run_cli("run", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "job.yml:3:3: environment_variables.MASTER_PORT: MASTER_PORT must be a TCP port number" in result.stderr
    assert not (distrun_home / "jobs").exists()  # refused before anything was recorded


def test_a_pinned_master_port_in_range_is_used(run_cli, write_job):
    job = write_job("command: echo port=$MASTER_PORT\nenvironment_variables:\n  MASTER_PORT: 29517\n")
    result = run_cli("run", str(job))
    assert result.returncode == 0, result.stderr
    assert "port=29517" in result.stdout
