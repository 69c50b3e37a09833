"""Node 0's agent of a Spark job on Slurm follows the executors' files under `spark-cluster/` into
the job's `user_logs/std_log_executor_N.txt`: whole lines, the last ones too, and nothing through
a link the job planted (`distrun.backends.slurm.spark_executor_logs`)."""

from __future__ import annotations

import os
from pathlib import Path

from distrun.backends.slurm.spark_executor_logs import WorkFolderExecutorLogs


def executor_folder(job_dir: Path, work: str, app: str, executor: str) -> Path:
    folder = job_dir / "spark-cluster" / work / app / executor
    folder.mkdir(parents=True)
    return folder


def test_each_executors_files_become_its_log_in_whole_lines_to_the_last(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    (job_dir / "user_logs").mkdir(parents=True)
    zero = executor_folder(job_dir, "work_00", "app-20261207000000-0000", "0")
    one = executor_folder(job_dir, "work_01", "app-20261207000000-0000", "1")
    (zero / "stdout").write_bytes(b"out one\nout tw")  # a line not yet whole
    (zero / "stderr").write_bytes(b"err one\n")
    follower = WorkFolderExecutorLogs(job_dir)
    assert follower._pass()  # what a pass of the running job reads
    with open(zero / "stdout", "ab") as handle:
        handle.write(b"o\nlast words")  # the executor's last line, with no newline
    (one / "stdout").write_bytes(b"executor one\n")
    follower.start().stop()  # the job ended: the rest is read before the follower ends
    zero_log = (job_dir / "user_logs" / "std_log_executor_0.txt").read_bytes()
    assert sorted(zero_log.splitlines()) == [b"err one", b"last words", b"out one", b"out two"]
    assert zero_log.endswith(b"\n")
    assert (job_dir / "user_logs" / "std_log_executor_1.txt").read_bytes() == b"executor one\n"


def test_a_planted_link_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    (job_dir / "user_logs").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    secret = executor_folder(elsewhere, "work_00", "app-1", "5")
    (secret / "stdout").write_bytes(b"not the job's\n")
    (job_dir / "spark-cluster").mkdir()
    os.symlink(elsewhere / "spark-cluster" / "work_00", job_dir / "spark-cluster" / "work_00")  # a folder
    linked = executor_folder(job_dir, "work_01", "app-1", "6")
    os.symlink(secret / "stdout", linked / "stdout")  # a file
    target = tmp_path / "target.txt"
    target.write_bytes(b"")
    os.symlink(target, job_dir / "user_logs" / "std_log_executor_7.txt")  # where executor 7's log goes
    (executor_folder(job_dir, "work_02", "app-1", "7") / "stdout").write_bytes(b"seven\n")
    (job_dir / "spark-cluster" / "work_02" / "app-1" / "not-an-executor").mkdir()
    follower = WorkFolderExecutorLogs(job_dir)
    follower.start().stop()
    assert not (job_dir / "user_logs" / "std_log_executor_5.txt").exists()
    assert not (job_dir / "user_logs" / "std_log_executor_6.txt").exists()
    assert target.read_bytes() == b""
