"""The engines', the metrics' and the parents' writes in a job folder: never through a link.

Each test plants a link where distrun makes a folder or a file (a rank can write its job folder)
and checks that nothing is made, written, moved or removed where the link points. The agents'
own writes are in tests/unit/test_job_folder_writes.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from distrun.backends.kubernetes.collect import collect_pod_log, collecting, keep_outcome
from distrun.backends.kubernetes.job_files import K8sPaths, note_cancel, show_attempt
from distrun.backends.kubernetes.output_records import OUTPUTS_MARK, receive
from distrun.backends.slurm.attempts import _write_attempts, set_aside_outcomes
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.supervised import start_detached
from distrun.core.errors import DistrunError
from distrun.core.file_modes import open_append_beneath, write_file_beneath
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.core.safe_files import UnsafeFileError
from distrun.metrics.tracking import note_metrics
from distrun.restarts.policy import keep_logs
from distrun.runner.detached_parent import start_supervisor
from distrun.runner.parent_record import record_parent
from distrun.store.index import JobIndex
from distrun.store.layout import JobFolder, Layout


@pytest.fixture
def job(tmp_path: Path) -> tuple[Path, Path]:
    """A job folder, and a folder outside it that a rank's links point to."""
    root, outside = tmp_path / "job", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def _plant(root: Path, name: str, outside: Path) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).symlink_to(outside)


def test_write_file_beneath_refuses_a_linked_folder_and_makes_missing_ones(job) -> None:
    root, outside = job
    _plant(root, "slurm", outside)
    with pytest.raises(UnsafeFileError, match="slurm is a symbolic link"):
        write_file_beneath(root, root / "slurm" / "batch.sh", b"#!/bin/sh\n")
    with pytest.raises(UnsafeFileError):
        os.close(open_append_beneath(root, root / "slurm" / "attempt_1" / "log.txt"))
    write_file_beneath(root, root / "k8s" / "outcomes" / "pod.json", b"{}")
    assert (root / "k8s" / "outcomes" / "pod.json").read_bytes() == b"{}"
    with pytest.raises(UnsafeFileError, match="not inside"):
        write_file_beneath(root, outside / "x", b"")
    assert list(outside.iterdir()) == []


def test_the_metrics_note_is_not_written_through_a_linked_system_logs(job) -> None:
    root, outside = job
    _plant(root, "system_logs", outside)
    note_metrics(JobFolder(root), "distrun: MLflow: a note")
    assert list(outside.iterdir()) == []


def test_slurm_attempts_and_outcomes_never_go_through_a_linked_slurm_folder(job) -> None:
    root, outside = job
    (outside / "node_0.json").write_text("{}")
    (outside / "preempted").write_text("")
    _plant(root, "slurm", outside)
    paths = SlurmPaths(root)
    with pytest.raises(UnsafeFileError):
        _write_attempts(paths, [{"attempt": 0}])
    with pytest.raises(UnsafeFileError):
        set_aside_outcomes(paths, 0)
    assert sorted(p.name for p in outside.iterdir()) == ["node_0.json", "preempted"]


def test_slurm_outcomes_move_into_a_real_attempt_folder_in_place_of_a_planted_link(job) -> None:
    root, outside = job
    (root / "slurm").mkdir()
    (root / "slurm" / "node_0.json").write_text("{}")
    (root / "slurm" / "preempted").write_text("")
    (root / "slurm" / "node_1.json").symlink_to(outside / "elsewhere.json")
    _plant(root, "slurm/attempt_0", outside)
    set_aside_outcomes(SlurmPaths(root), 0)
    kept = root / "slurm" / "attempt_0"
    assert kept.is_dir() and not kept.is_symlink()
    assert [p.name for p in kept.iterdir()] == ["node_0.json"]
    assert not (root / "slurm" / "preempted").exists()
    assert list(outside.iterdir()) == []


