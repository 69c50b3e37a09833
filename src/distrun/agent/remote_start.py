"""Start a command on another node of the job through that node's agent: mpirun's remote shell.

Open MPI's `mpirun` reaches the other hosts of a job with a remote shell (`ssh HOST orted ...`)
or a resource manager (Slurm). A node of a job on an engine with neither (Ray, Kubernetes) runs
distrun's node agent instead, and mpirun gets this module as its remote shell
(`OMPI_MCA_plm_rsh_agent="python -m distrun.agent.remote_start"`):

- `python -m distrun.agent.remote_start HOST COMMAND...` (the client, what mpirun runs) looks
  HOST up in DISTRUN_REMOTE_START (JSON: host -> "address:port" of that node's agent), connects
  over TCP, proves it belongs to the job with the per-job token (DISTRUN_REMOTE_START_TOKEN),
  sends the command, relays its stdout and stderr, and exits with its exit code. A SIGTERM or
  SIGINT, or the connection's end, stops the remote command.
- `RemoteStartServer` (in each node's agent) accepts such requests, runs the command with
  `/bin/sh -c` (as sshd would) in its own process group, with the agent's environment (its
  launch marker included: the agent's sweep and watchdog end it like any rank), and kills the
  group when the client goes away.

Engine-free: only sockets and processes. Frames: one kind byte (o: stdout, e: stderr, x: exit
code, as text), a 4-byte big-endian length, the payload. The request is one JSON line.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import BinaryIO

HOSTS_ENV = "DISTRUN_REMOTE_START"
TOKEN_ENV = "DISTRUN_REMOTE_START_TOKEN"
CONNECT_TIMEOUT_S = 30.0
# How long the client waits for a node agent to listen: each node's agent starts on its own, and
# node 0's mpirun may ask before node k's agent is up (a loaded node can take minutes).
AGENT_WAIT_S = 300.0
MAX_REQUEST = 1 << 20
_HEADER = struct.Struct(">cI")


def agent_command(python: str) -> str:
    """The value for mpirun's remote shell (OMPI_MCA_plm_rsh_agent): `python -m distrun.agent.remote_start`,
    or `python ZIP distrun.agent.remote_start` where distrun runs from a zip (a Kubernetes pod)."""
    from distrun.core.module_command import module_argv

    return " ".join(module_argv("distrun.agent.remote_start", python))


def client_env(hosts: Mapping[str, str], token: str, python: str) -> dict[str, str]:
    """What mpirun's environment needs so that it starts its daemons through the nodes' agents."""
    return {
        HOSTS_ENV: json.dumps(dict(hosts)),
        TOKEN_ENV: token,
        "OMPI_MCA_plm_rsh_agent": agent_command(python),
        # Every daemon is started from mpirun's node: the others have no client settings to pass on.
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
    }


def _send(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(kind, len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)


# ---------------------------------------------------------------- server (in a node's agent)


class RemoteStartServer:
    """Serves remote starts for one job on one node, until `close`."""

    def __init__(
        self,
        token: str,
        port: int,
        host: str = "0.0.0.0",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.token = token
        self.env = dict(os.environ if env is None else env)
        # Where commands start (like ssh's home): the requester's folder may not exist on this host.
        self.cwd = cwd
        if cwd:
            from distrun.agent.working_folders import make_artifact_dirs

            make_artifact_dirs([cwd])  # the ranks mpirun starts here find ./outputs and ./logs, as node 0's do
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = self._read_request(conn)
            except (OSError, ValueError) as exc:
                with contextlib.suppress(OSError):
                    _send(conn, b"e", f"distrun remote start refused: {exc}\n".encode())
                    _send(conn, b"x", b"255")
                return
            try:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", request["command"]],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=self.env,
                    cwd=self.cwd if self.cwd and os.path.isdir(self.cwd) else None,
                    start_new_session=True,
                )
            except OSError as exc:
                with contextlib.suppress(OSError):
                    _send(conn, b"e", f"distrun remote start: {exc}\n".encode())
                    _send(conn, b"x", b"127")
                return
            with self.lock:
                self.procs.append(proc)
            send_lock = threading.Lock()
            pumps = [
                threading.Thread(target=self._pump, args=(pipe, kind, conn, send_lock), daemon=True)
                for pipe, kind in ((proc.stdout, b"o"), (proc.stderr, b"e"))
            ]
            for pump in pumps:
                pump.start()
            # The client's end (mpirun gone, or a stop) ends the command's whole group.
            watcher = threading.Thread(target=self._watch_client, args=(conn, proc), daemon=True)
            watcher.start()
            code = proc.wait()
            for pump in pumps:
                pump.join()
            with contextlib.suppress(OSError), send_lock:
                _send(conn, b"x", str(code).encode())

    def _read_request(self, conn: socket.socket) -> dict[str, str]:
        conn.settimeout(CONNECT_TIMEOUT_S)
        line = bytearray()
        while not line.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise ValueError("no request")
            line += chunk
            if len(line) > MAX_REQUEST:
                raise ValueError("request too large")
        conn.settimeout(None)
        request = json.loads(line)
        if not isinstance(request, dict) or not isinstance(request.get("command"), str):
            raise ValueError("malformed request")
        if not hmac.compare_digest(str(request.get("token", "")).encode(), self.token.encode()):
            raise ValueError("wrong job token")
        return request

    @staticmethod
    def _pump(pipe: BinaryIO, kind: bytes, conn: socket.socket, send_lock: threading.Lock) -> None:
        for chunk in iter(lambda: pipe.read1(1 << 16), b""):  # type: ignore[attr-defined]
            with contextlib.suppress(OSError), send_lock:
                _send(conn, kind, chunk)

    @staticmethod
    def _watch_client(conn: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass
        if proc.poll() is None:
            _kill_group(proc.pid, signal.SIGTERM)

    def close(self) -> None:
        """Stop accepting; SIGKILL every command still running (the agent's stop path has its own grace)."""
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        with self.lock:
            for proc in self.procs:
                if proc.poll() is None:
                    _kill_group(proc.pid, signal.SIGKILL)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# ---------------------------------------------------------------- client (mpirun's remote shell)


def agent_of(hosts: Mapping[str, str], host: str) -> str | None:
    """Where HOST's agent listens. Open MPI asks for a host by its first label (it drops the
    domain unless told to keep it): `pod-0` for `pod-0.job`, a name cluster DNS may not resolve
    from another pod. So a host not known as given is the one known host name (not an IP
    address) with that first label."""
    if host in hosts:
        return str(hosts[host])
    same = [where for name, where in hosts.items() if name.split(".", 1)[0] == host and not _is_address(name)]
    return str(same[0]) if len(same) == 1 else None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _fail(message: str) -> int:
    sys.stderr.write(f"distrun remote start: {message}\n")
    return 255  # what ssh returns when it could not run the command


def _connect(address: str, port: int) -> socket.socket | OSError:
    """Connect, polling while the agent there is not listening yet (the nodes' agents start independently)."""
    give_up = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            if time.monotonic() >= give_up:
                return exc
            time.sleep(0.2)


def main(argv: list[str]) -> int:
    # Open MPI may put ssh-style options before the host; none of them matter here.
    while argv and argv[0].startswith("-"):
        argv = argv[1:]
    if len(argv) < 2:
        return _fail("usage: python -m distrun.agent.remote_start HOST COMMAND...")
    host, command = argv[0], " ".join(argv[1:])
    try:
        hosts = json.loads(os.environ.get(HOSTS_ENV, "{}"))
    except ValueError:
        hosts = {}
    where = agent_of(hosts, host)
    if not where:
        return _fail(f"{host} is not a node of this job (known: {', '.join(sorted(hosts)) or 'none'})")
    address, _, port = str(where).rpartition(":")
    sock = _connect(address, int(port))
    if isinstance(sock, OSError):
        return _fail(f"cannot reach the node agent of {host} at {where} within {AGENT_WAIT_S:g} s: {sock}")
    sock.settimeout(None)
    request = {"token": os.environ.get(TOKEN_ENV, ""), "command": command}
    sock.sendall(json.dumps(request).encode() + b"\n")

    def stop(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)  # the server ends the command's group

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    outputs = {b"o": sys.stdout.buffer, b"e": sys.stderr.buffer}
    try:
        while True:
            kind, size = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
            payload = _recv_exact(sock, size)
            if kind == b"x":
                return int(payload)
            out = outputs.get(kind)
            if out is not None:
                out.write(payload)
                out.flush()
    except (OSError, ValueError, struct.error) as exc:
        return _fail(f"lost the node agent of {host}: {exc}")
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
