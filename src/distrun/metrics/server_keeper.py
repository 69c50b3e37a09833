"""`python -m distrun.metrics.server_keeper HOME HOST ADVERTISE`: DISTRUN_HOME's MLflow server, kept while jobs use it.

Started by `distrun.metrics.tracking_server` for the first tracked job of a DISTRUN_HOME, in a
session of its own, it:

- binds the address the ranks are given (HOST, port chosen by the kernel) at once, and says the
  port on stdout: the job's ranks start while the server is still importing mlflow (seconds), and
  a connection made before the server is up waits for it instead of being refused;
- admits a connection only when its first request carries the server's token
  (`Authorization: Bearer TOKEN`, which every MLflow client sends from MLFLOW_TRACKING_TOKEN: the
  job's ranks get it, and the token file is the owner's alone); any other local user reaching
  the port gets 401 (403 for a wrong token) and the server is never started for it;
- starts `mlflow server` on distrun's store (DISTRUN_HOME/mlflow.db, artifacts in
  DISTRUN_HOME/mlartifacts) on a Unix socket in DISTRUN_HOME/mlflow-server (a folder only its
  owner can enter: no other user reaches the server past the keeper) when the first admitted
  connection comes (a job whose ranks never call MLflow costs no server: its start is two
  imports of mlflow, seconds of CPU), as a helper process (it dies with the keeper, however the
  keeper ends), and relays each admitted connection to it;
- while the server starts, answers a rank's first metric itself (`early_answers`: the requests
  a first `mlflow.log_metric` sends, written into distrun's store), so the first metric does not
  wait for the server's start; any other request waits for the server;
- when the server cannot start or ends, answers every request with an MLflow error that says why
  (HTTP 400, which MLflow's clients do not retry: the rank's call fails at once) and writes the
  reason into its state file, where the job's supervisor reads it;
- while any admitted request waits for its answer (the server starting, or answering slowly on
  a loaded machine), touches `waiting` every POLL: the hang watchdog counts a rank waiting on
  distrun's own server as progress, never as a hang (`tracking_server.waited_on_at`);
- ends (and its server with it) once no job holds a use of it (a shared lock on `users`, which
  the kernel drops when the job's distrun process ends, SIGKILL included) and no lease of a
  submitted job runs (`tracking_server.leave_lease`) for IDLE_SECONDS.
"""

from __future__ import annotations

import asyncio
import fcntl
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from distrun.core import procfs
from distrun.core.file_modes import write_file
from distrun.core.helper_processes import start_helper
from distrun.metrics import early_answers
from distrun.metrics.tracking_server import SERVER_SOCKET, WAITING_FILE, leased, read_token

IDLE_SECONDS = 20.0  # no user for this long: the server ends (back-to-back jobs reuse it)
IDLE_VARIABLE = "DISTRUN_MLFLOW_SERVER_IDLE"  # seconds, for a shorter or longer grace
READY_SECONDS = 180.0  # the server must listen within this, else it counts as failed
READY_VARIABLE = "DISTRUN_MLFLOW_SERVER_READY"  # seconds, for a slower machine (or a test's failure)
_POLL = 0.2
HEAD_LIMIT = 64 << 10  # a request's line and headers; MLflow's clients send well under 2 KiB
HEAD_SECONDS = 10.0  # a connection that sends no request head within this is closed
# Public settings of `mlflow server` (releases that do not know them ignore them): no job-runner
# processes (each imports mlflow again, beside the server's own start) and no usage reports.
SERVER_SETTINGS = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}


def allowed_hosts(advertise: str) -> str:
    """`mlflow server`'s Host-header allow list (MLFLOW_SERVER_ALLOWED_HOSTS, fnmatch patterns):
    the loopback names and the name the ranks are given. Its default admits loopback and private
    addresses only, so ranks given a host name (DISTRUN_MLFLOW_ADVERTISE) would be refused."""
    names = ["localhost", "127.0.0.1", "[::1]", f"[{advertise}]" if ":" in advertise else advertise]
    patterns = []
    for name in dict.fromkeys(names):
        patterns += [name, name.replace("[", "[[]") + ":*"]  # compared as is / as a pattern (`[` is fnmatch's)
    return ",".join(patterns)


