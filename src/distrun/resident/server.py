"""The resident process: loads distrun once, then forks a copy per `distrun run` it is handed.

Started by `distrun resident start` (as `python -m distrun.resident.server HOME IDLE`), in a
session of its own with no terminal; its log is DISTRUN_HOME/resident.log. It serves only its
own user (the peer's uid, as the kernel tells it), only callers whose process context a child
of it would share (`context`), and only while its code is the caller's: the same interpreter
and distrun package, the same module search path (`wire.comparable_path`), and no file of a
module it loaded changed since it started (an upgrade or an edit). A stale resident answers
"run cold", then leaves. It ends after `idle` seconds without a request and with no command of
its own still running, or on `distrun resident stop`; the commands it forked run on, each its
own caller's.
"""

from __future__ import annotations

import array
import importlib
import os
import select
import signal
import socket
import sys
import time

from distrun.resident import context, wire
from distrun.resident.forked_command import run_forked

# What a `distrun run` on local compute imports, loaded before the first request.
PRELOADED = (
    "distrun.cli",
    "distrun.jobs",
    "distrun.submission",
    "distrun.spec.loader",
    "distrun.backends.local",
    "distrun.agent.gang",
)
_FDS = 4  # stdin, stdout, stderr, working folder
_REQUEST_TIMEOUT = 5.0


class Resident:
    def __init__(self, home: str, idle: float, search_path: list[bytes], cwd: bytes) -> None:
        self.home = home
        self.idle = idle
        self.started = time.time()
        self.last_request = time.monotonic()
        self.commands: dict[int, socket.socket] = {}  # pid of each forked command -> its caller's connection
        self.served = 0
        self.refused = 0
        self.last_refusal = ""
        self.context = context.inherited("self")
        self.python = os.fsencode(sys.executable)
        self.package = wire.package_folder()
        # As it was at the start, before anything was imported, against the start's working folder.
        self.search_path = wire.comparable_path(search_path, cwd)
        self.loaded = _module_files()
        self.stopping = False

    # ------------------------------------------------------------ the loop

    def serve(self, listener: socket.socket) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self._inherited = [listener.fileno(), wake_r, wake_w]
        _log(f"serving {self.home} as pid {os.getpid()}")
        while not self.stopping:
            self._reap()
            if not self.commands and time.monotonic() - self.last_request > self.idle:
                _log("idle: leaving")
                break
            try:
                ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
            except InterruptedError:
                continue
            if wake_r in ready:
                _drain(wake_r)
            if listener in ready:
                self._accept(listener)
        self._reap()

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        self.last_request = time.monotonic()
        fds: list[int] = []
        kept = False
        try:
            pid, uid, _gid = _peer(conn)
            if uid != os.getuid():
                return
            conn.settimeout(_REQUEST_TIMEOUT)
            request, fds = _receive(conn)
            conn.settimeout(None)
            kind = request.get("kind") if isinstance(request, dict) else None
            if kind == "run":
                kept = self._run(conn, pid, request, fds)
            elif kind == "status":
                conn.sendall(wire.encode(self.status()))
            elif kind == "stop":
                self.stopping = True
                conn.sendall(wire.encode(("stopping", os.getpid())))
        except (OSError, ValueError, EOFError, TypeError) as exc:
            _log(f"a request failed: {exc!r}")
        finally:
            for fd in fds:
                _close(fd)
            if not kept:
                conn.close()

    def _run(self, conn: socket.socket, pid: int, request: dict, fds: list[int]) -> bool:
        """Fork the command's copy, or say why not; whether the connection is kept for its end."""
        why = self._refusal(pid, request, fds)
        if why:
            self.refused += 1
            self.last_refusal = why
            _log(f"pid {pid} runs cold: {why}")
            conn.sendall(wire.encode(("cold", why)))
            if why.startswith("distrun's code changed"):
                self.stopping = True
            return False
        umask = context.umask_of(pid)
        inherited = [*self._inherited, *(c.fileno() for c in self.commands.values())]
        child = os.fork()
        if child == 0:
            run_forked(conn, fds, request, umask if umask is not None else 0o022, inherited)
        self.served += 1
        self.commands[child] = conn
        return True

    def _refusal(self, pid: int, request: dict, fds: list[int]) -> str:
        if len(fds) != _FDS:
            return f"expected {_FDS} file descriptors, got {len(fds)}"
        if request.get("python") != self.python:
            return f"another interpreter ({os.fsdecode(request.get('python', b''))})"
        if request.get("package") != self.package:
            return f"another distrun ({os.fsdecode(request.get('package', b''))})"
        path, cwd = request.get("search_path"), request.get("cwd")
        if not isinstance(path, list) or wire.comparable_path(path, cwd) != self.search_path:
            return "another module search path (sys.path: PYTHONPATH, or the interpreter's site folders)"
        changed = _changed(self.loaded)
        if changed:
            return f"distrun's code changed since the resident started ({changed}): it leaves"
        different = context.differences(context.inherited(pid), self.context)
        if different:
            return "the caller's " + ", ".join(different) + " differ from the resident's"
        return ""

    def _reap(self) -> None:
        """Wait for ended commands; say how each ended to its caller, in case it could not."""
        while self.commands:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.commands.pop(pid, None)
            if conn is None:
                continue
            try:
                code = os.waitstatus_to_exitcode(status)
                conn.sendall(wire.encode(("exit", code if code >= 0 else 128 - code)))
            except (OSError, ValueError):
                pass
            finally:
                conn.close()

    def status(self) -> dict:
        return {
            "pid": os.getpid(),
            "started": self.started,
            "served": self.served,
            "refused": self.refused,
            "last_refusal": self.last_refusal,
            "running": len(self.commands),
            "idle_seconds": self.idle,
            "python": os.fsdecode(self.python),
        }


