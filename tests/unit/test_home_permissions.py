"""DISTRUN_HOME is created without write for group or others, whatever the umask.

It holds the job index, config.yaml (compute targets, environments) and every job folder: one
that others could write would let them change what a user's next job runs. The umask is set in
this process and put back after each test.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from distrun.core.file_modes import make_home
from distrun.prepare.compute import add_target
from distrun.store.index import JobIndex
from distrun.store.layout import Layout

GROUP_OTHERS_WRITE = 0o022


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_home_has_no_group_or_others_write_under_umask_000(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "home"
    make_home(home)
    assert home.is_dir()
    assert not _mode(home) & GROUP_OTHERS_WRITE, oct(_mode(home))
    assert _mode(home) & 0o700 == 0o700


def test_the_folders_made_above_a_new_home_have_none_either(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "a" / "b" / "home"
    make_home(home)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", home):
        assert not _mode(folder) & GROUP_OTHERS_WRITE, f"{folder}: {oct(_mode(folder))}"


def test_the_job_index_creates_its_home_without_group_or_others_write(tmp_path: Path, open_umask: None) -> None:
    layout = Layout(tmp_path / "home")
    assert JobIndex(layout.db_path).list(1) == []
    assert not _mode(layout.home) & GROUP_OTHERS_WRITE, oct(_mode(layout.home))


def test_a_compute_target_creates_its_home_without_group_or_others_write(tmp_path: Path, open_umask: None) -> None:
    layout = Layout(tmp_path / "home")
    add_target(layout.config_path, "cluster", "slurm", {})
    assert layout.config_path.is_file()
    assert not _mode(layout.home) & GROUP_OTHERS_WRITE, oct(_mode(layout.home))


def test_the_umask_still_narrows_a_new_home(tmp_path: Path) -> None:
    previous = os.umask(0o077)
    try:
        make_home(tmp_path / "home")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "home") == 0o700


def test_an_existing_home_keeps_its_bits(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o775)  # the user's choice: a home shared with a group
    make_home(home)
    JobIndex(Layout(home).db_path).list(1)
    assert _mode(home) == 0o775
