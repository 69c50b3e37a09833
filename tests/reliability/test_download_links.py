"""`job download` with links planted by jobs (class 7).

Whatever links a job leaves in its outputs, and however often jobs are downloaded into the same
folder, nothing is written outside the folder given with -p; its errors (a folder that cannot
be written, a download over an earlier one that would need writing through a link) are
distrun's own messages, not tracebacks.
"""

from __future__ import annotations

import os

import pytest

from support.reliability import assert_refused, run_capped


def _run(run_cli, write_job, name: str, command: str, outputs: str = "") -> None:
    job = write_job(f"command: mkdir -p outputs && {command}\ncode: src\n{outputs}")
    done = run_cli("run", str(job), "--name", name)
    assert done.returncode == 0, done.stdout + done.stderr


def _nothing_written_in(outside) -> None:  # type: ignore[no-untyped-def]
    assert sorted(os.listdir(outside)) == ["keep.txt"], os.listdir(outside)
    assert (outside / "keep.txt").read_text() == "untouched\n"


@pytest.fixture
def outside(tmp_path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("untouched\n")
    return folder


def test_a_link_from_one_download_is_not_written_through_by_the_next(
    run_cli, write_job, distrun_home, tmp_path, outside
):
    _run(run_cli, write_job, "linker", f"ln -s {outside} outputs/d && ln -s {outside}/keep.txt outputs/f")
    _run(run_cli, write_job, "writer", "mkdir -p outputs/d && echo payload > outputs/d/new.txt && echo x > outputs/f")
    dest = tmp_path / "dest"
    first = run_capped(distrun_home, "job", "download", "linker", "-p", str(dest))
    assert first.returncode == 0, first.stderr
    assert (dest / "artifacts" / "outputs" / "d").is_symlink()
    second = run_capped(distrun_home, "job", "download", "writer", "-p", str(dest))
    assert_refused(second, "is a symbolic link", "never writes through")
    _nothing_written_in(outside)


def test_downloading_the_same_job_twice_replaces_its_links_and_files(
    run_cli, write_job, distrun_home, tmp_path, outside
):
    _run(run_cli, write_job, "twice", f"ln -s {outside} outputs/d && echo one > outputs/plain.txt")
    dest = tmp_path / "dest"
    for _ in range(3):
        done = run_capped(distrun_home, "job", "download", "twice", "-p", str(dest))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert os.readlink(dest / "artifacts" / "outputs" / "d") == str(outside)
    assert (dest / "artifacts" / "outputs" / "plain.txt").read_text() == "one\n"
    _nothing_written_in(outside)


def test_a_named_output_holding_links_and_a_pipe_downloads_without_hanging(
    run_cli, write_job, distrun_home, tmp_path, outside
):
    _run(
        run_cli,
        write_job,
        "named",
        f"ln -s {outside}/keep.txt ${{{{outputs.model}}}}/link && mkfifo ${{{{outputs.model}}}}/pipe "
        "&& echo w > ${{outputs.model}}/weights.bin",
        "outputs:\n  model:\n",
    )
    dest = tmp_path / "dest"
    done = run_capped(distrun_home, "job", "download", "named", "-p", str(dest), "--all", timeout=60)
    assert done.returncode == 0, done.stderr
    model = dest / "named-outputs" / "model"
    assert (model / "weights.bin").read_text() == "w\n"
    assert (model / "link").is_symlink()
    assert not (model / "pipe").exists()
    assert "pipe" in done.stderr and "not a regular file" in done.stderr  # said, not silently dropped
    _nothing_written_in(outside)


def test_a_download_folder_that_cannot_be_written_is_a_clear_error(run_cli, write_job, distrun_home, tmp_path):
    _run(run_cli, write_job, "plain", "echo one > outputs/plain.txt")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for dest in (a_file, a_file / "below"):
        done = run_capped(distrun_home, "job", "download", "plain", "-p", str(dest))
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert any(text in done.stderr for text in ("cannot write", "is not a folder", "is a file")), done.stderr
    assert a_file.read_text() == "x"


def test_a_user_link_inside_the_download_folder_is_not_written_through(
    run_cli, write_job, distrun_home, tmp_path, outside
):
    _run(run_cli, write_job, "plain", "echo one > outputs/keep.txt")
    dest = tmp_path / "dest"
    (dest / "artifacts").mkdir(parents=True)
    (dest / "artifacts" / "outputs").symlink_to(outside)
    done = run_capped(distrun_home, "job", "download", "plain", "-p", str(dest))
    assert_refused(done, "is a symbolic link")
    _nothing_written_in(outside)
