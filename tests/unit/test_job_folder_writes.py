"""Folders and files distrun makes in a job folder: never through a link, and bounded on the job's behalf.

The job's processes run for real against these in tests/reliability/test_job_folder_links.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distrun.agent.folder_writes import listed_beneath, write_beneath
from distrun.agent.node_files import write_node_files
from distrun.agent.outcome_channel import MAIN_WORK_DONE, FolderOutcomeChannel
from distrun.agent.stack_requests import answer_body
from distrun.agent.stacks import Frame, ProcessStacks, ThreadStack
from distrun.core.file_modes import make_dirs_beneath
from distrun.core.safe_files import UnsafeFileError, open_folder_beneath
from distrun.plan.model import NodePlan
from distrun.store.layout import NodeChannelPaths


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A job folder whose `stacks` a rank swapped for a link to a folder outside it."""
    root, outside = tmp_path / "job", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "stacks").symlink_to(outside)
    return root, outside


def test_a_file_written_below_a_planted_link_is_refused_and_nothing_made_outside(planted) -> None:
    root, outside = planted
    with pytest.raises(UnsafeFileError, match="stacks is a symbolic link"):
        write_beneath(root, "stacks/requests", "0123456789abcdef", b"{}")
    with pytest.raises(UnsafeFileError):
        make_dirs_beneath(root, "stacks/answers")
    assert list(outside.iterdir()) == []


def test_folders_are_made_one_by_one_where_missing(tmp_path: Path) -> None:
    make_dirs_beneath(tmp_path / "job", "stacks/requests")
    write_beneath(tmp_path / "job", "stacks/answers", "a.json", b"[]")
    assert (tmp_path / "job" / "stacks" / "requests").is_dir()
    assert (tmp_path / "job" / "stacks" / "answers" / "a.json").read_bytes() == b"[]"


def test_a_planted_link_is_replaced_only_where_distrun_owns_the_folder(planted) -> None:
    root, outside = planted
    (outside / "keep.txt").write_text("not the job's")
    os.close(open_folder_beneath(root, "stacks", 0o775, replace_planted=True))
    assert (root / "stacks").is_dir() and not (root / "stacks").is_symlink()
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_node_files_below_a_planted_link_are_refused(planted) -> None:
    root, outside = planted
    node = NodePlan(node_rank=0, host="localhost", processes=(), files={"stacks/sub/hostfile": "localhost slots=1\n"})
    with pytest.raises(OSError):
        write_node_files(node, root)
    assert list(outside.iterdir()) == []


def test_an_outcome_channel_below_a_planted_link_writes_nothing_through_it(tmp_path: Path) -> None:
    root, outside = tmp_path / "job", tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "slurm").symlink_to(outside)  # the folder of a Slurm job's node outcomes
    channel = FolderOutcomeChannel(NodeChannelPaths(root / "slurm"), 1)
    with pytest.raises(UnsafeFileError):
        channel.set_marker(MAIN_WORK_DONE, 0)
    assert list(outside.iterdir()) == []
    (root / "slurm").unlink()
    channel.set_marker(MAIN_WORK_DONE, 0)
    assert channel.marked(MAIN_WORK_DONE) == {0}


def test_a_listing_stops_at_its_limit(tmp_path: Path) -> None:
    for index in range(10):
        write_beneath(tmp_path, "requests", f"{index:016x}", b"{}")
    assert len(listed_beneath(tmp_path, "requests", limit=4)) == 4
    assert len(listed_beneath(tmp_path, "requests")) == 10


def test_an_answer_too_large_says_so_instead_of_carrying_the_stacks() -> None:
    limit = 20_000
    frame = Frame("f" * 100, "x.py", "x.py", 1)
    threads = [ThreadStack(f"thread {i}", i, True, (frame,) * 20) for i in range(20)]
    big = ProcessStacks("rank_0", "rank 0", 0, 123, threads=threads)
    body = answer_body([0], [big], limit)
    assert len(body) <= limit
    said = json.loads(body)["processes"][0]
    assert said["threads"] == [] and "its stacks were left out" in said["error"]
    small = ProcessStacks("rank_1", "rank 1", 0, 124, threads=threads[:1])
    assert json.loads(answer_body([0], [small], limit))["processes"][0]["threads"][0]["name"] == "thread 0"
