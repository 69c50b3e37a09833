"""The MLflow tracking server a job's ranks log to: found running, or started for the job.

Ranks get `MLFLOW_TRACKING_URI=http://ADDRESS:PORT`, which every MLflow client speaks
(`mlflow`, `mlflow-skinny`, `azureml-mlflow`, any release), instead of the SQLite store's path,
which only the same full mlflow as distrun's can open. The server (`distrun.metrics.server_keeper`)
serves distrun's own store, so the web UI and `distrun metrics` keep reading it directly.

One server per DISTRUN_HOME, shared by the jobs running at the same time. Its files are in
DISTRUN_HOME/mlflow-server/: `lock` (taken to find, start or stop it), `users` (a shared lock
held by each process using it), `alive` (held by the keeper for its life), `state.json`
(its pid, port and whether the server failed), `token` (what a client must send: a new one for
each keeper), `server.sock` (the server's own socket, behind the keeper) and `leases/JOB` (a job that no distrun process
here follows, a detached Slurm job, keeps the server for LEASE_SECONDS after its submission,
until its node agent holds a use or its run is closed). A state file is believed only when its keeper
is alive (the `alive` lock is held, the pid has the recorded start time, its command is the
keeper of this DISTRUN_HOME) and the socket on its port is that keeper's own: a stale file or
one written by anything else never sends a rank to someone else's port.

The address bound and given to the ranks is 127.0.0.1 unless DISTRUN_MLFLOW_HOST names another
interface (ranks on other hosts: Ray, Kubernetes, Slurm on other nodes) and
DISTRUN_MLFLOW_ADVERTISE the name the ranks use for it (`rank_route.advertised_name`). They are
read when the server starts; a job that asks for another address while it runs is told so.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import select
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from distrun.core import procfs
from distrun.core.file_modes import create_file
from distrun.core.safe_files import read_regular
from distrun.metrics.rank_route import ADVERTISE_VARIABLE, HOST_VARIABLE, url_host, wanted_address

START_SECONDS = 30.0  # the keeper says its port within this (it imports no mlflow)
LEASES = "leases"
LEASE_SECONDS = 600.0  # how long a submitted job may wait in its engine's queue and still find the server
TOKEN_FILE = "token"
TOKEN_LIMIT = 256
SERVER_SOCKET = "server.sock"  # the `mlflow server`'s Unix socket, in the server's folder
WAITING_FILE = "waiting"  # touched by the keeper while a client waits for the server's answer

_held: dict[Path, int] = {}  # home -> the open `users` file whose shared lock this process holds


@dataclass(frozen=True)
class ServerUse:
    """The server a job uses: its URI for the ranks and which keeper it is (for its failure)."""

    uri: str
    keeper_pid: int
    keeper_started: int
    note: str | None = None  # why the ranks get another address than this process asked for
    token: str = ""  # what the ranks send (MLFLOW_TRACKING_TOKEN): the keeper admits no other client


class ServerUnavailable(Exception):
    """No server could be had; the message says why."""


def server_folder(home: Path) -> Path:
    folder = home / "mlflow-server"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ServerUnavailable(f"{folder} is not a folder of this user's")
    return folder


def _open_lock(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def use_server(home: Path) -> ServerUse:
    """A use of DISTRUN_HOME's server (started if none runs), held until this process ends.

    Raises ServerUnavailable when no keeper could be started. A server that fails after its
    keeper started is reported by `server_failure`.
    """
    try:
        folder = server_folder(home)
        lock_fd = _open_lock(folder / "lock")
    except OSError as exc:
        raise ServerUnavailable(f"its folder under {home} cannot be used: {exc}") from None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        _hold_use(home, folder)
        state = verified_state(home)
        note = None
        if state is None:
            state = _start_keeper(home, folder)
        else:
            note = other_address(state, os.environ)
        return ServerUse(
            f"http://{url_host(str(state['advertise']))}:{state['port']}",
            int(state["pid"]),
            int(state["started"]),
            note,
            read_token(folder),
        )
    except OSError as exc:
        raise ServerUnavailable(f"its token cannot be read: {exc}") from None
    finally:
        os.close(lock_fd)  # releases `lock`


def join_server(home: Path, keeper_pid: int, keeper_started: int) -> bool:
    """A use of that keeper's server if it still runs on this machine (never a new one: its port
    would differ from the one a job's ranks were given); whether this process holds one now."""
    try:
        folder = server_folder(home)
        lock_fd = _open_lock(folder / "lock")
    except (OSError, ServerUnavailable):
        return False
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)  # a keeper that is quitting holds it: then it is gone
        state = verified_state(home)
        if state is None or state.get("pid") != keeper_pid or state.get("started") != keeper_started:
            return False
        _hold_use(home, folder)
        return True
    finally:
        os.close(lock_fd)


def _hold_use(home: Path, folder: Path) -> None:
    if home in _held:
        return
    fd = _open_lock(folder / "users")
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held[home] = fd