class Keeper:
    def __init__(self, folder: Path, home: Path, advertise: str, log_fd: int, token: str) -> None:
        self.folder = folder
        self.home = home
        self.advertise = advertise
        self.log_fd = log_fd  # server.log, opened when the keeper starts (a log that cannot be is said at once)
        self.token = token
        self.socket_path = Path(SERVER_SOCKET)  # in the keeper's working folder, `folder`
        self.waiting: set[int] = set()  # admitted connections whose request has no answer yet
        self.server_pid = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.watcher: asyncio.Future[None] | None = None
        self.ready = False
        self.ready_after: float | None = None  # seconds from the server's start to serving
        self.failure: str | None = None
        self.changed = asyncio.Event()  # set when ready or failure is known
        self.started = procfs.start_time(os.getpid())

    def start_server(self) -> None:
        """Start `mlflow server` (once): the first connection asks for it."""
        if self.process is not None or self.failure is not None:
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env.update(SERVER_SETTINGS, MLFLOW_SERVER_ALLOWED_HOSTS=allowed_hosts(self.advertise))
        try:
            self.socket_path.unlink(missing_ok=True)  # a previous server's, which would refuse the bind
            argv = server_argv(self.home, free_local_port())
            # Started in its folder: the socket's path is given relative to it, as a Unix socket's
            # path is short (108 bytes) and DISTRUN_HOME's may be long.
            self.process = start_helper(
                argv, env, stdin=subprocess.DEVNULL, stdout=self.log_fd, stderr=self.log_fd, cwd=self.folder
            )
        except OSError as exc:
            self.failure = f"`mlflow server` could not be started: {exc}"
            self.changed.set()
            return
        finally:
            os.close(self.log_fd)
            self.log_fd = -1
        self.server_pid = self.process.pid
        self.watcher = asyncio.ensure_future(watch_server(self, self.process, self.folder / "server.log"))

    def state(self, port: int, host: str, advertise: str) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "started": self.started,
            "host": host,
            "advertise": advertise,
            "port": port,
            "server_pid": self.server_pid,
            "ready_after": self.ready_after,
            "failure": self.failure,
        }


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_argv(home: Path, port: int) -> list[str]:
    """`mlflow server` on distrun's store, one worker (the lightest serving this mlflow offers),
    listening on SERVER_SOCKET in its working folder (uvicorn serves a Unix socket in place of
    the host and port, which `mlflow server` still asks for)."""
    artifacts = home / "mlartifacts"
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{home / 'mlflow.db'}",
        "--default-artifact-root",
        artifacts.as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--uvicorn-opts",
        f"--uds {SERVER_SOCKET}",
    ]


def listens(path: Path) -> bool:
    """Whether a server listens on the Unix socket at `path` (bound is not enough: a connection is
    refused until it listens). Only this user can make a socket in the server's folder."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def log_tail(path: Path, size: int = 2000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - size))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return " / ".join(lines[-3:])


async def watch_server(keeper: Keeper, process: subprocess.Popen[bytes], log: Path) -> None:
    """Mark the keeper ready once the server listens (its own socket), or failed once it ends."""
    began = time.monotonic()
    limit = seconds_from(READY_VARIABLE, READY_SECONDS)
    deadline = began + limit
    while True:
        code = process.poll()
        if code is not None:
            said = log_tail(log) or "no output"
            keeper.failure = f"`mlflow server` exited with code {code} ({said}; its log: {log})"
            keeper.ready = False
            keeper.changed.set()
            return
        if not keeper.ready:
            if listens(keeper.socket_path):
                keeper.ready = True
                keeper.ready_after = round(time.monotonic() - began, 1)
                print(f"mlflow server serving after {keeper.ready_after} s", file=sys.stderr, flush=True)
                keeper.changed.set()
            elif time.monotonic() > deadline:
                keeper.failure = f"`mlflow server` did not listen within {limit:g} s (its log: {log})"
                keeper.changed.set()
                process.kill()
                return
        await asyncio.sleep(_POLL)


async def relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter, moved: Callable[[], None]) -> None:
    try:
        while data := await source.read(65536):
            moved()
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            sink.close()
        except (ConnectionError, OSError):
            pass


def error_response(reason: str) -> bytes:
    message = f"distrun: this job's metrics are not recorded: the MLflow server could not start: {reason}"
    return answer(400, "Bad Request", "TEMPORARILY_UNAVAILABLE", message)


def answer(code: int, phrase: str, error_code: str, message: str) -> bytes:
    """An MLflow error answer, the connection closed after it."""
    body = json.dumps({"error_code": error_code, "message": message}).encode()
    head = (
        f"HTTP/1.1 {code} {phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def bearer_token(head: bytes) -> str | None:
    """The token of a request head's `Authorization: Bearer TOKEN` header, if it has one."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return token.strip().decode("latin-1")
    return None


