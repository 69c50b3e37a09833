"""Azure ML's per-process logs of a parallel step (`distrun.agent.parallel_logs`) where the job's
processes can write: a link planted at a log's name is never written through, a log stops
growing at its limit while the rank's own output gets everything, and a summary that cannot be
written is said once without failing the step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distrun.agent import parallel_logs
from distrun.agent.parallel_logs import BoundedLog, EntryLogs
from distrun.agent.parallel_queue import Queue
from distrun.agent.parallel_report import Progress, leave_summaries


def test_a_planted_link_is_not_written_through(tmp_path: Path) -> None:
    job = tmp_path / "job"
    outside = tmp_path / "outside.txt"
    outside.write_text("kept\n")
    folder = job / "code" / "logs" / "user" / "stdout" / "node0"
    folder.mkdir(parents=True)
    (folder / "process000.stdout.txt").symlink_to(outside)
    log = BoundedLog(job, "code/logs/user/stdout/node0/process000.stdout.txt")
    log.write(b"from the entry script\n")
    log.close()
    assert outside.read_text() == "kept\n"
    (folder.parent).rename(tmp_path / "moved")  # a planted folder link on the way is not followed either
    (job / "code" / "logs" / "user" / "stdout").symlink_to(tmp_path / "moved")
    BoundedLog(job, "code/logs/user/stdout/node0/process001.stdout.txt").write(b"x")
    assert not (tmp_path / "moved" / "node0" / "process001.stdout.txt").exists()


def test_output_reaches_the_rank_whole_and_the_file_up_to_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(parallel_logs, "MAX_LOG_BYTES", 1 << 20)
    monkeypatch.setenv("NODE_RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "2")
    logs = EntryLogs(tmp_path)
    stdout, stderr = logs.streams_pair()
    line = b"y" * 1023 + b"\n"
    for _ in range(1500):  # 1.5 MB, past the 1 MB limit
        os.write(stdout, line)
    os.write(stderr, b"a warning\n")
    logs.close()
    captured = capfd.readouterr()
    assert captured.out.count("y" * 1023) == 1500 and captured.err == "a warning\n"
    kept = (tmp_path / "code/logs/user/stdout/node1/process002.stdout.txt").read_bytes()
    assert kept.startswith(line * 1024) and kept.endswith(b"the rest is in the rank's log, user_logs/\n")
    assert len(kept) < (1 << 20) + 200
    assert (tmp_path / "code/logs/user/stderr/node1/process002.stderr.txt").read_text() == "a warning\n"


def test_a_summary_that_cannot_be_written_is_said_once_and_the_step_goes_on(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    job.mkdir()
    elsewhere = tmp_path / "image-code"
    elsewhere.mkdir()
    (job / "code").symlink_to(elsewhere)  # `code` a link: a code folder in the image, or a planted one
    progress = Progress(Queue(job / "parallel", 2), 2, job)
    progress.tick(force=True)
    progress.tick(force=True)
    leave_summaries(progress.queue, job, None, "parallel_run_step.txt")
    err = capfd.readouterr().err
    assert err.count("code/logs/job_progress_overview.txt not written") == 1
    assert "code/logs/user/error.txt not written" in err
    assert not list(elsewhere.iterdir())
