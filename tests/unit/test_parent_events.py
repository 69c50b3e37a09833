"""The event lines of a detached parent's launcher.txt, as `distrun job stream PARENT` shows them."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

from distrun.agent.line_stream import MAX_PENDING
from distrun.cli.parent_events import ParentEvents
from distrun.store.layout import Layout

SUMMARY = "\nExecution Summary\n====\nRunId: p\nStatus: Completed\n"


def _events(home: Path) -> tuple[ParentEvents, io.BytesIO, Path]:
    folder = Layout(home).job("p")
    folder.system_logs.mkdir(parents=True)
    out = io.BytesIO()
    return ParentEvents(folder, "p", out, threading.Lock()), out, folder.system_logs / "launcher.txt"


def test_lines_are_shown_as_written_without_the_runid_or_the_summary(tmp_path: Path) -> None:
    events, out, log = _events(tmp_path)
    events.look()  # not written yet: nothing, no error
    log.write_bytes(b"RunId: p\nPipeline: 1 step (a)\n[a] started\x1b[2J as job p.a\n\n[a] Comp")
    events.look()
    assert out.getvalue() == b"Pipeline: 1 step (a)\n[a] started^[[2J as job p.a\n"  # the blank held back
    with log.open("ab") as handle:
        handle.write(b"leted\n" + SUMMARY.encode() + b"after\n")
    events.follow(lambda: True)
    assert out.getvalue().endswith(b"p.a\n\n[a] Completed\n")  # the blank line, then the line it ended
    assert b"Execution Summary" not in out.getvalue() and b"after" not in out.getvalue()


def test_a_line_without_end_is_bounded(tmp_path: Path) -> None:
    events, out, log = _events(tmp_path)
    log.write_bytes(b"x" * (3 * MAX_PENDING + 10))
    events.look()
    assert out.getvalue().count(b"x") >= 2 * MAX_PENDING and out.getvalue().endswith(b"x\n")
    assert len(events.pending) < MAX_PENDING  # what is held back stays bounded


def test_a_link_or_a_pipe_in_its_place_is_never_read_through(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    events, out, log = _events(tmp_path / "linked")
    log.symlink_to(secret)
    events.follow(lambda: False)  # ends at once: nothing more is read from it
    assert b"its events are not shown" in out.getvalue()
    assert b"the secret" not in out.getvalue()
    events, out, log = _events(tmp_path / "piped")
    os.mkfifo(log)  # a pipe no one writes: opening and reading it would block
    events.follow(lambda: False)
    assert b"its events are not shown" in out.getvalue()
