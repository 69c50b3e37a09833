"""A full filesystem under the job folder, and under the job index itself.

Each test mounts a small tmpfs (root is needed: `mount -t tmpfs`; the suite runs as root in
CI) and unmounts it afterwards. The promises: a clear error naming the write that failed, a
record that says why when the index can be written, no traceback, no process left, and
nothing else broken once space is back.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.reliability import assert_nothing_left, only_job, record, show


@pytest.fixture
def small_filesystem() -> Iterator[Callable[[Path, str], Path]]:
    mounted: list[Path] = []

    def mount(path: Path, size: str = "2m") -> Path:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"these tests mount a tmpfs and need root: {done.stderr}"
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", str(path)], check=False)
        if os.path.ismount(path):
            subprocess.run(["umount", "-l", str(path)], check=False)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return distrun_cli(home, *args, timeout=120)


CHATTY = """
    command: >-
      {command}
    code: src
    resources:
      instance_count: 1
    distribution:
      type: pytorch
      process_count_per_instance: 2
    limits:
      grace_period: 2
"""


def fill_up(path: Path) -> None:
    """Write zeros to `path` until the filesystem holding it has no space left."""
    with path.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(bytes(4096))
        except OSError as error:
            assert error.errno == errno.ENOSPC, error


def chatty(command: str) -> str:
    return CHATTY.replace("{command}", command)


def test_log_filesystem_full_fails_the_job_with_the_write_error(write_job, distrun_home, small_filesystem):
    small_filesystem(distrun_home / "jobs")  # job folders on 2 MB; jobs.db stays on the big disk
    job = write_job(
        chatty(
            'if [ "$RANK" = 0 ]; then python -c "for i in range(200000): print(i, \'x\' * 40, flush=i % 1000 == 0)";'
            " else exec sleep 120; fi"
        )
    )
    result = run(distrun_home, "run", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    log = distrun_home / "jobs" / name / "user_logs" / "std_log_process_00.txt"
    assert rec["status"] == "Failed"
    assert rec["reason"] == f"cannot write {log}: No space left on device"
    assert f"Reason: cannot write {log}: No space left on device" in result.stdout
    # Every process stopped by distrun, none counted as the failure.
    assert all(p["stopped_by_distrun"] for p in rec["processes"])
    assert_nothing_left(name)
    # What was written is whole lines up to the point the disk filled: nothing garbled before it.
    lines = log.read_bytes().split(b"\n")[:-1]
    assert lines and all(line == f"{i} {'x' * 40}".encode() for i, line in enumerate(lines))
    # Nothing else broken: the index answers, and once space is back a job runs.
    listed = run(distrun_home, "job", "list", "--output", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["status"] == "Failed"
    log.unlink()
    again = run(distrun_home, "run", str(write_job(chatty("echo rank $RANK fine"))))
    assert again.returncode == 0, again.stdout + again.stderr


def test_code_snapshot_that_does_not_fit(write_job, distrun_home, small_filesystem):
    small_filesystem(distrun_home / "jobs")
    job = write_job(chatty("echo never"), {"weights.bin": "w" * (3 << 20)})
    result = run(distrun_home, "run", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "distrun: error: could not prepare the job folder: [Errno 28] No space left on device" in result.stderr
    assert "hint: check free space and permissions under DISTRUN_HOME" in result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and "No space left on device" in rec["reason"]
    assert rec["processes"] is None  # nothing started


def test_job_index_on_the_full_filesystem(write_job, distrun_home, small_filesystem):
    """jobs.db itself cannot grow: no traceback, a message that says the outcome, what failed
    and what to do, no process left; once space is back the record is final."""
    small_filesystem(distrun_home)
    # The ranks fill the disk, then print a line: its log write fails, which fails the job.
    job = write_job(chatty('head -c 3M /dev/zero > "$DISTRUN_JOB_DIR/fill$RANK" 2>/dev/null; echo rank $RANK done'))
    result = run(distrun_home, "run", str(job))
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode == 2, output
    name = next((distrun_home / "jobs").iterdir()).name
    assert (
        f"distrun: error: job {name} ended Failed (cannot write {distrun_home}/jobs/{name}/user_logs/" in result.stderr
    )
    assert "No space left on device), but its record could not be written" in result.stderr
    assert f"(the filesystem holding {distrun_home} is full)" in result.stderr
    assert "hint: free space there" in result.stderr
    assert_nothing_left(name)
    # Readers say the same while the disk is full, without a traceback. Whatever the run freed
    # as it exited (its temporary files) is taken again first, so the disk is surely still full.
    fill_up(distrun_home / "jobs" / name / "fill-rest")
    shown = run(distrun_home, "job", "show", name)
    assert shown.returncode == 2 and "is full" in shown.stderr and "Traceback" not in shown.stderr
    # Space back: the first reader makes the record final, and it does not claim success.
    for fill in (distrun_home / "jobs" / name).glob("fill*"):
        fill.unlink()
    rec = show(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"].startswith("launcher lost")
    again = run(distrun_home, "run", str(write_job(chatty("echo rank $RANK fine"))))
    assert again.returncode == 0, again.stdout + again.stderr
