"""A real Ray cluster of N nodes on this one machine, inside a network namespace that has only `lo`.

Ray advertises, and connects to, the machine's external interface address even when told
127.0.0.1. Inside a network namespace whose only interface is the loopback, 127.0.0.1 is the
only address it can find, so nothing the cluster (or a job using it) sends ever leaves
127.0.0.0/8. Creating the namespace needs root (`unshare -n`).

A small holder process (`sleep`) keeps the namespace alive; every Ray process, and every
command a test runs against the cluster, enters it with `nsenter --net=/proc/<holder>/ns/net`
(`RayCluster.command(argv)`). Node k listens on 127.0.0.<k+1> (all of 127.0.0.0/8 is `lo`), so
that the nodes are different hosts to whoever compares addresses (mpirun). Node k gets the
custom resource `{"<prefix>node<k>": 1}`, so a test can tell which Ray node a process ran on.
Every file lives under one short temp folder (Ray's socket paths must stay below the AF_UNIX
limit).

`stop()` ends every process inside the namespace (Ray's daemons, its workers, anything a job
left) and raises if one survives: whatever ran in the namespace, nothing is left.

From a shell, to try distrun against a real Ray cluster by hand:

    python3 tests/support/clusters/ray_cluster.py start /tmp/rc   # prints the address and the nsenter prefix
    nsenter --net=/proc/<holder>/ns/net distrun run job.yml --compute <a ray target>
    python3 tests/support/clusters/ray_cluster.py stop /tmp/rc
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HEAD_PORT = 6390  # any port works: the namespace has a port space of its own
CLIENT_PORT = HEAD_PORT + 1  # the head's Ray client server (`ray://` addresses)
RESOURCE_PREFIX = "distrun_test_"
# Ray's per-node processes listen on fixed default ports (dashboard agent, metrics, runtime
# env agent); two nodes on one host need their own. Each node k gets NODE_PORT_BASE + 10*k + i.
NODE_PORT_BASE = 20100
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # a test cluster needs little; Ray's default is 30% of RAM
STOP_WAIT_S = 20.0
# Ray's own daemons (GCS server, raylets, their runtime env agents, the autoscaler monitor) do not
# exit on SIGTERM: after a moment for whatever does, SIGKILL ends the rest of a cluster that is
# thrown away anyway.
TERM_WAIT_S = 1.0
START_ATTEMPTS = 5  # a loaded machine can still miss one of Ray's own start deadlines
# A raylet waits a fixed 15 s (no setting changes it) for its dashboard agent to write the port it
# listens on into the session folder, and aborts its node when the file is not there: on a busy
# machine the agent can need longer than that just to import. Each node here tells its agent that
# port (--dashboard-agent-listen-port), so the cluster writes the file itself as soon as the
# session folder exists, and the agent writes the same port again once it is up. The file is
# named after the node's id, which Ray takes from NODE_ID_VARIABLE where it is set.
AGENT_PORT_FILE = "dashboard_agent_listen_port_{}"
NODE_ID_VARIABLE = "RAY_OVERRIDE_NODE_ID_FOR_TESTING"
# Ray gives a starting node 60 s to register, its raylet 30 s to see its agents' ports and a
# worker process 60 s to register: too little on a loaded test machine (the raylet aborts).
# Same values as distrun's `type: ray`. And no worker processes started ahead of need (one per
# CPU, each importing Ray at the moment the node starts): a start then costs less CPU.
SLOW_MACHINE_SETTINGS = {
    "RAY_raylet_start_wait_time_s": "120",
    "RAY_agent_register_timeout_ms": "300000",
    "RAY_worker_register_timeout_seconds": "120",
    "RAY_enable_worker_prestart": "0",
}
# Ray's memory monitor kills a node's workers once the machine's memory is 95% used, whoever uses
# it. A test cluster's nodes share the machine with every other test (and whatever else runs
# there), so the monitor is off: a test fails for its own job, not for another process's memory.
# The `type: ray` test sets the same in its job's environment_variables, for the cluster distrun starts.
NO_MEMORY_MONITOR = {"RAY_memory_monitor_refresh_ms": "0"}
LOG_TAIL_LINES = 15


class RayClusterError(RuntimeError):
    """The cluster could not be started, or left something behind."""


def missing_tools() -> list[str]:
    return [tool for tool in ("ray", "unshare", "nsenter", "ip") if shutil.which(tool) is None]


def _netns_of(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


@dataclass
class RayCluster:
    root: Path
    node_count: int = 2
    cpus_per_node: int = 2
    holder: subprocess.Popen[bytes] | None = None
    netns: str = ""  # e.g. "net:[4026532512]", the namespace's identity
    started: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)  # for the Ray nodes (and the workers they start)
    temp_dir: Path = Path()  # Ray's temp dir of the current start attempt

    @property
    def address(self) -> str:
        return f"127.0.0.1:{HEAD_PORT}"

    @property
    def client_address(self) -> str:
        return f"ray://127.0.0.1:{CLIENT_PORT}"

    @property
    def netns_path(self) -> str:
        assert self.holder is not None, "the cluster is not started"
        return f"/proc/{self.holder.pid}/ns/net"

    def node_address(self, node: int) -> str:
        """Node k listens on 127.0.0.<k+1>: every 127.x address reaches `lo`, and nodes that differ in
        address are different hosts to the tools that look (mpirun starts ranks on node 1 remotely)."""
        return f"127.0.0.{node + 1}"

    def node_resource(self, node: int) -> str:
        return f"{RESOURCE_PREFIX}node{node}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # A loaded test machine can take longer than Ray's 60 s to register a starting node.
        env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"})
        env.update(SLOW_MACHINE_SETTINGS)
        env.update(NO_MEMORY_MONITOR)
        env.pop("RAY_ADDRESS", None)
        env.update(self.extra_env)
        return env

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the cluster's network namespace."""
        return ["nsenter", f"--net={self.netns_path}", "--", *argv]

    def run(self, argv: Sequence[str], timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("env", self.env())
        return subprocess.run(
            self.command(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,  # type: ignore[arg-type]
        )

    # ------------------------------------------------------------ start

    def start(self) -> None:
        missing = missing_tools()
        if missing:
            raise RayClusterError(f"missing {', '.join(missing)}: run scripts/deps/45-ray.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        failures: list[str] = []
        for attempt in range(1, START_ATTEMPTS + 1):
            self.temp_dir = self.root / f"ray{attempt}"
            self._new_namespace()
            try:
                for node in range(self.node_count):
                    self._start_node(node)
                self.wait_for_nodes(self.node_count)
                return
            except RayClusterError as exc:
                # On a loaded machine a raylet can abort while its agents start: end everything,
                # and start again in a fresh namespace; the error shows every attempt's logs.
                failures.append(f"attempt {attempt}: {exc}\n{self.log_tail()}")
                print(f"Ray test cluster: start attempt {attempt} failed, retrying:\n{failures[-1]}", file=sys.stderr)
                self.stop(check=False)
                if attempt == START_ATTEMPTS:
                    raise RayClusterError("\n\n".join(failures)) from None
            except BaseException:
                self.stop(check=False)
                raise

    def _new_namespace(self) -> None:
        self.started.clear()
        self.holder = subprocess.Popen(
            ["unshare", "-n", "--", "bash", "-c", "ip link set lo up && echo ready && exec sleep infinity"],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != b"ready":
            self.holder.wait(5)
            raise RayClusterError("could not create a network namespace (unshare -n needs root)")
        self.netns = _netns_of(self.holder.pid) or ""
        (self.root / "pid").write_text(str(self.holder.pid))

    def _start_node(self, node: int) -> None:
        ports = [NODE_PORT_BASE + 10 * node + i for i in range(6)]
        argv = [
            "ray",
            "start",
            f"--node-ip-address={self.node_address(node)}",
            f"--num-cpus={self.cpus_per_node}",
            "--num-gpus=0",
            f"--resources={json.dumps({self.node_resource(node): 1})}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--disable-usage-stats",
            f"--dashboard-agent-listen-port={ports[0]}",
            f"--dashboard-agent-grpc-port={ports[1]}",
            f"--metrics-export-port={ports[2]}",
            f"--runtime-env-agent-port={ports[3]}",
            f"--node-manager-port={ports[4]}",
            f"--object-manager-port={ports[5]}",
            f"--min-worker-port={30000 + 2000 * node}",
            f"--max-worker-port={30000 + 2000 * node + 1999}",
            # Nothing reads the workers' logs through Ray (distrun's driver sets log_to_driver=False):
            # a log monitor per node would only poll their files for the whole session.
            "--include-log-monitor=false",
        ]
        if node == 0:
            argv += [
                "--head",
                f"--port={HEAD_PORT}",
                f"--temp-dir={self.temp_dir}",
                "--include-dashboard=false",
                f"--ray-client-server-port={CLIENT_PORT}",
            ]
        else:
            argv += [f"--address={self.address}"]
        node_id = self.node_id(node)
        done = threading.Event()
        writer = threading.Thread(target=self._write_agent_port, args=(node_id, ports[0], done), daemon=True)
        writer.start()
        try:
            # minutes on a loaded machine
            result = self.run(argv, timeout=300, env={**self.env(), NODE_ID_VARIABLE: node_id})
        finally:
            done.set()
            writer.join()
        self.started.append(" ".join(argv))
        if result.returncode != 0:
            raise RayClusterError(f"ray start for node {node} failed:\n{result.stdout}\n{result.stderr}")

    def node_id(self, node: int) -> str:
        """Node k's Ray node id (28 bytes, in hex), fixed so that its files can be named ahead."""
        return f"{node + 1:056x}"

    def _write_agent_port(self, node_id: str, port: int, done: threading.Event) -> None:
        """Write the node's AGENT_PORT_FILE into the attempt's session folder once there is one
        (both nodes share it), unless the agent already did; stop when `ray start` has returned."""
        name = AGENT_PORT_FILE.format(node_id)
        while not done.is_set():
            for session in self.temp_dir.glob("session_2*"):  # not `session_latest`, a link to it
                target = session / name
                if target.exists():
                    return
                hidden = session / f".{name}"
                try:
                    hidden.write_text(f"{port}")
                    hidden.replace(target)  # read whole or not at all
                    return
                except OSError:
                    break  # the attempt's folder went away: look again
            done.wait(0.05)

    def log_tail(self) -> str:
        """The end of the Ray logs this attempt wrote (newest last), for an error message."""
        logs = self.temp_dir / "session_latest" / "logs"
        try:
            files = sorted(
                (p for p in logs.iterdir() if p.suffix in (".out", ".err", ".log") and p.stat().st_size),
                key=lambda p: p.stat().st_mtime,
            )
        except OSError:
            return f"(no Ray logs under {logs})"
        parts = []
        for path in files[-4:]:
            lines = path.read_bytes()[-4000:].decode(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            parts.append(f"--- {path}\n" + "\n".join(lines))
        return "\n".join(parts)

    def wait_for_nodes(self, count: int, timeout: float = 120) -> None:
        script = (
            "import ray, sys, time\n"
            f"ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False)\n"
            f"give_up = time.monotonic() + {timeout}\n"
            f"while sum(n['Alive'] for n in ray.nodes()) < {count}:\n"
            "    if time.monotonic() > give_up: sys.exit('nodes did not join: %s' % ray.nodes())\n"
            "    time.sleep(0.2)\n"
        )
        result = self.run([sys.executable, "-c", script], timeout=timeout + 60)
        if result.returncode != 0:
            raise RayClusterError(f"the Ray cluster did not come up:\n{result.stdout}\n{result.stderr}")

    # ------------------------------------------------------------ processes and stop

    def processes(self) -> list[int]:
        """Every live process inside the namespace, other than the holder."""
        if not self.netns or self.holder is None:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.holder.pid and _netns_of(entry) == self.netns:
                try:
                    with open(f"/proc/{entry}/stat", "rb") as handle:
                        stat = handle.read()
                except OSError:
                    continue
                if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X"):
                    found.append(int(entry))
        return found

    def describe(self, pids: Sequence[int]) -> str:
        lines = []
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmdline = "?"
            lines.append(f"  {pid}: {cmdline[:200]}")
        return "\n".join(lines)

    def stop(self, check: bool = True) -> None:
        """End everything inside the namespace: SIGTERM, then SIGKILL; raise if any survives."""
        left = self._end_processes()
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait(10)
        if check and left:
            raise RayClusterError(f"processes survived SIGKILL in the Ray namespace:\n{self.describe(left)}")

    def _end_processes(self) -> list[int]:
        """SIGTERM, then SIGKILL, every process in the namespace; returns those that survived."""
        left: list[int] = []
        for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, STOP_WAIT_S)):
            for pid in self.processes():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            give_up = time.monotonic() + wait
            while self.processes() and time.monotonic() < give_up:
                time.sleep(0.1)
            left = self.processes()
            if not left:
                break
        return left

    def __enter__(self) -> RayCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(check=exc[0] is None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    if args.action == "start":
        cluster = RayCluster(args.root)
        cluster.start()
        assert cluster.holder is not None
        # The holder outlives this command (its own session); `stop` finds it by its pid file.
        print(f"Ray cluster at {cluster.address}; run commands with: nsenter --net={cluster.netns_path} -- ...")
        return 0
    pid = int((args.root / "pid").read_text())
    cluster = RayCluster(args.root)
    cluster.netns = _netns_of(pid) or ""
    cluster.holder = _Adopted(pid)  # type: ignore[assignment]
    cluster.stop()
    return 0


class _Adopted:
    """The holder started by an earlier `start` command, which is not our child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> None:
        give_up = time.monotonic() + timeout
        while _netns_of(self.pid) and time.monotonic() < give_up:
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
