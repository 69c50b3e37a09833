"""Background supervisors forked from one process that imported their launcher once.

A job started in the background (`distrun job create`) is supervised by `python -m
<launcher_module> NAME`: a new interpreter that imports distrun's launcher (pydantic, the job
models, the gang) before it starts anything, 0.35-0.5 s of CPU on a 2-core machine. A pipeline
starts one such job per step, and along a chain each waits for the one before: that import was
most of a step's time. So a pipeline first starts one launcher server, `python -m
distrun.backends.launcher_server MODULE`, which imports MODULE once, then forks a supervisor for
each job name it is sent; the supervisor runs `MODULE.main(NAME)` and exits as `python -m
MODULE NAME` would. Before it serves, it calls `MODULE.warm()` where there is one: what every
supervisor would do first (the local launcher builds the job model's validator there).

Why a server started as a new interpreter rather than forks of the pipeline's own process: a
fork carries its parent's state, and the pipeline's holds a job index connection (SQLite: never
across a fork), signal handlers that raise KeyboardInterrupt, buffered output. The server holds
nothing but imported modules and its two pipes, so a supervisor starts from what a new
interpreter has, less the imports.

A supervisor gets what `start_detached` gives a new interpreter: a session of its own, stdin
from /dev/null, stdout and stderr appended to the job's launcher log, the stop signals blocked
(the server runs with them blocked, as a launcher starts) until its launcher holds them, and the
pipeline's environment with DISTRUN_HOME. It is forked twice, so that it is not the server's
child: nothing waits for it there, and a supervisor that died must not linger as a zombie that
still looks alive to the job's readers. The server ends when its requests' pipe closes (the
pipeline ended, or was killed): it leaves nothing running but the supervisors it started, which
are the jobs' own.

Protocol, one line each way: the pipeline writes `{"name": NAME, "log": PATH}` as JSON, the
server answers the supervisor's pid, or `error: WHY`. Any failure makes the caller start that
job's supervisor as a new interpreter, as without a server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from distrun.agent.stop_signals import stop_signals_blocked
from distrun.core.file_modes import open_append
from distrun.core.process_exit import leave

SERVER_MODULE = "distrun.backends.launcher_server"
_CLOSE_WAIT_S = 5.0


class LauncherServer:
    """The pipeline's side: a running server for one launcher module and one DISTRUN_HOME."""

    def __init__(self, module: str, home: Path) -> None:
        self.module = module
        self.home = home
        env = dict(os.environ, DISTRUN_HOME=str(home))
        with stop_signals_blocked():  # inherited by every supervisor it forks
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, module],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C at the terminal is the pipeline's to handle
                env=env,
            )

    def launch(self, name: str, log: Path) -> int | None:
        """Fork a supervisor for job `name`; its pid, or None when the server cannot (then start one anew)."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            return None
        try:
            proc.stdin.write(json.dumps({"name": name, "log": str(log)}).encode() + b"\n")
            proc.stdin.flush()
            reply = proc.stdout.readline().decode(errors="replace").strip()
        except OSError:
            reply = ""
        if reply.isdigit():
            return int(reply)
        self.close()  # it died, or cannot fork: no more requests to it
        return None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            proc.wait(_CLOSE_WAIT_S)  # it ends at the closed pipe
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_serving: dict[tuple[str, Path], LauncherServer] = {}


@contextmanager
def launchers_served(module: str, home: Path) -> Iterator[None]:
    """Within the block, this process starts background supervisors of `module` by fork from a server."""
    key = (module, home)
    if key in _serving:
        yield
        return
    server = LauncherServer(module, home)
    _serving[key] = server
    try:
        yield
    finally:
        del _serving[key]
        server.close()


def launch_served(module: str, home: Path, name: str, log: Path) -> int | None:
    """A supervisor of job `name` forked by a server of this process; None where none serves (or it failed)."""
    server = _serving.get((module, home))
    if server is None or threading.current_thread() is not threading.main_thread():
        return None  # one request at a time: the pipeline asks from its main thread only
    return server.launch(name, log)


# ---------------------------------------------------------------- the server process


def serve(requests: IO[bytes], replies: IO[bytes]) -> tuple[str, str] | None:
    """Answer requests until the pipe closes (then None, in the server). In a forked supervisor
    it returns (name, log): the caller then runs the launcher, with the server's frames gone."""
    while True:
        line = requests.readline()
        if not line:
            return None
        try:
            request = json.loads(line)
            name, log = str(request["name"]), str(request["log"])
        except (ValueError, KeyError, TypeError) as exc:
            replies.write(f"error: bad request: {exc}\n".encode())
            replies.flush()
            continue
        try:
            middle = os.fork()
        except OSError as exc:
            replies.write(f"error: {exc}\n".encode())
            replies.flush()
            continue
        if middle == 0:
            return _in_middle(name, log, replies)
        os.waitpid(middle, 0)  # it exits at once, leaving the supervisor to init


def _in_middle(name: str, log: str, replies: IO[bytes]) -> tuple[str, str] | None:
    """The first fork: a session of its own, then the supervisor's fork; says its pid and exits."""
    try:
        os.setsid()
        pid = os.fork()
    except OSError as exc:
        replies.write(f"error: {exc}\n".encode())
        replies.flush()
        os._exit(1)
    if pid == 0:
        return name, log
    replies.write(f"{pid}\n".encode())
    replies.flush()
    os._exit(0)


def _detach(log: str) -> None:
    """The supervisor's standard streams as a new interpreter's would be; the server's pipes closed."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = open_append(Path(log), root=Path(log).parents[1])  # the job folder (system_logs/launcher.txt)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the server owns no other descriptor


def main(module: str) -> int:
    import importlib

    launcher = importlib.import_module(module)
    warm = getattr(launcher, "warm", None)
    if warm is not None:
        warm()  # what each supervisor would do first, done once here
    job = serve(sys.stdin.buffer, sys.stdout.buffer)
    if job is None:
        return 0
    name, log = job
    _detach(log)
    # The job's end is recorded: exit as the `distrun` command does, without the interpreter's
    # teardown (distrun.core.process_exit), as a pipeline waits for this process's exit.
    leave(launcher.main(name))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
