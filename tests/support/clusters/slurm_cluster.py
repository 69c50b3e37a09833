"""A real Slurm cluster of N nodes on this one machine: munged, slurmctld and one slurmd per node.

Every file (munge key, slurm.conf, state, spool, logs, pid files) lives under one folder and
every port is picked free at start, so two clusters (or a system Slurm) do not collide. The
nodes are named n1, n2, ...; all run on this host at 127.0.0.1, each slurmd on its own port.
Clients find the cluster through SLURM_CONF (`SlurmCluster.env()`).

From Python (the test fixture does this):

    with SlurmCluster(Path("/tmp/slurm-demo")) as cluster:
        subprocess.run(["sinfo"], env=cluster.env(), check=True)

From a shell, to try distrun against a real Slurm by hand:

    python3 tests/support/clusters/slurm_cluster.py start /tmp/slurm-demo   # prints `export SLURM_CONF=...`
    python3 tests/support/clusters/slurm_cluster.py stop /tmp/slurm-demo

The daemons run in the foreground (no self-daemonizing), each in its own session; their pids
are kept in `<root>/run/cluster.pids`, so `stop` ends exactly the processes it started and
then checks that nothing of the cluster (daemons, job steps, job processes) is left.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "sinfo", "scancel")
# Set in the daemons' environment; their children (slurmscriptd, slurmstepd) inherit it, so
# `leftover_processes` can find them. Jobs do not see it: they get the submitter's environment.
ROOT_MARKER = "TEST_SLURM_CLUSTER_ROOT"
# AF_UNIX socket paths are limited to 108 bytes; munge's socket lives under the root.
MAX_SOCKET_PATH = 100


class SlurmClusterError(RuntimeError):
    """The cluster could not be started or stopped cleanly."""


def missing_tools() -> list[str]:
    return [tool for tool in DAEMONS + CLIENTS if shutil.which(tool) is None]


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def consecutive_free_ports(count: int, attempts: int = 100) -> list[int]:
    """slurm.conf gives the node daemons one port range, so their ports must be consecutive."""
    for _ in range(attempts):
        (first,) = free_ports(1)
        ports = list(range(first, first + count))
        if ports[-1] < 65536 and all(_port_free(p) for p in ports):
            return ports
    raise SlurmClusterError(f"found no {count} consecutive free ports")


@dataclass
class SlurmCluster:
    root: Path
    node_count: int = 2
    cpus_per_node: int = 2
    memory_mb: int = 2000
    partition: str = "debug"
    kill_wait: int = 5  # seconds between SIGTERM and SIGKILL when Slurm ends a job or step
    cred_expire: int = 120  # slurm.conf AuthInfo cred_expire: also how long a requeued job is held
    extra_conf: Sequence[str] = ()  # more slurm.conf lines
    hostname: str = field(default_factory=socket.gethostname)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).absolute()

    # ------------------------------------------------------------ layout

    @property
    def nodes(self) -> list[str]:
        return [f"n{i + 1}" for i in range(self.node_count)]

    @property
    def conf_path(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "run" / "munge.socket"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def pids_path(self) -> Path:
        return self.root / "run" / "cluster.pids"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for Slurm clients (sbatch, squeue, ...) that talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf_path)
        return env

    def slurm_conf(self, ctld_port: int, node_ports: Sequence[int]) -> str:
        state = self.root / "state"
        run = self.root / "run"
        nodes = f"n[1-{self.node_count}]" if self.node_count > 1 else "n1"
        ports = f"{node_ports[0]}-{node_ports[-1]}" if self.node_count > 1 else str(node_ports[0])
        lines = [
            "# A test cluster on one machine, written by tests/support/clusters/slurm_cluster.py.",
            "ClusterName=distrun-test",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire also holds a requeued job that long (plus 1 s) before it may start
            # again. Slurm's default is 120 s; 5 s is the least slurmctld accepts: below it,
            # slurmctld logs "AuthInfo=cred_expire=N invalid" and goes back to 120 s.
            f"AuthInfo=socket={self.munge_socket},cred_expire={self.cred_expire}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={state / 'ctld'}",
            f"SlurmdSpoolDir={state / 'spool' / '%n'}",
            f"SlurmctldPidFile={run / 'slurmctld.pid'}",
            f"SlurmdPidFile={run / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            # A batch job is scheduled when it is submitted. By default Slurm may hold it for
            # the next scheduling pass, up to 3 s later (batch_sched_delay): a random wait that
            # slows every test and would swamp what the Slurm benchmark compares.
            # A requeued job whose hold (cred_expire) is over is started only by a periodic
            # pass: the main scheduler's, every sched_interval (60 s by default), or backfill's
            # (every 30 s; even at bf_interval=1 it left a requeued job to the main pass). With
            # a main pass every second, a requeued job starts about cred_expire + 1 s after.
            "SchedulerParameters=batch_sched_delay=0,sched_interval=1",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            f"KillWait={self.kill_wait}",
            "InactiveLimit=0",
            "MinJobAge=300",
            *self.extra_conf,
            f"NodeName={nodes} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={ports} "
            f"CPUs={self.cpus_per_node} RealMemory={self.memory_mb} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP",
        ]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30.0) -> SlurmCluster:
        """Write the config, start the daemons, return once every node is idle."""
        missing = missing_tools()
        if missing:
            raise SlurmClusterError(
                f"Slurm is not installed (missing {', '.join(missing)}): run scripts/deps/40-slurm.sh"
            )
        if len(str(self.munge_socket)) > MAX_SOCKET_PATH:
            raise SlurmClusterError(f"cluster folder {self.root} is too long for a socket path: pick a shorter one")
        if self.pids_path.exists() and self._alive_recorded_pids():
            raise SlurmClusterError(f"a cluster is already running in {self.root}: stop it first")
        for sub in ("etc", "run", "log", "state/ctld", "state/spool", "munge/run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket folder that others may write to; every client must reach it.
        (self.root / "munge" / "run").chmod(0o755)
        key = self._write_munge_key()
        node_ports = consecutive_free_ports(self.node_count)
        (ctld_port,) = free_ports(1)
        self.conf_path.write_text(self.slurm_conf(ctld_port, node_ports))
        try:
            self._spawn(
                "munged",
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={self.munge_socket}",
                    f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                    f"--log-file={self.log_dir / 'munged.log'}",
                    f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                ],
            )
            self._wait_for(self.munge_socket.exists, timeout, "munged did not open its socket")
            # -i: ignore state left by an earlier cluster in the same folder.
            self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf_path)])
            for node in self.nodes:
                self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-f", str(self.conf_path), "-N", node])
            self._wait_for(self._all_idle, timeout, "the nodes did not become idle")
        except BaseException:
            with contextlib.suppress(SlurmClusterError):
                self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel every job, stop the daemons, and raise if any process of the cluster is left."""
        pids = self._recorded_pids()
        if pids.get("slurmctld") and _alive(pids["slurmctld"]):
            self._cancel_all_jobs(timeout)
        # Node daemons first (they still report to the controller), munged last.
        order = sorted(name for name in pids if name.startswith("slurmd-")) + ["slurmctld", "munged"]
        for name in order:
            if name in pids:
                self._terminate(name, pids[name], timeout=10)
        self._procs.clear()
        with contextlib.suppress(FileNotFoundError):
            self.pids_path.unlink()
        # A cancelled job's step processes end on their own signal: under load a few may still be
        # exiting when the daemons are gone. Only what is still there after a grace is left over.
        give_up = time.monotonic() + 10
        while (leftovers := self.leftover_processes()) and time.monotonic() < give_up:
            time.sleep(0.2)
        if leftovers:
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise SlurmClusterError(f"processes of the cluster were still running after stop (now killed): {leftovers}")

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ queries

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, check=check, timeout=timeout)

    def job_lookups(self) -> int:
        """How many times slurmctld was asked about one job (`scontrol show job ID`) since it started."""
        import re

        found = re.search(r"REQUEST_JOB_INFO_SINGLE\s*\(\s*\d+\)\s*count:(\d+)", self.run(["sdiag"]).stdout)
        return int(found.group(1)) if found else 0

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], check=False)
        states = {}
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def leftover_processes(self) -> list[int]:
        """Live pids that belong to this cluster: daemons, their children, and jobs' processes."""
        daemon_mark = f"{ROOT_MARKER}={self.root}\0"
        job_mark = f"SLURM_CONF={self.conf_path}\0"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if _state(int(entry.name)) == "Z":
                    continue  # already dead; only its parent can reap it
                environ = (entry / "environ").read_bytes().decode(errors="replace") + "\0"
            except OSError:
                continue
            # Clients (a test process, sbatch) carry SLURM_CONF too, but no SLURM_JOB_ID.
            if daemon_mark in environ or (job_mark in environ and "SLURM_JOB_ID=" in environ):
                found.append(int(entry.name))
        return found

    # ------------------------------------------------------------ internals

    def _write_munge_key(self) -> Path:
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        return key

    def _spawn(self, name: str, argv: list[str]) -> None:
        env = self.env()
        env[ROOT_MARKER] = str(self.root)
        with open(self.log_dir / f"{name}.out", "ab") as log:
            self._procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        pids = self._recorded_pids()
        pids[name] = self._procs[name].pid
        self.pids_path.write_text("".join(f"{n} {p}\n" for n, p in pids.items()))

    def _recorded_pids(self) -> dict[str, int]:
        try:
            text = self.pids_path.read_text()
        except FileNotFoundError:
            return {}
        pids = {}
        for line in text.splitlines():
            name, _, pid = line.partition(" ")
            if pid.strip().isdigit():
                pids[name] = int(pid)
        return pids

    def _alive_recorded_pids(self) -> list[int]:
        return [pid for pid in self._recorded_pids().values() if _alive(pid)]

    def _terminate(self, name: str, pid: int, timeout: float) -> None:
        proc = self._procs.get(name)
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return
        # Started by another process (the command line `start`): not our child to wait for.
        if not _alive(pid) or ROOT_MARKER not in _environ(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                tail = _tail(self.log_dir / f"{name}.out") or _tail(self.log_dir / f"{name}.log")
                raise SlurmClusterError(f"{name} exited with code {proc.returncode}; its log ends:\n{tail}")

    def _wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if ready():
                return
            time.sleep(0.2)
        raise SlurmClusterError(f"{what} within {timeout:.0f} s; logs in {self.log_dir}")

    def _all_idle(self) -> bool:
        states = self.node_states()
        return sorted(states) == self.nodes and all(s == "idle" for s in states.values())

    def _cancel_all_jobs(self, timeout: float) -> None:
        self.run(["scancel", "--user", pwd.getpwuid(os.getuid()).pw_name], check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run(["squeue", "--noheader", "--format=%i"], check=False)
            if out.returncode == 0 and not out.stdout.strip():
                return
            time.sleep(0.2)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _state(pid: int) -> str:
    # /proc/<pid>/stat: "pid (comm) S ..."; comm may hold spaces and parentheses.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    try:
        return _state(pid) != "Z"
    except (OSError, IndexError):
        return False


def _environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start or stop a Slurm cluster of N nodes on this machine.")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("root", type=Path, help="folder for the cluster's config, state and logs")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs per node")
    args = parser.parse_args(argv)
    cluster = SlurmCluster(args.root, node_count=args.nodes, cpus_per_node=args.cpus)
    try:
        if args.action == "start":
            cluster.start()
            print(f"export SLURM_CONF={cluster.conf_path}")
        elif args.action == "stop":
            cluster.stop()
        else:
            print(cluster.run(["sinfo"], check=False).stdout, end="")
    except SlurmClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