def refusal(head: bytes, token: str) -> bytes | None:
    """The answer to a first request that does not carry the server's token; None when it does."""
    given = bearer_token(head)
    if given is None:
        return answer(
            401,
            "Unauthorized",
            "UNAUTHENTICATED",
            "distrun: this MLflow server serves only the ranks of its DISTRUN_HOME's jobs, which get "
            "MLFLOW_TRACKING_TOKEN; this request carries no token",
        )
    if not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode()):
        return answer(
            403,
            "Forbidden",
            "PERMISSION_DENIED",
            "distrun: this MLflow server serves only the ranks of its DISTRUN_HOME's jobs: this token is not its own",
        )
    return None


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """A request's line and headers (up to the blank line), or None when none came in time."""
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=HEAD_SECONDS)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, OSError):
        return None


async def say_and_close(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        writer.write(data)
        await writer.drain()
        writer.close()
    except (ConnectionError, OSError):
        pass


async def serve_client(keeper: Keeper, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Admitted by its first request: the rest of the connection is the same client's.
    head = await read_head(reader)
    refused = b"" if head is None else refusal(head, keeper.token)
    if head is None or refused is not None:
        await say_and_close(writer, refused or b"")
        return
    key = id(writer)
    keeper.waiting.add(key)  # its first request, from now until the server's first byte back
    try:
        await serve_admitted(keeper, head, reader, writer, key)
    finally:
        keeper.waiting.discard(key)


async def serve_admitted(
    keeper: Keeper, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: int
) -> None:
    keeper.start_server()
    # Until the server serves, the keeper answers a rank's first metric itself (early_answers);
    # any other request is held until the server serves or has failed (bounded by READY_SECONDS):
    # a rank's call waits for the server instead of being refused while it starts.
    body = b""
    while not keeper.ready and keeper.failure is None:
        read = await answer_early(keeper, head, reader)
        if read is None:
            return  # the connection ended
        said, body = read
        if said is None:
            break
        body = b""  # answered: nothing of it goes to the server
        keeper.waiting.discard(key)
        try:
            writer.write(said)
            await writer.drain()
        except (ConnectionError, OSError):
            return
        next_head = await next_request(keeper, reader)
        if next_head is None:
            return
        head = next_head
        keeper.waiting.add(key)
    while not keeper.ready and keeper.failure is None:
        await keeper.changed.wait()
    if keeper.ready and keeper.failure is None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(keeper.socket_path))
        except OSError as exc:
            keeper.failure = keeper.failure or f"the server refused a connection: {exc}"
        else:
            up_writer.write(head + body)
            # A request going up waits until answer bytes come down (HTTP/1.1: one at a time).
            await asyncio.gather(
                relay(reader, up_writer, lambda: keeper.waiting.add(key)),
                relay(up_reader, writer, lambda: keeper.waiting.discard(key)),
            )
            return
    await say_and_close(writer, error_response(keeper.failure or "unknown"))


async def answer_early(keeper: Keeper, head: bytes, reader: asyncio.StreamReader) -> tuple[bytes | None, bytes] | None:
    """The keeper's own answer to the request of `head` (None: the server's to give) and the body
    it read; None when the connection ended before its body came."""
    method, target, headers = early_answers.request_line(head)
    length = early_answers.body_length(method, target, headers)
    if length is None:
        return None, b""
    try:
        body = await asyncio.wait_for(reader.readexactly(length), timeout=HEAD_SECONDS)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
        return None
    said = await asyncio.to_thread(early_answers.answer, keeper.home / "mlflow.db", method, target, body)
    return said, body


async def next_request(keeper: Keeper, reader: asyncio.StreamReader) -> bytes | None:
    """The next request head of an admitted connection; b"" when the server came up first (the
    rest of the connection is relayed to it), None when the connection ended."""
    head = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
    changed = asyncio.ensure_future(keeper.changed.wait())
    await asyncio.wait({head, changed}, return_when=asyncio.FIRST_COMPLETED)
    changed.cancel()
    if not head.done():
        head.cancel()
        return b""
    try:
        return head.result()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        return None


def mark_waiting(path: Path) -> None:
    """Touch `path`: a client of this server waits for an answer now."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        return
    try:
        os.utime(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def has_users(users_fd: int) -> bool:
    try:
        fcntl.flock(users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.flock(users_fd, fcntl.LOCK_UN)
    return False


def seconds_from(variable: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(variable, "")))
    except ValueError:
        return default


async def keep(folder: Path, home: Path, host: str, advertise: str) -> None:
    try:
        token = read_token(folder)
        listener = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        log_fd = os.open(folder / "server.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # the starting job reads this line as the reason
        print(f"error: {exc}", flush=True)
        return
    port = int(listener.getsockname()[1])
    keeper = Keeper(folder, home, advertise, log_fd, token)
    state_path = folder / "state.json"
    write_file(state_path, json.dumps(keeper.state(port, host, advertise)).encode())
    print(port, flush=True)  # the starting job reads this line: the ranks may start
    sys.stdout.close()

    users_fd = os.open(folder / "users", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    lock_fd = os.open(folder / "lock", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    server = await asyncio.start_server(lambda r, w: serve_client(keeper, r, w), sock=listener)
    said = keeper.state(port, host, advertise)
    grace = seconds_from(IDLE_VARIABLE, IDLE_SECONDS)
    idle_since: float | None = None
    while True:
        await asyncio.sleep(_POLL)
        if keeper.waiting:
            mark_waiting(folder / WAITING_FILE)
        if keeper.state(port, host, advertise) != said:  # started, serving or failed: the supervisors read it
            said = keeper.state(port, host, advertise)
            write_file(state_path, json.dumps(said).encode())
        if has_users(users_fd) or leased(folder, time.time()):
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since < grace:
            continue
        # Quitting: no job may take a use of this server meanwhile (they take `lock` first).
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if has_users(users_fd) or leased(folder, time.time()):
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            idle_since = None
            continue
        state_path.unlink(missing_ok=True)
        break  # `lock` is released when this process ends
    server.close()
    if keeper.watcher is not None:
        keeper.watcher.cancel()
    if keeper.log_fd >= 0:
        os.close(keeper.log_fd)
    process = keeper.process
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(process.wait), timeout=5)
        except asyncio.TimeoutError:
            process.kill()


def main(home: str, host: str, advertise: str) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # meant for the job that started it, not for a shared server
    folder = Path(home) / "mlflow-server"
    os.chdir(folder)  # the server's socket is named relative to it (a Unix socket's path is short)
    # Held for life: proof that the keeper named in state.json is alive (a lock, not a pid check).
    alive_fd = os.open(folder / "alive", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(alive_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("error: another server keeper runs for this DISTRUN_HOME", flush=True)
        return
    asyncio.run(keep(folder, Path(home), host, advertise))


if __name__ == "__main__":
    main(*sys.argv[1:4])
