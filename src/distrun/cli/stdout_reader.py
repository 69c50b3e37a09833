"""When whoever reads distrun's output goes away: `distrun job stream NAME | head -3`.

That is no error of the command: it ends at once, with status 0, and prints nothing more.
Without this, click turns the write's EPIPE into status 1, and a command that follows a
running job (`job stream`, `logs -f`) went on following it, unread, until the job ended.

Only a broken stdout counts: a BrokenPipeError from any other pipe (a helper process, a
server's socket) is a failure like any other, and goes on up.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any

import click


def reader_gone(fd: int | None = None) -> bool:
    """The read end of stdout (a pipe, a socket) has been closed: a write would fail with EPIPE.

    A pipe's write end whose readers are all gone polls POLLERR at once; one still read does not.
    """
    try:
        fd = sys.stdout.fileno() if fd is None else fd
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR and POLLHUP are reported whatever is asked
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def let_go_of_stdout() -> None:
    """Point stdout at /dev/null, so that what it still buffers, flushed when Python exits, does
    not fail again (Python would exit with status 120)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class QuietWhenUnread(click.Group):
    """The command group whose commands end with status 0 when the reader of stdout goes away."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            if not reader_gone():
                raise
            let_go_of_stdout()
            ctx.exit(0)
