"""Ranges and counters: values no process can have, counters that run long, modes under any
umask, and a folder that went away under distrun.

- `limits.no_restart_exit_codes` holds exit statuses (0-255): anything else is a validation
  error at file:line, never a setting that silently never matches.
- The pause before restart number k is computed for any k (2 ** 1024 is past a float).
- A job that restarts many times keeps the logs of its last KEPT_ATTEMPTS attempts only.
- Under umask 000 nothing distrun creates in DISTRUN_HOME (the index, config.yaml, data asset
  records, a job's folder, its logs and node outcomes) is writable by others.
- A deleted current folder, or a code folder deleted after the job was read, is a clear error.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError
from distrun.restarts.attempt_logs import KEPT_ATTEMPTS, keep_attempt_logs
from distrun.restarts.policy import BACKOFF_MAX_S, backoff_seconds
from support.cli import distrun_cli
from support.reliability import assert_refused, job_file


@pytest.mark.parametrize(("codes", "column"), [("[2, 256]", 30), ("[-1]", 27), ("[70000]", 27)])
def test_exit_codes_outside_0_255_are_refused_at_their_line(run_cli, write_job, codes: str, column: int) -> None:
    job = write_job(f"command: 'true'\nlimits:\n  max_restarts: 2\n  no_restart_exit_codes: {codes}\n")
    done = run_cli("job", "validate", "-f", str(job))
    assert_refused(done, f"job.yml:4:{column}: limits.no_restart_exit_codes[", "255" if "-" not in codes else "0")


def test_exit_codes_0_to_255_are_taken(run_cli, write_job) -> None:
    job = write_job("command: 'true'\nlimits:\n  max_restarts: 2\n  no_restart_exit_codes: [0, 1, 137, 255]\n")
    done = run_cli("job", "validate", "-f", str(job))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("restart", [1, 5, 1025, 10**6])
def test_the_backoff_is_bounded_for_any_restart_number(restart: int, monkeypatch) -> None:
    monkeypatch.setenv("DISTRUN_RESTART_BACKOFF_SCALE", "1")
    pause = backoff_seconds(restart)
    assert 1.0 <= pause <= BACKOFF_MAX_S
    assert pause == (2.0 ** (restart - 1) if restart <= 4 else BACKOFF_MAX_S)  # 1, 2, 4, 8, then 10


def test_only_the_last_attempts_keep_their_logs(tmp_path: Path) -> None:
    user_logs = tmp_path / "user_logs"
    user_logs.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the job's")
    for attempt in range(KEPT_ATTEMPTS + 15):
        (user_logs / "std_log_process_00.txt").write_text(f"attempt {attempt}\n")
        if attempt == 3:  # the job planted a link under the name of a later attempt's folder
            (user_logs / "attempt_4").symlink_to(outside)
        keep_attempt_logs(user_logs, attempt)
    kept = sorted(int(p.name.split("_")[1]) for p in user_logs.iterdir() if p.name.startswith("attempt_"))
    assert kept == list(range(15, KEPT_ATTEMPTS + 15))
    assert (user_logs / f"attempt_{KEPT_ATTEMPTS + 14}" / "std_log_process_00.txt").read_text() == (
        f"attempt {KEPT_ATTEMPTS + 14}\n"
    )
    assert (outside / "keep.txt").read_text() == "not the job's"  # a planted link is removed, not followed


def _writable_by_others(root: Path) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & stat.S_IWOTH:
                found.append(f"{path.relative_to(root)} {stat.filemode(info.st_mode)}")
    return found


def test_nothing_distrun_creates_is_writable_by_others_under_umask_000(tmp_path: Path, write_job) -> None:
    home = tmp_path / "home"
    job = write_job("command: echo hi\ncode: src\n", files={"a.py": "print(1)\n"})
    umask_000 = {"preexec_fn": lambda: os.umask(0)}
    for args in (
        ["run", str(job), "--name", "umask"],
        ["data", "create", "--name", "ds", "--path", str(tmp_path)],
        ["env", "create", "--name", "py", "--python", sys.executable],
        ["compute", "create", "--name", "cluster", "--type", "slurm", "--set", "partition=debug"],
        ["job", "list"],
    ):
        done = distrun_cli(home, *args, env={"DISTRUN_MLFLOW": "0"}, **umask_000)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
    assert (home / "jobs" / "umask" / "user_logs" / "std_log_process_00.txt").exists()
    assert _writable_by_others(home) == []


def test_a_deleted_current_folder_is_a_clear_error(tmp_path: Path, write_job, distrun_home: Path) -> None:
    job = write_job("command: echo hi\ncode: src\n")
    gone = tmp_path / "gone"
    for args in (["run", str(job)], ["data", "create", "--name", "ds", "--path", str(tmp_path)]):
        gone.mkdir()
        done = distrun_cli(distrun_home, *args, cwd=gone, preexec_fn=lambda: os.rmdir(os.getcwd()))
        assert_refused(done, "the current folder no longer exists", "cd into a folder that exists")


def test_a_code_folder_deleted_after_the_job_was_read_is_a_clear_error(tmp_path: Path, distrun_home: Path) -> None:
    import shutil

    from distrun.loading.loader import load_job_file
    from distrun.prepare.compute import resolve_target
    from distrun.prepare.submission import prepare_job
    from distrun.store.layout import Layout

    job = job_file(tmp_path / "spec", "command: echo hi\ncode: src\n", files={"a.py": "print(1)\n"})
    loaded = load_job_file(job)
    shutil.rmtree(tmp_path / "spec" / "src")
    layout = Layout()
    with pytest.raises(DistrunError, match="no longer exists"):
        prepare_job(loaded, layout, resolve_target("local", layout.config_path), "nocode")
