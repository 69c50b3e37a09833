"""Helper processes (an environment build and whatever it starts) end with the distrun that started them.

Ranks are not the only processes distrun starts: an environment build runs uv or pip, which
start build backends and byte-code compilers of their own. Each of them ends with distrun, as
ranks do, however distrun ends (also SIGKILL, when nothing of distrun runs any more):

- a helper starts in its own session (a Ctrl-C meant for distrun is distrun's to handle) with
  PR_SET_PDEATHSIG=SIGKILL (setpriv), so it dies the moment distrun does;
- what a helper starts has no death signal of its own, but it inherits the helper marker in its
  environment; a guard process, started with the first helper, holds the read end of a pipe whose
  write end only distrun holds. When distrun ends, for any reason, the kernel closes that end: the
  guard reads EOF and kills every process carrying the marker until none is left
  (`distrun.core.helper_guard`).

The guard is a separate program (spawned, not forked: distrun may have threads by then), in a
session of its own and deaf to the signals meant for distrun.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

from distrun.core.death_signal import setpriv_prefix
from distrun.core.helper_guard import HELPER_MARKER
from distrun.core.module_command import module_argv

_lock = threading.Lock()
_marker: str | None = None  # this process's marker value, once its guard runs
_guard_fd: int | None = None  # the write end of the guard's pipe: closed only by our end


def start_helper(argv: list[str], env: Mapping[str, str], **popen: Any) -> subprocess.Popen[bytes]:
    """subprocess.Popen(argv) as a helper: own session, death signal, swept by the guard."""
    marked = dict(env)
    marked[HELPER_MARKER] = _guard_marker()
    return subprocess.Popen([*setpriv_prefix("KILL"), *argv], env=marked, start_new_session=True, **popen)


def _guard_marker() -> str:
    """This process's helper marker; starts its guard the first time."""
    global _marker, _guard_fd
    with _lock:
        if _marker is None:
            marker = f"{os.getpid()}-{secrets.token_hex(8)}"
            read_fd, write_fd = os.pipe()  # both ends close on exec: no helper holds the write end
            env = {k: v for k, v in os.environ.items() if k != HELPER_MARKER}
            try:
                subprocess.Popen(
                    [*module_argv("distrun.core.helper_guard"), marker],
                    stdin=read_fd,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            finally:
                os.close(read_fd)
            _marker, _guard_fd = marker, write_fd
        return _marker
