"""The driver of a job on Ray: the `distrun` process that places the job, runs it, and records it.

It connects to the target's cluster, creates the job's placement group (one bundle per node,
STRICT_SPREAD) and waits for it at most `placement_timeout` seconds, starts one
`RayNodeAgent` actor per bundle, picks MASTER_PORT (and TensorFlow's task ports) free on node
0, builds the plan from the nodes' real addresses, ships each node the job's files, and
starts every node's agent. Then it polls the agents (every POLL_S): their per-rank log bytes
go to `user_logs/` of the job folder on this machine, their stream lines to the terminal; the
first node that reports a failure, or is lost, makes it stop every other node at once.

The record is written here, like a local job's: this process is the job's launcher (a
`job cancel` from any shell signals it), and a forked watchdog records "launcher lost" if it
dies. When it dies Ray kills the job's actors (their owner is gone) and each node's agent,
started with PDEATHSIG, stops its ranks; nothing of the job survives on any node.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from distrun.agent.output_archive import unpack_outputs
from distrun.backends.ray.actor import RayNodeAgent, pack_folders
from distrun.backends.ray.driver_files import DRIVER_LOG, DriverFiles
from distrun.backends.ray.placement import (
    PlacementRequest,
    RayNodeFree,
    placement_request,
    unplaceable_hint,
    unplaceable_message,
)
from distrun.backends.ray.target import RaySettings
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobState
from distrun.core.safe_files import read_text
from distrun.metrics.rank_token import read_token
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import LaunchPlan, Placement
from distrun.prepare.submission import PreparedJob
from distrun.store.index import CANCELED, COMPLETED, FAILED, FINALIZING, RUNNING, JobIndex

POLL_S = 0.1
ACTOR_START_TIMEOUT_S = 180.0  # a Ray worker process per node must start (slow on a loaded machine)
POLL_TIMEOUT_S = 60.0  # an agent that does not answer a poll for this long counts as lost
COLLECT_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 10.0
CLIENT_ATTEMPTS = 3  # ray:// connections whose per-client server failed to start
CLIENT_RETRY_PAUSE_S = 2.0
# What the head's client proxy answers when this connection's own server process died while it
# started: found dead at once, found a zombie while the proxy read its command line, or gone
# before the proxy could open a channel to it.
PER_CLIENT_SERVER_START_FAILURES = (
    "Starting Ray client server failed",
    "psutil.ZombieProcess",
    "Proxy failed to Connect to backend",
)
ACTOR_CONCURRENCY = 4  # poll and stop are served while start's work goes on


class RayUnavailableError(DistrunError):
    pass


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DistrunError(
            "the Ray backend needs Ray, which is not installed in this Python",
            'install it with: pip install "distrun[ray]"  (or pip install "ray[default]")',
        ) from None
    return ray


def check_reachable(address: str) -> None:
    """A quick, clear error for a head that is not there (ray.init would retry for a long while)."""
    if address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayUnavailableError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc})",
            "start it (ray start --head --port PORT) or fix the target's address (distrun compute create --set "
            "address=HOST:PORT); nothing was submitted",
        ) from None


def connect(target: RaySettings) -> Any:
    ray = import_ray()
    check_reachable(target.address)
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    attempt = 1
    while True:
        try:
            with quiet_stderr():  # Ray's core prints its own warnings (network probing) on fd 2
                ray.init(
                    address=target.address,
                    logging_level="ERROR",
                    log_to_driver=False,
                    include_dashboard=False,
                    namespace="distrun",
                )
            return ray
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ... depending on the version
            if attempt < CLIENT_ATTEMPTS and client_server_start_failed(target.address, exc):
                with contextlib.suppress(Exception):
                    ray.shutdown()
                time.sleep(CLIENT_RETRY_PAUSE_S * attempt)
                attempt += 1
                continue
            tries = f" (tried {attempt} times)" if attempt > 1 else ""
            raise RayUnavailableError(
                f"could not connect to the Ray cluster at {target.address}{tries}: {exc}",
                "check the target's address and that this Python's Ray matches the cluster's version",
            ) from None


def client_server_start_failed(address: str, exc: BaseException) -> bool:
    """A `ray://` connection refused because the head could not start this client's own server.

    The head's client proxy starts one server process per client connection; on a busy head
    that process can die while it starts, and the next connection usually gets one that works.
    The proxy reports that death in one of several ways, depending on when it notices:
    `PER_CLIENT_SERVER_START_FAILURES`. Any other failure (a wrong address, a version mismatch)
    is not retried.
    """
    if not address.startswith("ray://"):
        return False
    message = str(exc)
    return any(marker in message for marker in PER_CLIENT_SERVER_START_FAILURES)


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def nodes_free(ray: Any) -> list[RayNodeFree]:
    """Every node's total and free resources, as far as this Ray version tells them."""
    try:
        from ray._private.state import available_resources_per_node

        free = available_resources_per_node()
    except Exception:  # private API: without it, show the totals only
        free = {}
    return [
        RayNodeFree(
            address=node.get("NodeManagerAddress", "?"),
            node_id=node.get("NodeID", "?"),
            total=node.get("Resources", {}),
            free=free.get(node.get("NodeID"), {}),
            alive=bool(node.get("Alive")),
        )
        for node in ray.nodes()
    ]


