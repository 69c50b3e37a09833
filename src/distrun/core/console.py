"""A line for the user's terminal (stderr by default) that never fails the work it reports on."""

from __future__ import annotations

from typing import TextIO

from distrun.core.terminal_text import neutral_text


def say(out: TextIO, text: str) -> None:
    try:
        out.write(neutral_text(text) + "\n")  # names and messages may hold a job's text
        out.flush()
    except (OSError, ValueError):
        pass  # a closed terminal or pipe: the build or download goes on
