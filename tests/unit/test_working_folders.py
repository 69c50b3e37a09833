"""`outputs/` and `logs/` made in a process's working folder before it starts, never through a link."""

from __future__ import annotations

from pathlib import Path

from distrun.agent.working_folders import make_artifact_dirs


def test_a_fresh_working_folder_gets_outputs_and_logs(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    make_artifact_dirs([str(code), str(code)])
    assert sorted(p.name for p in code.iterdir()) == ["logs", "outputs"]
    assert all((code / name).is_dir() and not (code / name).is_symlink() for name in ("logs", "outputs"))


def test_links_and_files_a_job_left_there_are_neither_followed_nor_replaced(tmp_path: Path) -> None:
    code = tmp_path / "code"
    outside = tmp_path / "outside"
    code.mkdir()
    outside.mkdir()
    # An earlier attempt's processes pointed outputs at a folder elsewhere and logs at a path
    # that does not exist yet: making the folders must create nothing out there.
    (code / "outputs").symlink_to(outside)
    (code / "logs").symlink_to(outside / "made-through-a-link")
    make_artifact_dirs([str(code)])
    assert list(outside.iterdir()) == []
    assert (code / "outputs").is_symlink() and (code / "logs").is_symlink()

    (code / "logs").unlink()
    (code / "logs").write_text("a file, not a folder")
    make_artifact_dirs([str(code)])  # left as it is; the job's own writes then fail there, as it made them
    assert (code / "logs").read_text() == "a file, not a folder"


def test_a_missing_working_folder_is_left_to_the_process_start_to_report(tmp_path: Path) -> None:
    make_artifact_dirs([str(tmp_path / "gone")])
    assert not (tmp_path / "gone").exists()


def test_a_working_folder_the_job_swapped_for_a_link_gets_nothing_made_through_it(tmp_path: Path) -> None:
    job_root = tmp_path / "job"
    outside = tmp_path / "outside"
    job_root.mkdir()
    outside.mkdir()
    (job_root / "code").symlink_to(outside)  # an earlier attempt's rank replaced code/
    make_artifact_dirs([str(job_root / "code")], job_root)
    assert list(outside.iterdir()) == []


def test_a_working_folder_outside_the_job_folder_is_opened_as_named(tmp_path: Path) -> None:
    job_root = tmp_path / "job"
    elsewhere = tmp_path / "elsewhere"
    job_root.mkdir()
    elsewhere.mkdir()
    make_artifact_dirs([str(elsewhere)], job_root)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["logs", "outputs"]
