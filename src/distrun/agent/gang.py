"""The node agent: run some nodes' processes of a plan as one gang.

One event loop (epoll) watches, for every process, its output pipe and a pidfd that becomes
readable the instant it exits. There is no polling interval: the first process to fail is
seen at once and every other process group gets SIGTERM in the same loop turn, then SIGKILL
after the grace period. The local backend runs all simulated nodes in one gang; a cluster
backend runs one gang per node (`node_ranks=[k]`).
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import BinaryIO

from distrun.agent import process_tree
from distrun.agent.cgroup import LaunchCgroup
from distrun.agent.containers import ContainerRun, container_name
from distrun.agent.gang_hangs import HangAndStackReader
from distrun.agent.gang_leftovers import leftover_pids, remove_containers, remove_shm_leftovers, sweep_leftovers
from distrun.agent.gang_result import gang_result
from distrun.agent.gang_signals import StopSignalInbox, stop_for_signal
from distrun.agent.gang_start import CannotStart, prepare_start
from distrun.agent.gang_state import GangOptions, GangStop, RunningProcess, why
from distrun.agent.line_stream import LineStream
from distrun.agent.outcome import FAILED, GangResult, ProcessOutcome, planned_outcome
from distrun.agent.peers import POLL_SECONDS, MainWorkPeers
from distrun.plan.model import LaunchPlan, ProcessSpec
from distrun.spec.defaults import DEFAULT_GRACE_PERIOD

__all__ = ["Gang", "GangOptions", "run_gang"]

READ_SIZE = 1 << 18
# After every process exited, how long pipes held open by leftovers may take to close.
DRAIN_SECONDS = 2.0
# The longest single wait: epoll takes at most INT_MAX milliseconds (24.8 days), and a deadline
# beyond that is simply reached in several waits.
MAX_WAIT = 3600.0
# Descriptors the agent holds for each process (output pipe, log file, pidfd), and for itself.
FDS_PER_PROCESS = 3
FDS_SPARE = 256
# While the live stream holds output its reader has not taken yet, how often to offer it more.
BACKLOG_POLL = 0.05


def run_gang(
    plan: LaunchPlan,
    node_ranks: Sequence[int],
    log_dir: Path,
    *,
    stream: BinaryIO | None = None,
    color: bool = False,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    timeout: float | None = None,
    on_started: Callable[[list[ProcessOutcome]], None] | None = None,
    base_env: Mapping[str, str] | None = None,
    launch_id: str | None = None,
    signals: list[int] | None = None,
    peers: MainWorkPeers | None = None,
    preempted_by: Callable[[int], bool] | None = None,
    hang_timeout: float | None = None,
    last_metric: Callable[[], float | None] | None = None,
    container: ContainerRun | None = None,
    peers_share_job_folder: bool = True,
) -> GangResult:
    options = GangOptions(
        grace_period=grace_period,
        timeout=timeout,
        stream=stream,
        color=color,
        base_env=base_env,
        on_started=on_started,
        signals=signals,
        peers=peers,
        preempted_by=preempted_by,
        hang_timeout=hang_timeout,
        last_metric=last_metric,
        container=container,
        peers_share_job_folder=peers_share_job_folder,
    )
    if launch_id:
        options.launch_id = launch_id
    return Gang(plan, node_ranks, log_dir, options).run()


class Gang:
    def __init__(self, plan: LaunchPlan, node_ranks: Sequence[int], log_dir: Path, options: GangOptions) -> None:
        self.options = options
        self.log_dir = Path(log_dir)
        wanted = set(node_ranks)
        self.plan = plan
        self.nodes = [node for node in plan.nodes if node.node_rank in wanted]
        self.running: list[RunningProcess] = []
        # Kept as counts, not found by scanning `running`: every exit and every loop turn would
        # otherwise look at every process, O(N^2) over a job's life (at 512 ranks, about 0.6
        # million checks as they exit).
        self.live = 0  # processes not yet reaped
        self.main_pending = 0  # main (not auxiliary) processes that have not exited with 0
        self.open_pipes = 0  # output pipes not yet at their end
        self.stream = LineStream(options.stream, options.color)
        self.selector = selectors.DefaultSelector()
        self.stop: GangStop | None = None
        self.kill_at: float | None = None
        self.started = 0.0
        self.inbox = StopSignalInbox(options.signals, options.handle_signals)
        self.log_error: str | None = None
        self.cgroup: LaunchCgroup | None = None
        self.waiting_for_peers = False
        self.hangs = HangAndStackReader(
            plan,
            wanted,
            [node.node_rank for node in self.nodes],
            self.log_dir.parent,
            options,
            self.running,
            self.stream,
            lambda: self.stop is not None,
        )

    # ------------------------------------------------------------ lifecycle

    def run(self) -> GangResult:
        self.started = time.monotonic()
        process_tree.become_subreaper()
        _room_for_descriptors(sum(len(node.processes) for node in self.nodes))
        restore = self.inbox.install(self.selector)
        self.cgroup = LaunchCgroup.create(self.options.launch_id)
        try:
            self._handle_signals()  # a cancel that came first: nothing starts
            self._start_all()
            self.hangs.started()
            if self.options.on_started and self.stop is None:
                self.options.on_started([r.outcome for r in self.running])
            if self.stop is None and self._main_work_done():
                self._main_work_finished()  # a node that runs only auxiliaries
            self._loop()
            grace = min(self.options.grace_period, DRAIN_SECONDS)
            sweep_leftovers(self.options.launch_id, self.cgroup, self._started_pids(), grace)
            self._drain()
            # Before the logs are closed (the root cause's traceback is read through them).
            result = gang_result(self.plan, self.nodes, self.running, self.stop, self.log_dir, self.options.container)
        except BaseException:
            # Whatever went wrong in distrun itself, the job's processes do not outlive it.
            self._kill_remaining()
            raise
        finally:
            for item in self.running:
                item.close_log()
            if self.cgroup is not None:
                self.cgroup.close()
            remove_containers(self.options.container, self.options.launch_id, self.running)
            remove_shm_leftovers(self.plan, self.running)
            restore()
            self.selector.close()
        return result

    def _start_all(self) -> None:
        if self.stop is not None:
            return
        base = dict(os.environ if self.options.base_env is None else self.options.base_env)
        try:
            log_fds = prepare_start(self.plan, self.nodes, self.log_dir, base)
        except CannotStart as problem:
            self._begin_stop(GangStop(FAILED, str(problem)))
            return
        with self._born_in_cgroup() as inside:
            self._spawn_each(base, log_fds, None if inside else self.cgroup)

    def _born_in_cgroup(self) -> AbstractContextManager[bool]:
        """True: the agent is in the launch's cgroup while it spawns, so every rank is born in it."""
        return self.cgroup.births() if self.cgroup is not None else nullcontext(False)

    def _spawn_each(self, base: Mapping[str, str], log_fds: dict[str, int], cgroup: LaunchCgroup | None) -> None:
        """Start every process (cgroup: the one each joins before exec; None: born in it, or none)."""
        for node in self.nodes:
            for spec in node.processes:
                outcome = planned_outcome(spec, node.host, self.log_dir)
                log_fd = log_fds.pop(spec.name)
                try:
                    proc = process_tree.spawn(
                        spec, base, self.options.launch_id, cgroup, self.plan.environment(spec), self._container(spec)
                    )
                except (OSError, ValueError) as exc:  # ValueError: a NUL byte in its command or env
                    for fd in (log_fd, *log_fds.values()):
                        os.close(fd)
                    self._begin_stop(GangStop(FAILED, f"could not start {spec.name}: {why(exc)}"))
                    return
                outcome.pid = proc.pid
                pidfd = os.pidfd_open(proc.pid)
                item = RunningProcess(spec, proc, outcome, log_fd, pidfd)
                self.running.append(item)
                self.live += 1
                self.open_pipes += 1
                if not spec.auxiliary:
                    self.main_pending += 1
                self.stream.add(spec.name, spec.label, spec.node_rank)
                if spec.output_demux is not None:  # an MPI launcher: its output is split per rank
                    from distrun.agent.mpi_output import demux_for

                    item.demux = demux_for(spec, self.plan, self.log_dir, log_fd, self.stream)
                assert proc.stdout is not None
                self.selector.register(proc.stdout.fileno(), selectors.EVENT_READ, ("out", item))
                self.selector.register(pidfd, selectors.EVENT_READ, ("exit", item))

    def _container(self, spec: ProcessSpec) -> tuple[ContainerRun, str] | None:
        run = self.options.container
        return None if run is None else (run, container_name(self.options.launch_id, spec.name))

    def _loop(self) -> None:
        deadline = self.started + self.options.timeout if self.options.timeout else None
        while self.live:
            now = time.monotonic()
            peers_check = now + POLL_SECONDS if self.waiting_for_peers and self.stop is None else None
            moments = (deadline if self.stop is None else None, self.kill_at, peers_check)
            wait = _wait(now, (*moments, *self.hangs.moments(now, self.stop is not None)), bool(self.stream.backlog))
            events = self.selector.select(wait)
            # A stop signal that came with these events decides first: a preemption signals the
            # ranks too, and a rank that exits on it (a checkpoint handler's 143) is not a failure.
            self._handle_signals()
            for key, _ in events:
                kind, item = key.data
                if kind == "out":
                    self._read(item)
                elif kind == "exit":
                    self._exited(item)
                else:  # WAKE: a signal came
                    self.inbox.drain_wakeup(key.fd)
            self._handle_signals()
            self.stream.pump()
            now = time.monotonic()
            if deadline is not None and self.stop is None and now >= deadline:
                self._begin_stop(GangStop(FAILED, f"timeout after {self.options.timeout:g} s"))
            if self.stop is None and (hung := self.hangs.check(now, self.started)) is not None:
                self._begin_stop(hung)
            self.hangs.tend(now, self.stop is not None)
            if self.kill_at is not None and now >= self.kill_at:
                self._kill_remaining()
            if self.waiting_for_peers and self.stop is None and self.options.peers.all_done():  # type: ignore[union-attr]
                self.waiting_for_peers = False
                self._stop_auxiliaries()

    # ------------------------------------------------------------ events

    def _read(self, item: RunningProcess) -> None:
        fd = item.proc.stdout.fileno()  # type: ignore[union-attr]
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:
            data = b""
        self.hangs.output_seen()
        if not data:
            self.selector.unregister(fd)
            item.pipe_open = False
            self.open_pipes -= 1
            self._finish_output(item)
            return
        if item.demux is not None:
            item.demux.feed(data)
            if item.demux.write_error is not None and item.log_fd >= 0:
                self._log_failed(item, item.demux.write_error)
            return
        if item.log_fd >= 0:
            try:
                _write_all(item.log_fd, data)
            except OSError as exc:
                self._log_failed(item, exc)
        self.stream.feed(item.spec.name, data)

    def _exited(self, item: RunningProcess) -> None:
        self.selector.unregister(item.pidfd)
        os.close(item.pidfd)
        code = item.proc.wait()
        self.live -= 1
        if code == 0 and not item.spec.auxiliary:
            self.main_pending -= 1
        item.record_exit(code, round((time.monotonic() - self.started) * 1000, 1))
        if item.outcome.failed and self.stop is None:
            self._begin_stop(GangStop(FAILED, "", item))
        elif self.stop is None and not item.spec.auxiliary and self._main_work_done():
            self._main_work_finished()

    def _main_work_finished(self) -> None:
        """This gang's main processes all completed: stop the auxiliaries, once the job's are too."""
        peers = self.options.peers
        if peers is None:
            self._stop_auxiliaries()
            return
        peers.mark_done()
        if peers.all_done():
            self._stop_auxiliaries()
        else:
            self.waiting_for_peers = True

    def _main_work_done(self) -> bool:
        """Every main process has exited with 0 (true, too, for a node that runs only auxiliaries)."""
        return self.main_pending == 0

    def _stop_auxiliaries(self) -> None:
        now = time.monotonic()
        for item in self.running:
            if item.spec.auxiliary and item.outcome.running and item.signalled_at is None:
                _stop_group(item, now)
        if any(r.signalled_at == now for r in self.running):
            self.kill_at = now + self.options.grace_period

    # ------------------------------------------------------------ stopping

    def _handle_signals(self) -> None:
        while (signum := self.inbox.take()) is not None:
            if self.stop is None:
                said, stop = stop_for_signal(signum, self.options.preempted_by, self.options.grace_period)
                self.stream.message(said)
                self._begin_stop(stop)
            else:
                # A second interrupt: the user does not want to wait for the grace period.
                self._kill_remaining()

    def _begin_stop(self, stop: GangStop) -> None:
        """First failure, timeout or cancel: SIGTERM every process group now."""
        self.stop = stop
        now = time.monotonic()
        for item in self.running:
            if item.outcome.running and item.signalled_at is None:
                _stop_group(item, now)
        self.kill_at = now + self.options.grace_period

    def _kill_remaining(self) -> None:
        for item in self.running:
            if item.outcome.running or item.pipe_open:
                process_tree.signal_group(item.proc.pid, signal.SIGKILL)
        process_tree.kill_pids(leftover_pids(self.options.launch_id, self.cgroup, self._started_pids()), signal.SIGKILL)
        # A killed engine client leaves its container running.
        remove_containers(self.options.container, self.options.launch_id, self.running)
        self.kill_at = None

    def _started_pids(self) -> set[int]:
        return {r.proc.pid for r in self.running}

    def _drain(self) -> None:
        """Read what is left in the pipes; a pipe still open after the sweep is abandoned."""
        give_up = time.monotonic() + DRAIN_SECONDS
        while self.open_pipes and time.monotonic() < give_up:
            for key, _ in self.selector.select(max(0.0, give_up - time.monotonic())):
                kind, item = key.data
                if kind == "out":
                    self._read(item)
        for item in self.running:
            if item.pipe_open:
                self.selector.unregister(item.proc.stdout.fileno())  # type: ignore[union-attr]
                item.pipe_open = False
                self.open_pipes -= 1
                self._finish_output(item)
            item.proc.stdout.close()  # type: ignore[union-attr]

    def _finish_output(self, item: RunningProcess) -> None:
        if item.demux is not None:
            item.demux.finish()
        self.stream.finish(item.spec.name)

    def _log_failed(self, item: RunningProcess, exc: OSError) -> None:
        item.close_log()
        if self.log_error is None:
            self.log_error = f"cannot write {item.outcome.log}: {exc.strerror or exc}"
            if self.stop is None:
                self._begin_stop(GangStop(FAILED, self.log_error))


