"""distrun.cli.stdout_reader: a pipe whose reader has gone is told from one still read."""

from __future__ import annotations

import os
from pathlib import Path

from distrun.cli.stdout_reader import reader_gone


def test_a_pipe_is_unread_once_its_read_end_is_closed() -> None:
    read_end, write_end = os.pipe()
    try:
        assert not reader_gone(write_end)
        os.close(read_end)
        assert reader_gone(write_end)
    finally:
        os.close(write_end)


def test_a_regular_file_or_a_closed_descriptor_is_never_unread(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "wb") as handle:
        fd = handle.fileno()
        assert not reader_gone(fd)
    assert not reader_gone(fd)  # closed: not a pipe whose reader went away
