"""The local backend: M simulated nodes on this machine, supervised by one node agent.

Every simulated node has address 127.0.0.1; MASTER_PORT (and any per-task port) is a free
port found by binding, never a fixed one, so two jobs at once never collide. The job's
processes are supervised in this process (`distrun run`) or in a detached launcher process
(`distrun job create` without --stream); a forked watchdog records the job as lost, and kills
what is left, if the supervising process dies.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from distrun.agent.gang import DEFAULT_GRACE, run_gang
from distrun.agent.outcome import GangResult
from distrun.agent.stop_signals import held_stop_signals, stop_signals_blocked
from distrun.agent.watchdog import Watchdog
from distrun.backends.port_range import PORT_RANGE
from distrun.backends.targets import ComputeTarget
from distrun.errors import DistrunError
from distrun.file_modes import open_append, write_file
from distrun.metrics.tracking import finish_run
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import LaunchPlan, Placement
from distrun.report import environment_note, execution_summary, stream_header
from distrun.spec.loader import LoadedJob
from distrun.store.index import FAILED, FINALIZING, RUNNING, JobIndex, JobRecord
from distrun.store.layout import Layout
from distrun.store.port_leases import PortLeases
from distrun.submission import PreparedJob, bind

LOCAL_ADDRESS = "127.0.0.1"


def free_ports(count: int, leases: PortLeases | None = None) -> list[int]:
    """`count` distinct TCP ports on the loopback address, each free when checked and, with
    `leases`, leased until the job ends (no other distrun job gets it meanwhile)."""
    chosen: list[int] = []
    sockets = []
    tries = 0
    try:
        while len(chosen) < count:
            tries += 1
            port = random.randint(*PORT_RANGE)
            if port in chosen:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((LOCAL_ADDRESS, port))
                if leases is not None and not leases.take(port):
                    raise OSError("leased to another job")
            except OSError:
                sock.close()
                if tries > 50 * (count + 10):
                    raise DistrunError(f"no free TCP port found in {PORT_RANGE[0]}-{PORT_RANGE[1]}") from None
                continue
            sockets.append(sock)
            chosen.append(port)
        return chosen
    finally:
        for sock in sockets:
            sock.close()


def local_placement(prepared: PreparedJob, leases: PortLeases | None = None) -> Placement:
    spec = prepared.spec
    pinned = spec.environment_variables.get("MASTER_PORT")
    needed = task_port_count(spec) + (0 if pinned else 1)
    ports = free_ports(needed, leases) if needed else []
    master_port = int(pinned) if pinned else ports.pop(0)
    return Placement(
        hosts=(LOCAL_ADDRESS,) * spec.resources.instance_count,
        master_port=master_port,
        job_dir=str(prepared.folder.root),
        run_id=prepared.name,
        task_ports=tuple(ports),
        simulated=True,
    )


def plan_local(prepared: PreparedJob, leases: PortLeases | None = None) -> LaunchPlan:
    return build_plan(prepared.spec, local_placement(prepared, leases), prepared.bindings)


def execute(
    prepared: PreparedJob,
    layout: Layout,
    *,
    stream: BinaryIO | None,
    color: bool = False,
    on_plan: Callable[[LaunchPlan], None] | None = None,
) -> JobRecord:
    """Run a prepared job to its end in this process; returns its final record.

    From here until the record is written, Ctrl-C, SIGTERM (`job cancel`) and SIGHUP are held
    (agent.stop_signals): one that arrives before the processes start cancels the job before
    anything runs, one that arrives after they ended leaves the job's own outcome standing.
    """
    index = JobIndex(layout.db_path)
    leases = PortLeases()  # held until this function returns (or this process ends)
    try:
        with held_stop_signals() as stop_signals:
            plan = _write_plan(prepared, index, leases)
            if on_plan is not None:
                on_plan(plan)
            watchdog = Watchdog.start(
                _launch_id(prepared), lambda: JobIndex(layout.db_path).mark_launcher_lost(prepared.name)
            )
            try:
                if not index.set_launcher(prepared.name, os.getpid()):
                    return index.get(prepared.name)  # it ended (was canceled) before it could start
                result = run_gang(
                    plan,
                    [node.node_rank for node in plan.nodes],
                    prepared.folder.user_logs,
                    stream=stream,
                    color=color,
                    grace_period=_grace(prepared),
                    timeout=prepared.spec.limits.timeout,
                    on_started=_noting_running(index, prepared.name),
                    launch_id=_launch_id(prepared),
                    signals=stop_signals,
                )
                _record_or_say(index, prepared.name, result)
            finally:
                watchdog.release()
    finally:
        leases.release()
    return index.get(prepared.name)


def _write_plan(prepared: PreparedJob, index: JobIndex, leases: PortLeases) -> LaunchPlan:
    try:
        plan = plan_local(prepared, leases)
        write_file(prepared.folder.plan_json, json.dumps(plan.to_dict(), indent=2).encode("utf-8"))
    except (DistrunError, OSError) as exc:
        reason = exc.message if isinstance(exc, DistrunError) else f"could not write the job's plan: {exc}"
        index.update(prepared.name, status=FAILED, reason=reason, ended_at=time.time())
        raise DistrunError(reason) from None
    return plan


def _noting_running(index: JobIndex, name: str) -> Callable[[object], None]:
    def started(_: object) -> None:
        try:
            running = index.update(name, status=RUNNING, started_at=time.time())
        except DistrunError:
            # Not being able to note "Running" (index on a full disk) must not stop the job:
            # the outcome is written, or reported, at its end.
            return
        if not running and threading.current_thread() is threading.main_thread():
            # `job cancel` canceled it in the index while it was starting: stop, as if signalled.
            os.kill(os.getpid(), signal.SIGTERM)

    return started


def _record_or_say(index: JobIndex, name: str, result: GangResult) -> None:
    try:
        record_result(index, name, result)
    except DistrunError as exc:
        # The outcome is known; only writing it down failed (e.g. the disk is full).
        raise DistrunError(
            f"job {name} ended {result.status} ({result.reason}), but its record could not be written: "
            f"{exc.message}; it will show as launcher lost",
            exc.hint,
        ) from None


def record_result(index: JobIndex, name: str, result: GangResult) -> None:
    index.update(name, status=FINALIZING)
    index.update(
        name,
        status=result.status,
        reason=result.reason,
        root_cause=result.root_cause,
        processes=[p.to_dict() for p in result.processes],
        ended_at=time.time(),
    )


def _grace(prepared: PreparedJob) -> float:
    grace = prepared.spec.limits.grace_period
    return DEFAULT_GRACE if grace is None else grace


def _launch_id(prepared: PreparedJob) -> str:
    return f"{prepared.name}-{os.getpid()}"


def start_detached(prepared: PreparedJob, layout: Layout) -> int:
    """Supervise the job from a new background process; returns its pid."""
    log = os.fdopen(open_append(prepared.folder.system_logs / "launcher.txt"), "ab")
    env = dict(os.environ, DISTRUN_HOME=str(layout.home))
    # A SIGTERM right after `job create` reaches the launcher while Python starts: held until
    # `execute` can act on it, instead of killing it before it records anything.
    with stop_signals_blocked():
        proc = subprocess.Popen(
            [sys.executable, "-m", "distrun.backends.local_launcher", prepared.name],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    log.close()
    JobIndex(layout.db_path).set_launcher(prepared.name, proc.pid)
    return proc.pid


# ---------------------------------------------------------------- the backend interface


def dry_run(loaded: LoadedJob, layout: Layout, target: ComputeTarget) -> dict[str, Any]:
    """The plan `distrun run` would follow, computed without touching the store."""
    name = loaded.spec.name or "<generated-name>"
    folder = layout.job(name)
    bindings = bind(loaded, loaded.spec, folder, materialize=False)
    prepared = PreparedJob(name, loaded.spec, folder, target, bindings)
    notes = ["local compute: nodes are simulated on this machine (127.0.0.1); ports are chosen when the job starts"]
    note = environment_note(loaded.spec.environment)
    if note:
        notes.append(note)
    return {"compute": target.name, "type": "local", "notes": notes, "plan": plan_local(prepared).to_dict()}


def run_streaming(prepared: PreparedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    """`distrun run`: supervise here, stream every line, end with the execution summary."""

    def header(plan: LaunchPlan) -> None:
        record = JobIndex(layout.db_path).get(prepared.name)
        note = environment_note(prepared.spec.environment)
        lines = [f"distrun: {text}" for text in ([note] if note else []) + list(plan.notes)]
        lines.append(stream_header(record, sum(1 for _ in plan.processes()), len(plan.nodes)))
        _say(out, "\n".join(lines))

    record = execute(prepared, layout, stream=out, color=color, on_plan=header)
    _say(out, execution_summary(record))
    finish_run(prepared.folder, record.status)  # after the summary: the user does not wait on MLflow
    return record


def _say(out: BinaryIO, text: str) -> None:
    """Text for the user's terminal, which may have gone (closed window: EIO; `| head`: EPIPE)."""
    try:
        out.write((text + "\n").encode())
        out.flush()
    except (OSError, ValueError):
        # What is still buffered would fail again when Python exits (exit status 120).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except (OSError, ValueError, AttributeError):
            pass


def submit_detached(prepared: PreparedJob, layout: Layout) -> JobRecord:
    start_detached(prepared, layout)
    return JobIndex(layout.db_path).get(prepared.name)