def _room_for_descriptors(processes: int) -> None:
    """Raise the soft limit on open files to what the gang needs, where the hard limit allows.

    The agent holds 3 descriptors a process (output pipe, log file, pidfd): under the usual
    soft limit of 1024, a node of more than ~300 processes failed with "Too many open files".
    The processes inherit the raised soft limit (never above the hard limit they had anyway).
    """
    needed = FDS_PER_PROCESS * processes + FDS_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if raised > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        except (ValueError, OSError):
            pass  # a process that cannot start says why ("Too many open files")


def _wait(now: float, moments: Iterable[float | None], backlog: bool) -> float:
    """How long the loop may wait for events: until the nearest of `moments`, in steps of at most
    MAX_WAIT (a timeout of weeks, or 1e300 s), and BACKLOG_POLL while the live stream holds a
    backlog (a slow reader may have made room)."""
    wait = min((max(0.0, moment - now) for moment in moments if moment is not None), default=MAX_WAIT)
    wait = min(wait, MAX_WAIT)
    return min(wait, BACKLOG_POLL) if backlog else wait


def _stop_group(item: RunningProcess, now: float) -> None:
    """SIGTERM a process's group, noting whether the process itself was still running."""
    item.signalled_at = now
    item.signalled_alive = not _has_exited(item.proc.pid)
    process_tree.signal_group(item.proc.pid, signal.SIGTERM)


def _has_exited(pid: int) -> bool:
    """True when the child has exited and waits to be reaped (its exit left unread)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