# ---------------------------------------------------------------- helpers


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, array.array("i", [0, 0, 0]).itemsize * 3)
    pid, uid, gid = array.array("i", raw)
    return pid, uid, gid


def _receive(conn: socket.socket) -> tuple[object, list[int]]:
    """The request and the file descriptors sent with its first bytes."""
    fds: list[int] = []
    size = array.array("i").itemsize
    data, ancillary, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(_FDS * size))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", payload[: len(payload) - len(payload) % size]))
    for fd in fds:
        os.set_inheritable(fd, False)
    if not data:
        return None, fds
    return wire.Reader(conn.recv, data).next(), fds


def _module_files() -> dict[str, float]:
    """Each loaded module's file and its modification time, to notice an upgrade or an edit."""
    files: dict[str, float] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            try:
                files[path] = os.stat(path).st_mtime
            except OSError:
                continue
    return files


def _changed(loaded: dict[str, float]) -> str:
    for path, mtime in loaded.items():
        try:
            if os.stat(path).st_mtime != mtime:
                return path
        except OSError:
            return path
    return ""


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _log(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def preload() -> None:
    from distrun.pydantic_plugins import skip_plugin_discovery

    skip_plugin_discovery()
    for name in PRELOADED:
        importlib.import_module(name)
    from distrun.spec import models

    models.JobSpec.model_validate({"command": "true"})  # builds the validators once


def listen(home: str) -> socket.socket:
    """The resident's socket, bound aside and renamed into place, so a caller never finds it
    half made; 0600, the user's own."""
    path = wire.socket_path(home)
    aside = f"{path}.{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _remove(aside)
    old = os.umask(0o177)
    try:
        listener.bind(aside)
    finally:
        os.umask(old)
    listener.listen(64)
    os.rename(aside, path)
    return listener


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def main() -> None:
    home, idle = sys.argv[1], float(sys.argv[2])
    search_path, cwd = wire.search_path(), os.getcwdb()
    preload()
    resident = Resident(home, idle, search_path, cwd)
    listener = listen(home)
    path = wire.socket_path(home)
    ours = os.stat(path).st_ino
    try:
        resident.serve(listener)
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == ours:  # not a newer resident's
                os.unlink(path)
        except OSError:
            pass
        _log("left")


if __name__ == "__main__":
    main()