def leave_lease(home: Path, job_name: str) -> None:
    """Keep the server for `job_name` for LEASE_SECONDS from now, without a process holding a use.

    Called while this process still holds its own use, so the server cannot end in between.
    """
    folder = server_folder(home) / LEASES
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(folder / job_name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.utime(fd)  # the lease runs from its file's modification time
    finally:
        os.close(fd)


def drop_lease(home: Path, job_name: str) -> None:
    try:
        os.unlink(home / "mlflow-server" / LEASES / job_name)
    except OSError:
        pass


def leased(folder: Path, now: float) -> bool:
    """Whether a job's lease on the server in `folder` (DISTRUN_HOME/mlflow-server) still runs."""
    try:
        names = os.listdir(folder / LEASES)
    except OSError:
        return False
    for name in names:
        try:
            info = os.lstat(folder / LEASES / name)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_mtime + LEASE_SECONDS > now:
            return True
    return False


def waited_on_at(home: Path) -> float | None:
    """The last moment a client of DISTRUN_HOME's server was waiting for its answer (seconds since
    the epoch; about now while one waits), or None. A rank waiting there is waiting on distrun,
    not hung: the hang watchdog takes this as progress."""
    try:
        info = os.lstat(home / "mlflow-server" / WAITING_FILE)
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


def held_uses() -> tuple[int, ...]:
    """The open `users` files whose locks this process holds: a background process given them
    (`pass_fds`) holds the same uses from its first instruction (the lock belongs to the open
    file, not to a process), so the server cannot end between this process's exit and its start."""
    return tuple(_held.values())


def release_use(home: Path) -> None:
    """Give the use back before this process ends (the kernel does it at exit anyway)."""
    fd = _held.pop(home, None)
    if fd is not None:
        os.close(fd)


def read_state(home: Path) -> dict[str, object] | None:
    try:
        data = json.loads(read_regular(home / "mlflow-server" / "state.json"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def verified_state(home: Path) -> dict[str, object] | None:
    """The state file, if it describes a keeper of this DISTRUN_HOME that is alive now."""
    state = read_state(home)
    if state is None:
        return None
    try:
        pid, started, port = int(state["pid"]), int(state["started"]), int(state["port"])  # type: ignore[call-overload]
        str(state["advertise"])
    except (KeyError, TypeError, ValueError):
        return None
    if not _alive_lock_held(home) or procfs.start_time(pid) != started:
        return None
    argv = procfs.command_line(pid).split(b"\0")
    if b"distrun.metrics.server_keeper" not in argv or str(home).encode() not in argv:
        return None
    listening = procfs.listening_sockets(port)
    if not listening or not listening & procfs.socket_inodes(pid):
        return None
    return state


def _alive_lock_held(home: Path) -> bool:
    try:
        fd = _open_lock(home / "mlflow-server" / "alive")
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def other_address(state: Mapping[str, object], environ: Mapping[str, str]) -> str | None:
    """What to tell a job that asked for an address the running server does not have: the
    address is chosen when the server starts, and one server serves the jobs of a DISTRUN_HOME."""
    if not (environ.get(HOST_VARIABLE) or environ.get(ADVERTISE_VARIABLE)):
        return None  # nothing asked: whatever runs serves this machine's ranks
    host, advertise = wanted_address(environ)
    if (host, advertise) == (state.get("host"), state.get("advertise")):
        return None
    return (
        f"{HOST_VARIABLE}={host} ({ADVERTISE_VARIABLE}={advertise}) is not used: this DISTRUN_HOME's MLflow "
        f"server already runs on {state.get('host')} for other jobs, and this job's ranks get "
        f"http://{url_host(str(state.get('advertise')))}:{state.get('port')}; the address you set is used "
        "by the next server, once this one has ended (after its last job: DISTRUN_MLFLOW_SERVER_IDLE, 20 s)"
    )


def read_token(folder: Path) -> str:
    """The running keeper's token (raises OSError when there is none)."""
    token = read_regular(folder / TOKEN_FILE, TOKEN_LIMIT).decode("ascii", "replace").strip()
    if not token:
        raise OSError(f"{folder / TOKEN_FILE} is empty")
    return token


def _new_token(folder: Path) -> None:
    """A new token for the keeper about to start, readable by this user alone (the folder is too)."""
    path = folder / TOKEN_FILE
    path.unlink(missing_ok=True)
    create_file(path, secrets.token_urlsafe(32).encode("ascii"), 0o600)


def _start_keeper(home: Path, folder: Path) -> dict[str, object]:
    (folder / "state.json").unlink(missing_ok=True)
    try:
        _new_token(folder)
    except OSError as exc:
        raise ServerUnavailable(f"its token cannot be written: {exc}") from None
    host, advertise = wanted_address(os.environ)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    try:
        with open(folder / "keeper.log", "ab") as log:
            keeper = subprocess.Popen(
                [sys.executable, "-m", "distrun.metrics.server_keeper", str(home), host, advertise],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=home,
                start_new_session=True,  # shared by jobs: not ended by the Ctrl-C of the one that started it
            )
    except OSError as exc:
        raise ServerUnavailable(f"its keeper could not be started: {exc}") from None
    assert keeper.stdout is not None
    line = _first_line(keeper.stdout.fileno(), START_SECONDS)
    keeper.stdout.close()
    if not line.strip().isdigit():
        said = line.strip() or f"no port within {START_SECONDS:.0f} s (see {folder / 'keeper.log'})"
        raise ServerUnavailable(f"its keeper did not start: {said}")
    state = read_state(home)
    if state is None or state.get("pid") != keeper.pid:
        raise ServerUnavailable("its keeper started but wrote no state")
    return state


def _first_line(fd: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode("utf-8", "replace")


def server_failure(home: Path, keeper_pid: int, keeper_started: int) -> str | None:
    """Why that keeper's server failed, if it did (None when it served, or is gone)."""
    state = read_state(home)
    if state is None or state.get("pid") != keeper_pid or state.get("started") != keeper_started:
        return None
    failure = state.get("failure")
    return str(failure) if failure else None
