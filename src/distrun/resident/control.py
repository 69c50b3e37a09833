"""`distrun resident start|status|stop`: the resident process, from the user's side."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from distrun.errors import DistrunError
from distrun.resident import wire

START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def ask(home: str, request: dict) -> object | None:
    """The resident's answer to a status or stop request; None where none serves `home`."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(10.0)
        conn.connect(wire.socket_path(home))
        conn.sendall(wire.encode(request))
        return wire.Reader(conn.recv).next()
    except OSError:
        return None
    finally:
        conn.close()


def status(home: str) -> dict | None:
    answer = ask(home, {"kind": "status"})
    return answer if isinstance(answer, dict) else None


def start(home: str, idle_seconds: float) -> dict:
    """Start a resident for `home` (or find the one there); its status once it serves."""
    path = wire.socket_path(home)
    if len(os.fsencode(path)) > wire.MAX_SOCKET_PATH:
        raise DistrunError(
            f"the resident's socket path {path} is {len(os.fsencode(path))} bytes; a Unix socket's may be at most "
            f"{wire.MAX_SOCKET_PATH}",
            "set DISTRUN_HOME to a shorter folder",
        )
    running = status(home)
    if running is not None:
        return running
    os.makedirs(home, exist_ok=True)
    log_path = os.path.join(home, wire.LOG_NAME)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "distrun.resident.server", home, str(idle_seconds)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,  # no terminal: a closed one or a Ctrl-C where it started is not for it
        )
    give_up = time.monotonic() + START_TIMEOUT
    while time.monotonic() < give_up:
        answer = status(home)
        if answer is not None:
            return answer
        if process.poll() is not None:
            raise DistrunError(
                f"the resident process ended at its start (exit code {process.returncode})", f"see {log_path}"
            )
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise DistrunError(f"the resident process did not start within {START_TIMEOUT:.0f} s", f"see {log_path}")


def stop(home: str) -> int | None:
    """Stop the resident serving `home`; its pid, or None where none did. Commands it forked run on."""
    answer = ask(home, {"kind": "stop"})
    if not (isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "stopping"):
        return None
    pid = answer[1]
    give_up = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < give_up and _alive(pid):
        time.sleep(0.02)
    return pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
