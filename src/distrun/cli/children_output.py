"""`distrun run pipeline.yml` (or sweep.yml): its steps' (trials') output, live, beside its own lines.

The parent's run (`distrun.runner.parent_run`) says its event lines (a step started, a trial's
metric, a step Completed) from this process's main thread. Each child's output is followed from
a thread, through the one path `distrun stream PIPELINE` takes (`distrun.cli.pipeline_logs`): every
line prefixed by step or trial and by `[node/rank]`, lossless, terminal-safe. Both write whole
lines only, under one lock, so an event never lands inside a child's line. `--events-only` keeps
the event lines alone.
"""

from __future__ import annotations

import threading
from typing import BinaryIO

from distrun.agent.terminal_output import say
from distrun.cli.pipeline_logs import show_pipeline_logs
from distrun.cli.stdout_reader import let_go_of_stdout
from distrun.core.errors import DistrunError
from distrun.runner.jobs import get_job
from distrun.store.layout import Layout


class ChildrenOutput:
    """The children's output of a parent, followed from `start(name)` (once its record is made)
    until it and every child ended, and the parent's event lines (`say`), on one output."""

    def __init__(self, layout: Layout, out: BinaryIO, color: bool) -> None:
        self.layout = layout
        self.name = ""
        self.out = out
        self.color = color
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.failure: str | None = None  # why the children's output could not be followed

    def say(self, text: str) -> None:
        """One event line, never inside a child's line. A reader that went away (`| head`) ends
        the printing, never the run (`say`)."""
        with self.lock:
            self.out.flush()
            say(self.out, text)

    def start(self, name: str) -> None:
        """Follow the children of the parent `name`, from now: its record exists."""
        self.name = name
        self.thread = threading.Thread(target=self._follow, name="children-output", daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        try:
            record = get_job(self.layout, self.name)
            show_pipeline_logs(self.layout, record, self.out, follow=True, tail=None, color=self.color, lock=self.lock)
        except BrokenPipeError:
            let_go_of_stdout()  # the reader went away: the run goes on, unprinted
        except DistrunError as exc:
            self.failure = exc.message

    def wait(self) -> None:
        """Until every child's output was shown to its end (the parent ended before this is called)."""
        while self.thread is not None and self.thread.is_alive():
            self.thread.join(0.2)  # a bounded join: Ctrl-C is still taken
        if self.failure is not None:
            self.say(f"distrun: the steps' output could not be followed: {self.failure}")
