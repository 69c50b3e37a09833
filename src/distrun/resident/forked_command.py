"""The copy the resident forks for one `distrun run`: made the caller's, then the command.

It takes the caller's standard streams, working folder, environment, umask and arguments, and
new Python stream objects over them (the resident's were made for /dev/null). It leads a
session of its own, so nothing aimed at the resident's process group reaches it. Signals the
caller forwards arrive as bytes on the connection (SIGIO wakes it); the connection's end, the
caller gone, counts as SIGHUP, a closed terminal, which cancels the job as distrun does. It
never returns into the resident's loop: it ends with os._exit.
"""

from __future__ import annotations

import atexit
import fcntl
import io
import os
import signal
import socket
import sys
import traceback
from types import FrameType
from typing import NoReturn

from distrun.entry import EXIT_INTERRUPTED
from distrun.resident import wire

FORWARDED = frozenset((signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
_STANDARD = (0, 1, 2)


def run_forked(conn: socket.socket, fds: list[int], request: dict, umask: int, inherited_fds: list[int]) -> NoReturn:
    """In the child after fork: become the caller's command and run it; never returns."""
    code, taken = 1, False
    try:
        try:
            _take_on(fds, request, umask, inherited_fds)
            _forward_signals(conn)
        except BaseException as exc:  # nothing ran yet: the caller runs the command itself
            _say(conn, ("cold", f"could not take on the caller's context: {exc!r}"))
            return  # (the finally below ends the process)
        taken = True
        _say(conn, ("started",))
        code = _command()
    except KeyboardInterrupt:  # Ctrl-C before the command held its stop signals: as the cold entry point
        code = EXIT_INTERRUPTED
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        if taken:
            _end(conn, code)
        os._exit(code)


def _take_on(fds: list[int], request: dict, umask: int, inherited_fds: list[int]) -> None:
    for fd in inherited_fds:
        _close(fd)
    _reset_signals()
    os.setsid()
    stdin, stdout, stderr, cwd = fds
    for fd, target in zip((stdin, stdout, stderr), _STANDARD, strict=True):
        os.dup2(fd, target)
    os.fchdir(cwd)
    for fd in set(fds) - set(_STANDARD):
        _close(fd)
    os.umask(umask)
    os.environ.clear()
    for key, value in request["env"].items():
        os.environb[key] = value
    sys.argv = ["distrun", *(os.fsdecode(arg) for arg in request["argv"])]
    # The caller's module search path, for the modules imported from now on: the resident's
    # but for the caller's script folder and working folder (wire.comparable_path).
    sys.path[:] = [os.fsdecode(entry) for entry in request["search_path"]]
    _fresh_standard_streams()


def _command() -> int:
    from distrun.cli import main
    from distrun.process_exit import exit_status

    try:
        main()
    except SystemExit as done:
        status = exit_status(done.code)
        if status is None:  # a message as the code: Python prints it and exits 1
            print(done.code, file=sys.stderr)
            return 1
        return status
    return 0


def _end(conn: socket.socket, code: int) -> NoReturn:
    try:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        _say(conn, ("exit", code & 0xFF))
    finally:
        os._exit(code & 0xFF)


def _say(conn: socket.socket, message: tuple) -> None:
    """Best effort: the caller may be gone; the resident reports what this copy could not."""
    try:
        conn.sendall(wire.encode(message))  # a few bytes into an empty buffer: never waits
    except OSError:
        pass


def _reset_signals() -> None:
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGIO):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _fresh_standard_streams() -> None:
    """Python's stream objects as a fresh interpreter would make them for these files."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = sys.stdout.encoding if sys.stdout is not None else "utf-8"
    errors = sys.stdout.errors if sys.stdout is not None else "strict"
    asked, _, asked_errors = os.environ.get("PYTHONIOENCODING", "").partition(":")
    encoding, errors = asked or encoding, asked_errors or errors
    sys.stdin = _text(0, "r", encoding, errors, line_buffering=False, unbuffered=False)
    sys.stdout = _text(1, "w", encoding, errors, line_buffering=os.isatty(1), unbuffered=unbuffered)
    sys.stderr = _text(2, "w", encoding, "backslashreplace", line_buffering=True, unbuffered=unbuffered)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _text(fd: int, mode: str, encoding: str, errors: str, line_buffering: bool, unbuffered: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered, encoding=encoding, errors=errors, line_buffering=line_buffering, write_through=unbuffered
    )


def _forward_signals(conn: socket.socket) -> None:
    fd = conn.fileno()

    def arrived(signum: int | None = None, frame: FrameType | None = None) -> None:
        while True:
            try:
                # MSG_DONTWAIT whatever the descriptor's mode: a handler that waited would stall the command.
                data = conn.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # the caller is gone: as a closed terminal
                signal.signal(signal.SIGIO, signal.SIG_IGN)
                os.kill(os.getpid(), signal.SIGHUP)
                return
            for number in data:
                if number in FORWARDED:
                    os.kill(os.getpid(), number)

    signal.signal(signal.SIGIO, arrived)
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    arrived()  # what came before SIGIO was asked for


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