@dataclass
class NodeHandle:
    rank: int
    actor: Any
    where: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] | None = None
    stopped: bool = False


class StopRequested(Exception):
    """A stop signal (Ctrl-C, `job cancel`) came while the job was being placed or started."""


class RayRun:
    """One job's run on Ray, from placement to the merged outcome of its nodes."""

    def __init__(
        self,
        prepared: PreparedJob,
        index: JobIndex,
        target: RaySettings,
        stream: BinaryIO | None,
        signals: list[int],
        on_plan: Callable[[LaunchPlan], None] | None,
    ) -> None:
        self.prepared = prepared
        self.index = index
        self.target = target
        self.stream = stream
        self.signals = signals
        self.on_plan = on_plan
        self.ray: Any = None
        self.group: Any = None
        self.nodes: list[NodeHandle] = []
        self.request: PlacementRequest = placement_request(prepared.spec, target, prepared.name)
        self.files = DriverFiles(prepared.folder)
        self.canceled_by: int | None = None
        self.first_failure: int | None = None

    # ------------------------------------------------------------ the whole run

    def run(self) -> JobState:
        """The job's end: its status, reason, root cause and processes."""
        try:
            self.ray = connect(self.target)
            self._hold_stop_signals()
            self._place()
            self._start_agents()
            self.index.update(self.prepared.name, status=RUNNING, started_at=time.time())
            self._supervise()
            self._collect_outputs()
            return merged_end(
                [n.outcome or {} for n in self.nodes], self.canceled_by, str(self.prepared.folder.user_logs)
            )
        except StopRequested:
            return JobState(CANCELED, "canceled before the job's processes started")
        finally:
            self._release()

    def _hold_stop_signals(self) -> None:
        """ray.init installs Ray's own handlers (a SIGTERM would end this process with no record): ours again."""
        import threading

        from distrun.agent.stop_signals import STOP_SIGNALS

        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                signal.signal(sig, lambda signum, frame: self.signals.append(signum))

    def _say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(f"distrun: {text}\n".encode())
            self.stream.flush()

    def _check_stop(self) -> None:
        if self.signals:
            raise StopRequested

    # ------------------------------------------------------------ placement

    def _place(self) -> None:
        from ray.util.placement_group import placement_group

        request = self.request
        self.group = placement_group(list(request.bundles), strategy=request.strategy, name=request.name)
        give_up = time.monotonic() + request.timeout_s
        told = False
        while not self.group.wait(timeout_seconds=min(1.0, max(0.0, give_up - time.monotonic()))):
            self._check_stop()
            if time.monotonic() >= give_up:
                free = nodes_free(self.ray)
                self._remove_group()
                raise DistrunError(unplaceable_message(request, free), unplaceable_hint(request, free))
            if not told:
                self._say(f"waiting for Ray to place {request.describe()} (at most {request.timeout_s:g} s)")
                told = True

    def _remove_group(self) -> None:
        if self.group is None:
            return
        from ray.util.placement_group import remove_placement_group

        try:
            remove_placement_group(self.group)
        except Exception:
            pass  # the cluster went away: it removes the group with the job
        self.group = None

    # ------------------------------------------------------------ agents

    def _start_agents(self) -> None:
        ray = self.ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        remote = ray.remote(max_concurrency=ACTOR_CONCURRENCY)(RayNodeAgent)
        for rank, bundle in enumerate(self.request.bundles):
            actor = remote.options(
                num_cpus=bundle.get("CPU", 0),
                num_gpus=bundle.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=self.group, placement_group_bundle_index=rank
                ),
            ).remote(self.prepared.name, rank)
            self.nodes.append(NodeHandle(rank, actor))
        spec = self.prepared.spec
        pinned = spec.environment_variables.get("MASTER_PORT")
        needed = task_port_count(spec) + (0 if pinned else 1)
        remote_start = spec.distribution_type == "mpi"  # one more port per node: its agent's remote start
        if remote_start:
            asks = [n.actor.free_ports.remote(needed + 1 if n.rank == 0 else 1) for n in self.nodes]
        else:
            asks = [self.nodes[0].actor.free_ports.remote(needed)] if needed else []
        # The job's files are packed and put while the actors start: they do not depend on where.
        folder = self.prepared.folder
        files = self.ray.put(pack_folders(folder.root, ["code", "inputs", "named-outputs"]))
        # Where each node is and the ports free there, asked at once: each actor answers both as
        # soon as it is up, in one round trip instead of two.
        replies = self._get([*(n.actor.where.remote() for n in self.nodes), *asks], ACTOR_START_TIMEOUT_S, "start")
        wheres, ports_found = replies[: len(self.nodes)], replies[len(self.nodes) :]
        for node, where in zip(self.nodes, wheres, strict=True):
            node.where = where
        self._check_stop()
        found = [list(p) for p in ports_found] if asks else [[]]
        ports = found[0]
        # mpirun on node 0 reaches node k through the agent there (distrun.agent.remote_start).
        remote = {"token": secrets.token_hex(16), "ports": [p.pop() for p in found]} if remote_start else None
        master_port = int(pinned) if pinned else ports.pop(0)
        placement = Placement(
            hosts=tuple(n.where["address"] for n in self.nodes),
            master_port=master_port,
            task_ports=tuple(ports),
            job_dir=str(folder.root),
            run_id=self.prepared.name,
        )
        plan = build_plan(spec, placement, self.prepared.bindings)
        self.files.write_plan(plan, self.request, [n.where for n in self.nodes])
        if self.on_plan is not None:
            self.on_plan(plan)
        base = {
            "job_name": self.prepared.name,
            "spec": json.loads(read_text(folder.job_json, root=folder.root)),
            "bindings": json.loads(read_text(folder.bindings_json, root=folder.root)),
            "driver_job_dir": str(folder.root),
            "hosts": list(placement.hosts),
            "names": [n.where["host"] for n in self.nodes],
            "master_port": master_port,
            "task_ports": list(ports),
            "remote_start": remote,
            # The ranks' MLflow token: no file of the job folder others read holds it (rank_token).
            "tracking_token": read_token(folder.root),
        }
        self._check_stop()
        starts = [
            n.actor.start.remote(
                {**base, "node_rank": n.rank, "engine_job_id": f"{socket.gethostname()}-{os.getpid()}"},
                files,
                self.target.python,
            )
            for n in self.nodes
        ]
        self._get(starts, ACTOR_START_TIMEOUT_S, "start")

    def _get(self, refs: list[Any], timeout: float, what: str) -> list[Any]:
        """ray.get, a stop signal honoured every second, errors in distrun's words."""
        ray = self.ray
        give_up = time.monotonic() + timeout
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
            self._check_stop()
            if pending and time.monotonic() > give_up:
                raise DistrunError(
                    f"the job's Ray actors did not {what} within {timeout:g} s",
                    "check the Ray cluster (ray status) and the nodes' Python (the target's python setting)",
                )
        try:
            return ray.get(refs)
        except Exception as exc:
            raise DistrunError(f"a node of the job could not {what} on Ray: {first_line(exc)}") from None

    # ------------------------------------------------------------ supervision

    def _supervise(self) -> None:
        done: set[int] = set()
        while any(n.outcome is None for n in self.nodes):
            if self.signals and self.canceled_by is None:
                self.canceled_by = self.signals.pop(0)
                self._say("stop signal received, stopping the job on every Ray node")
                self._stop_all()
            elif self.signals:
                self.signals.clear()
                self._stop_all(second=True)  # a second interrupt: no grace period
            live = [n for n in self.nodes if n.outcome is None]
            ended = {n.rank: n.outcome for n in self.nodes if n.outcome and not n.outcome.get("agent_lost")}
            refs = {n.actor.poll.remote(sorted(done), ended, self.files.changes_for(n.rank)): n for n in live}
            ready, pending = self.ray.wait(list(refs), num_returns=len(refs), timeout=POLL_TIMEOUT_S)
            for ref in pending:
                self._lost(refs[ref], f"did not answer for {POLL_TIMEOUT_S:g} s")
            news = False
            for ref in ready:
                node = refs[ref]
                try:
                    reply = self.ray.get(ref)
                except Exception as exc:
                    self._lost(node, first_line(exc))
                    continue
                news = self._take(node, reply, done) or news
            if not news:
                time.sleep(POLL_S)

    def _take(self, node: NodeHandle, reply: dict[str, Any], done: set[int]) -> bool:
        self.files.take_mirrored(node.rank, reply.get("mirrored"))
        for name, data in reply["logs"].items():
            self.files.append(f"user_logs/{name}", data)
        if reply["system"]:
            self.files.append(f"system_logs/ray_node_{node.rank:02d}.txt", reply["system"])
        if reply["stream"] and self.stream is not None:
            self.stream.write(reply["stream"])
            self.stream.flush()
        if reply["main_done"]:
            done.add(node.rank)
        if reply["outcome"] is not None:
            node.outcome = reply["outcome"]
            if node.outcome.get("status") != COMPLETED and self.first_failure is None and self.canceled_by is None:
                self.first_failure = node.rank
                self._stop_all()
        return bool(reply["logs"] or reply["stream"] or reply["outcome"])

    def _lost(self, node: NodeHandle, why: str) -> None:
        where = node.where.get("address", "?")
        node.outcome = {
            "node_rank": node.rank,
            "host": node.where.get("host"),
            "address": where,
            "status": FAILED,
            "reason": f"node {node.rank} ({where}) was lost: {why}",
            "failed_at": time.time(),
            "processes": [],
        }
        if self.first_failure is None and self.canceled_by is None:
            self.first_failure = node.rank
        self._stop_all()

    def _stop_all(self, second: bool = False) -> None:
        for node in self.nodes:
            if node.outcome is None and (second or not node.stopped):
                node.stopped = True
                node.actor.stop.remote()

    # ------------------------------------------------------------ the end

    def _collect_outputs(self) -> None:
        live = [n for n in self.nodes if n.outcome is not None and not n.outcome.get("agent_lost")]
        refs = [n.actor.collect.remote() for n in live]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=COLLECT_TIMEOUT_S)
        # Each node's named outputs, ./outputs and ./logs, merged into the job folder here (a
        # file written on two nodes: the one read last); a pipeline's next step reads them here.
        for ref in ready:
            try:
                left_out = unpack_outputs(self.ray.get(ref), self.prepared.folder.root)
            except Exception as exc:
                self.files.append(DRIVER_LOG, f"could not fetch outputs: {first_line(exc)}\n".encode())
                continue
            for what in left_out:
                self.files.append(DRIVER_LOG, f"output not brought back: {what}\n".encode())

    def _release(self) -> None:
        self.files.close()
        if self.ray is None:
            return
        try:
            cleanups = [n.actor.cleanup.remote() for n in self.nodes]
            self.ray.wait(cleanups, num_returns=len(cleanups), timeout=30)
            for node in self.nodes:
                self.ray.kill(node.actor)
        except Exception:
            pass
        self._remove_group()
        self.ray.shutdown()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def merged_end(outcomes: list[dict[str, Any]], canceled_by: int | None, user_logs: str) -> JobState:
    """The job's end from its nodes' outcomes. Pure.

    The root cause is the failure that happened first (wall clock across nodes); nodes distrun
    stopped because of it report Canceled and are not failures. Log paths are those of the job
    folder on this machine, where the driver copied every node's logs.
    """
    processes = sorted(
        (dict(p) for o in outcomes for p in o.get("processes", [])),
        key=lambda p: (p.get("node_rank", 0), p.get("rank") if p.get("rank") is not None else -1, p.get("name")),
    )
    for proc in processes:
        proc["log"] = f"{user_logs}/{os.path.basename(str(proc.get('log', '')))}"
    failed = [o for o in outcomes if o.get("status") == FAILED]
    if failed:
        first = min(failed, key=lambda o: o.get("failed_at") or float("inf"))
        root = dict(first["root_cause"]) if first.get("root_cause") else None
        if root is not None and root.get("log"):
            root["log"] = f"{user_logs}/{os.path.basename(root['log'])}"
        return JobState(FAILED, first.get("reason", ""), root, processes)
    if canceled_by is not None or any(o.get("status") == CANCELED for o in outcomes):
        how = f"canceled ({signal.Signals(canceled_by).name})" if canceled_by else "canceled"
        return JobState(CANCELED, how, None, processes)
    return JobState(COMPLETED, "all processes completed", None, processes)


def record_end(index: JobIndex, name: str, end: JobState) -> None:
    index.update(name, status=FINALIZING)
    index.update(
        name,
        status=end.status,
        reason=end.reason,
        root_cause=end.root_cause,
        processes=end.processes,
        ended_at=time.time(),
    )