def test_keep_logs_replaces_a_dangling_link_at_user_logs(job) -> None:
    root, outside = job
    (root / "user_logs").symlink_to(outside / "gone")
    target = keep_logs(root / "user_logs", 0)
    assert target == root / "user_logs" / "attempt_0"
    assert (root / "user_logs").is_dir() and not (root / "user_logs").is_symlink()
    assert list(outside.iterdir()) == []
    assert keep_logs(root / "missing", 0) is None


def test_kubernetes_files_are_not_written_through_a_linked_k8s_folder(job) -> None:
    root, outside = job
    _plant(root, "k8s", outside)
    paths = K8sPaths(root)
    for write in (
        lambda: note_cancel(paths),
        lambda: show_attempt(paths, 1),
        lambda: keep_outcome(paths, "pod-0", {"exit_code": 0}),
        lambda: collecting(paths).__enter__(),
    ):
        with pytest.raises(UnsafeFileError):
            write()
    assert list(outside.iterdir()) == []


def test_kubernetes_pod_logs_are_not_appended_through_a_linked_user_logs(job) -> None:
    root, outside = job
    _plant(root, "user_logs", outside)
    paths = K8sPaths(root)
    with pytest.raises(UnsafeFileError, match="user_logs is a symbolic link"):
        collect_pod_log(JobFolder(root), paths, "pod-0", b"[0] hello\n", {"0": "std_log_process_0.txt"})
    assert list(outside.iterdir()) == []
    (root / "user_logs").unlink()
    collect_pod_log(JobFolder(root), paths, "pod-0", b"[0] hello\n", {"0": "std_log_process_0.txt"})
    assert (root / "user_logs" / "std_log_process_0.txt").read_bytes() == b"hello\n"


def test_kubernetes_output_archives_are_not_kept_through_a_linked_folder(job) -> None:
    root, outside = job
    _plant(root, "k8s/outputs", outside)
    header = f"{OUTPUTS_MARK}{json.dumps({'bytes': 1, 'sha256': '00'})}\n".encode()
    with pytest.raises(UnsafeFileError):
        receive(header, "pod-0", K8sPaths(root).outputs, root)
    assert list(outside.iterdir()) == []


@pytest.fixture
def home_job(tmp_path: Path) -> tuple[Layout, Path]:
    """DISTRUN_HOME with the folder of job `job`, whose system_logs/ links to a folder outside."""
    layout = Layout(tmp_path / "home")
    outside = tmp_path / "outside"
    outside.mkdir()
    root = layout.job("job").root
    root.mkdir(parents=True)
    (root / "system_logs").symlink_to(outside)
    return layout, outside


def test_a_launcher_log_is_not_opened_through_a_linked_system_logs(home_job) -> None:
    layout, outside = home_job
    prepared = SimpleNamespace(name="job", folder=layout.job("job"))
    with pytest.raises(UnsafeFileError, match="system_logs is a symbolic link"):
        start_detached(prepared, layout, ["true"])  # type: ignore[arg-type]
    assert list(outside.iterdir()) == []


def test_a_parents_request_and_log_are_not_made_through_a_linked_system_logs(home_job) -> None:
    layout, outside = home_job
    with pytest.raises(UnsafeFileError, match="system_logs is a symbolic link"):
        start_supervisor(layout, "job", {"kind": "pipeline"})
    assert list(outside.iterdir()) == []


def test_a_parents_folder_is_not_made_where_a_link_to_nowhere_lies(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "home")
    layout.jobs_dir.mkdir(parents=True)
    (layout.jobs_dir / "pipe").symlink_to(tmp_path / "nowhere")
    index = JobIndex(layout.db_path)
    header = SimpleNamespace(display_name=None, experiment_name="e", tags={})
    with pytest.raises(DistrunError, match="already exists"):
        record_parent(index, layout, "pipe", JobStatus.QUEUED, header, kind=JobKind.PIPELINE, compute="local", steps={})
    assert "pipe" not in index.names()
    assert not (tmp_path / "nowhere").exists()
