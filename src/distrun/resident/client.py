"""The `distrun run` side: hand the command to a resident process, if one serves this DISTRUN_HOME.

Imported by the command's entry point before anything else of distrun, so it holds to the
standard library's C modules (`_socket`, not `socket`, which pulls in enum and selectors). It
passes the caller's standard streams and working folder as file descriptors, so the job writes
to the very terminal, pipe or file the caller has and starts where the caller is, even if that
folder was renamed. Ctrl-C, SIGTERM and SIGHUP are forwarded as they arrive; the command's exit
code comes back from the copy that ran it, or from the resident when that copy died unreported.
"""

from __future__ import annotations

import _socket
import array
import os
import signal
import sys
from types import FrameType

from distrun.entry import EXIT_INTERRUPTED
from distrun.resident import wire

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_LOST = 1  # the resident and the copy it forked both ended without saying how the command ended


def run_through_resident(args: list[str]) -> int | None:
    """The exit code of `distrun <args>` run by the resident; None where it cannot (then run it here)."""
    path = wire.socket_path(wire.home_folder())
    if len(os.fsencode(path)) > wire.MAX_SOCKET_PATH:
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:  # none started, or one that has ended and left its socket
        conn.close()
        return None
    try:
        return _hand_over(conn, args)
    finally:
        conn.close()


def _hand_over(conn: _socket.socket, args: list[str]) -> int | None:
    try:
        cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        cwd_path = os.getcwdb()
    except OSError:
        return None  # the cold command says what is wrong with the working folder
    received: list[int] = []
    started: list[bool] = []  # set once the resident's copy runs the command

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if not started:
            # Nothing ran yet, and a resident that does not answer must not hold a Ctrl-C up:
            # leave. A copy forked after this finds the connection closed and ends unstarted.
            os._exit(EXIT_INTERRUPTED)
        try:
            conn.send(bytes([signum]))
        except OSError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        try:
            for fd in (0, 1, 2):
                os.fstat(fd)
        except OSError:
            return None  # a closed standard stream: the cold command handles it as it always has
        request = {
            "kind": "run",
            "argv": [os.fsencode(arg) for arg in args],
            "env": dict(os.environb),
            "python": os.fsencode(sys.executable),
            "package": wire.package_folder(),
            "search_path": wire.search_path(),
            "cwd": cwd_path,
        }
        try:
            _send(conn, wire.encode(request), [0, 1, 2, cwd])
        except OSError:
            return EXIT_INTERRUPTED if received else None
        return _outcome(wire.Reader(conn.recv), received, started)
    finally:
        os.close(cwd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _send(conn: _socket.socket, data: bytes, fds: list[int]) -> None:
    rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
    sent = conn.sendmsg([data], rights)
    while sent < len(data):
        sent += conn.send(data[sent:])


def _outcome(replies: wire.Reader, received: list[int], started: list[bool]) -> int | None:
    """How the command ended, from the resident's messages: ("started",) once the copy runs it,
    then ("exit", code); or ("cold", why) when it will not run it here."""
    while True:
        try:
            reply = replies.next()
        except (OSError, ValueError, EOFError, TypeError):
            reply = None
        if isinstance(reply, tuple) and reply == ("started",):
            started.append(True)
        elif isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "exit" and isinstance(reply[1], int):
            return reply[1]
        elif not started:
            # Refused, or gone, before anything ran. A stop asked for meanwhile is the answer.
            return EXIT_INTERRUPTED if received else None
        else:
            os.write(2, _LOST)
            return EXIT_LOST


_LOST = b"distrun: the resident process ended without saying how the command ended; `distrun job list` shows the job\n"
