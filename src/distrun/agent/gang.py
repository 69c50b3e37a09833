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
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from distrun.agent import process_tree
from distrun.agent.cgroup import LaunchCgroup
from distrun.agent.containers import ContainerRun, container_name, remove, start_failure
from distrun.agent.hang_watch import HangWatch, read_lead
from distrun.agent.job_progress import ProgressBoard, publish_interval
from distrun.agent.line_stream import LineStream
from distrun.agent.node_files import write_node_files
from distrun.agent.outcome import (
    CANCELED,
    COMPLETED,
    FAILED,
    PREEMPTED,
    GangResult,
    ProcessOutcome,
    never_started,
    planned_outcome,
    root_cause_of,
    signal_name,
    who,
)
from distrun.agent.peers import POLL_SECONDS, MainWorkPeers
from distrun.agent.stack_requests import POLL_SECONDS as STACK_POLL_SECONDS
from distrun.agent.stack_requests import StackRequestWatch, answer_wait, ask_nodes
from distrun.agent.stop_signals import STOP_SIGNALS
from distrun.agent.traceback_finder import last_traceback
from distrun.agent.working_folders import make_artifact_dirs
from distrun.core.file_modes import make_dirs, open_append
from distrun.plan.model import LaunchPlan, ProcessSpec
from distrun.spec.defaults import DEFAULT_GRACE_PERIOD

if TYPE_CHECKING:  # MPI output handling is imported only by the jobs that start a launcher
    from distrun.agent.mpi_output import MpiOutput

    # Reading stacks (py-spy, a thread pool) is imported by the gangs that read them.
    from distrun.agent.stacks import ProcessStacks, StackTarget

READ_SIZE = 1 << 18
# How often a hang verdict waiting for the other nodes' stacks looks again.
HANG_WAIT_POLL = 0.1
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


@dataclass
class _Running:
    spec: ProcessSpec
    proc: subprocess.Popen[bytes]
    outcome: ProcessOutcome
    log_fd: int
    pidfd: int
    pipe_open: bool = True
    signalled_at: float | None = None  # when distrun sent it a stop signal
    # Whether it was still alive when signalled: one that had already exited on its own (its
    # exit not yet read, e.g. two ranks failing in the same instant) was not stopped by distrun.
    signalled_alive: bool = False
    demux: MpiOutput | None = None  # splits an MPI launcher's output into per-rank logs


@dataclass
class _EarlyRead:
    since: float  # the progress moment the read started after
    found: list[ProcessStacks]  # filled by the thread
    thread: threading.Thread | None = None
    local: list[ProcessStacks] | None = None  # this node's own, once read (the other nodes' come after)


@dataclass
class _Stop:
    status: str
    reason: str
    root: _Running | None = None
    root_cause: dict[str, Any] | None = None  # made before the stop (a hang's odd process out)


@dataclass
class GangOptions:
    grace_period: float = DEFAULT_GRACE_PERIOD
    timeout: float | None = None
    stream: BinaryIO | None = None
    color: bool = False
    base_env: Mapping[str, str] | None = None
    # 32 random hex digits, as uuid4().hex gave; the uuid module imports platform (2 ms a start).
    launch_id: str = field(default_factory=lambda: os.urandom(16).hex())
    on_started: Callable[[list[ProcessOutcome]], None] | None = None
    handle_signals: bool = True
    # Stop signals noted before the gang started (see agent.stop_signals); the gang adds the
    # ones it receives to the same list.
    signals: list[int] | None = None
    # Set when other agents run the job's other nodes: auxiliaries then wait for all of them.
    peers: MainWorkPeers | None = None
    # Says whether a stop signal is a preemption (stopped from outside, not `job cancel`): the
    # ranks get the grace period all the same, and the gang ends Preempted instead of Canceled.
    preempted_by: Callable[[int], bool] | None = None
    # limits.hang_timeout: with no output from any process and no metric logged for this long,
    # every process's stack is read into the job folder and the gang ends Failed (hung).
    hang_timeout: float | None = None
    # When the job last logged a metric (seconds since the epoch), or None: ranks that only log
    # metrics are making progress too.
    last_metric: Callable[[], float | None] | None = None
    # Answer `distrun job stacks` requests in the job folder (the folder above log_dir).
    stack_requests: bool = True
    # Whether the agents of the job's other nodes see this job folder's stack requests and
    # progress (shared or relayed): then a hang is judged, and its stacks read, job-wide.
    peers_share_job_folder: bool = True
    # Each process runs in a container of the job's image (`distrun.agent.containers`); None: here.
    container: ContainerRun | None = None


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
        self.running: list[_Running] = []
        # Kept as counts, not found by scanning `running`: every exit and every loop turn would
        # otherwise look at every process, O(N^2) over a job's life (at 512 ranks, about 0.6
        # million checks as they exit).
        self.live = 0  # processes not yet reaped
        self.main_pending = 0  # main (not auxiliary) processes that have not exited with 0
        self.open_pipes = 0  # output pipes not yet at their end
        self.stream = LineStream(options.stream, options.color)
        self.selector = selectors.DefaultSelector()
        self.stop: _Stop | None = None
        self.kill_at: float | None = None
        self.started = 0.0
        self.signals: list[int] = options.signals if options.signals is not None else []
        self.log_error: str | None = None
        self.cgroup: LaunchCgroup | None = None
        self.waiting_for_peers = False
        count = sum(len(node.processes) for node in self.nodes)
        lead = read_lead(options.hang_timeout, count) if options.hang_timeout else 0.0
        # The job's nodes that other agents run: a hang is judged on the whole job's progress,
        # and its stacks are read on every node (`agent.job_progress`, `agent.stack_requests`).
        working = {node.node_rank for node in plan.nodes if node.processes}
        self.other_nodes = working - wanted if options.peers_share_job_folder else set()
        self.other_processes = sum(len(n.processes) for n in plan.nodes if n.node_rank in self.other_nodes)
        self.board = (
            ProgressBoard(self.log_dir.parent, sorted(wanted)) if options.hang_timeout and self.other_nodes else None
        )
        self.publish_at: float | None = None  # when this node's last output is next published
        self.progress = HangWatch(options.hang_timeout, self._elsewhere_clock(), lead)
        self.early_read: _EarlyRead | None = None  # stacks read ahead of the hang timeout
        self.hang_pending: _EarlyRead | None = None  # hung: waiting for the other nodes' stacks
        self.read_lock = threading.Lock()  # one py-spy read of this node's processes at a time
        self.stack_watch = (
            StackRequestWatch(self.log_dir.parent, [node.node_rank for node in self.nodes])
            if options.stack_requests
            else None
        )
        self.stack_reader: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def run(self) -> GangResult:
        self.started = time.monotonic()
        process_tree.become_subreaper()
        _room_for_descriptors(sum(len(node.processes) for node in self.nodes))
        restore = self._install_signal_handlers()
        self.cgroup = LaunchCgroup.create(self.options.launch_id)
        try:
            self._handle_signals()  # a cancel that came first: nothing starts
            self._start_all()
            if self.board is not None:
                # This node's start is progress: a node that starts later than another (srun
                # starts the nodes' agents one by one) is not judged silent since the first start.
                self._publish_progress()
            if self.options.on_started and self.stop is None:
                self.options.on_started([r.outcome for r in self.running])
            if self.stop is None and self._main_work_done():
                self._main_work_finished()  # a node that runs only auxiliaries
            self._loop()
            self._sweep_leftovers()
            self._drain()
            # Before the logs are closed: the root cause's traceback is read through the
            # descriptor distrun wrote, not by a name the job may have pointed elsewhere.
            result = self._result()
        except BaseException:
            # Whatever went wrong in distrun itself, the job's processes do not outlive it.
            self._kill_remaining()
            raise
        finally:
            for item in self.running:
                self._close_log(item)
            if self.cgroup is not None:
                self.cgroup.close()
            self._remove_containers()
            self._remove_shm_leftovers()
            restore()
            self.selector.close()
        return result

    def _start_all(self) -> None:
        if self.stop is not None:
            return
        try:
            make_dirs(self.log_dir)
        except OSError as exc:
            self._begin_stop(_Stop(FAILED, f"could not create {self.log_dir}: {_why(exc)}"))
            return
        # ./outputs and ./logs exist when each process starts, as on Azure ML (on every backend: all start here).
        make_artifact_dirs(spec.cwd for node in self.nodes for spec in node.processes)
        base = dict(os.environ if self.options.base_env is None else self.options.base_env)
        if not self._prepare_nodes(base):
            return
        # Every log is opened before any process starts: a process cannot plant a link or a
        # pipe under the name of a log that is yet to be opened.
        log_fds: dict[str, int] = {}
        for node in self.nodes:
            for spec in node.processes:
                log_path = self.log_dir / spec.log_name
                try:
                    log_fds[spec.name] = open_append(log_path)
                except OSError as exc:
                    for fd in log_fds.values():
                        os.close(fd)
                    self._begin_stop(_Stop(FAILED, f"could not create {log_path}: {_why(exc)}"))
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
                    self._begin_stop(_Stop(FAILED, f"could not start {spec.name}: {_why(exc)}"))
                    return
                outcome.pid = proc.pid
                pidfd = os.pidfd_open(proc.pid)
                item = _Running(spec, proc, outcome, log_fd, pidfd)
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

    def _remove_shm_leftovers(self) -> None:
        """What the ranks' frameworks left in /dev/shm for this job (`agent.shm_leftovers`):
        every process of this node has ended by now."""
        from distrun.agent.shm_leftovers import remove_leftovers

        remove_leftovers(self.plan.environment(item.spec) for item in self.running)

    def _remove_containers(self) -> None:
        """Containers whose engine client was killed (after the grace period) are removed by name."""
        run = self.options.container
        if run is not None and self.running:
            remove(run, (container_name(self.options.launch_id, item.spec.name) for item in self.running))

    def _prepare_nodes(self, base: Mapping[str, str]) -> bool:
        """Before anything starts: the files the nodes need (MPI hostfile), and their launchers."""
        try:
            for node in self.nodes:
                # user_logs/ sits in the job folder, which the plan's file paths are relative to.
                write_node_files(node, self.log_dir.parent)
        except OSError as exc:
            self._begin_stop(_Stop(FAILED, f"could not write the job's node files: {exc.strerror or exc}"))
            return False
        for node in self.nodes:
            for spec in node.processes:
                if spec.output_demux is None:  # not an MPI launcher: nothing to look for on PATH
                    continue
                from distrun.agent.mpi_output import missing_launcher

                problem = missing_launcher(spec, process_tree.child_env(spec, base, "", self.plan.environment(spec)))
                if problem:
                    self._begin_stop(_Stop(FAILED, f"node {node.node_rank}: {problem}"))
                    return False
        return True

    def _loop(self) -> None:
        deadline = self.started + self.options.timeout if self.options.timeout else None
        while self.live:
            now = time.monotonic()
            wait = None
            peers_check = now + POLL_SECONDS if self.waiting_for_peers and self.stop is None else None
            hang_check = None
            if self.stop is None and self.hang_pending is not None:
                hang_check = now + HANG_WAIT_POLL
            elif self.stop is None:
                hang_check = self.progress.check_at if self._early_read_current() else self.progress.read_at
            stacks_check = self.stack_watch.next_poll if self.stack_watch is not None and self.stop is None else None
            for moment in (
                deadline if self.stop is None else None,
                self.kill_at,
                peers_check,
                hang_check,
                stacks_check,
                self.publish_at,
            ):
                if moment is not None:
                    wait = max(0.0, moment - now) if wait is None else min(wait, max(0.0, moment - now))
            if wait is None or wait > MAX_WAIT:
                wait = MAX_WAIT  # a timeout of weeks (or 1e300 s) is waited for in steps
            if self.stream.backlog:
                wait = min(wait, BACKLOG_POLL)  # a slow reader may have made room
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
                else:
                    self._drain_wakeup(key.fd)
            self._handle_signals()
            self.stream.pump()
            now = time.monotonic()
            if deadline is not None and self.stop is None and now >= deadline:
                self._begin_stop(_Stop(FAILED, f"timeout after {self.options.timeout:g} s"))
            if self.stop is None and not self._early_read_current() and self.progress.read_due(now):
                self._start_early_read()
            if self.stop is None and (self.hang_pending is not None or self.progress.due(now)):
                self._hang_check()
            if self.publish_at is not None and now >= self.publish_at:
                self._publish_progress()
            if self.stop is None and self.stack_watch is not None and self.stack_watch.due(now):
                self._answer_stack_requests()
            if self.kill_at is not None and now >= self.kill_at:
                self._kill_remaining()
            if self.waiting_for_peers and self.stop is None and self.options.peers.all_done():  # type: ignore[union-attr]
                self.waiting_for_peers = False
                self._stop_auxiliaries()

    # ------------------------------------------------------------ events

    def _read(self, item: _Running) -> None:
        fd = item.proc.stdout.fileno()  # type: ignore[union-attr]
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:
            data = b""
        self.progress.output_seen()
        if self.board is not None and self.publish_at is None:
            self.publish_at = time.monotonic() + publish_interval(self.progress.timeout or 1.0)
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

    def _exited(self, item: _Running) -> None:
        self.selector.unregister(item.pidfd)
        os.close(item.pidfd)
        code = item.proc.wait()
        self.live -= 1
        if code == 0 and not item.spec.auxiliary:
            self.main_pending -= 1
        outcome = item.outcome
        outcome.after_ms = round((time.monotonic() - self.started) * 1000, 1)
        if code < 0:
            outcome.signal = signal_name(-code)
        else:
            outcome.exit_code = code
        if item.signalled_at is not None and item.signalled_alive:
            outcome.stopped_by_distrun = True
        if outcome.failed and self.stop is None:
            self._begin_stop(_Stop(FAILED, "", item))
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

    def _begin_stop(self, stop: _Stop) -> None:
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
        process_tree.kill_pids(self._leftovers(), signal.SIGKILL)
        self._remove_containers()  # a killed engine client leaves its container running
        self.kill_at = None

    def _leftovers(self) -> list[int]:
        """Live processes of the launch other than the ones we started ourselves."""
        found = set(process_tree.marked_pids(self.options.launch_id))
        if self.cgroup is not None:
            found.update(process_tree.alive_pids(self.cgroup.pids()))
        return sorted(found - {r.proc.pid for r in self.running})

    def _sweep_leftovers(self) -> None:
        """Processes the job started and left behind (daemons, background jobs) end with it."""
        process_tree.reap_orphans({r.proc.pid for r in self.running})
        leftovers = self._leftovers()
        if not leftovers:
            return
        process_tree.kill_pids(leftovers, signal.SIGTERM)
        give_up = time.monotonic() + min(self.options.grace_period, DRAIN_SECONDS)
        while leftovers and time.monotonic() < give_up:
            time.sleep(0.02)
            process_tree.reap_orphans({r.proc.pid for r in self.running})
            leftovers = self._leftovers()
        process_tree.kill_pids(leftovers, signal.SIGKILL)
        process_tree.reap_orphans({r.proc.pid for r in self.running})

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

    def _finish_output(self, item: _Running) -> None:
        if item.demux is not None:
            item.demux.finish()
        self.stream.finish(item.spec.name)

    def _log_failed(self, item: _Running, exc: OSError) -> None:
        self._close_log(item)
        if self.log_error is None:
            self.log_error = f"cannot write {item.outcome.log}: {exc.strerror or exc}"
            if self.stop is None:
                self._begin_stop(_Stop(FAILED, self.log_error))

    @staticmethod
    def _close_log(item: _Running) -> None:
        if item.log_fd >= 0:
            try:
                os.close(item.log_fd)
            except OSError:
                pass
            item.log_fd = -1

    # ------------------------------------------------------------ hangs and stacks

    def _stack_targets(self) -> list[StackTarget]:
        from distrun.agent.stacks import StackTarget

        run = self.options.container
        return [
            StackTarget(
                r.spec.name,
                who(r.outcome),
                r.spec.node_rank,
                r.proc.pid,
                None if run is None else (run.program, container_name(self.options.launch_id, r.spec.name)),
            )
            for r in self.running
            if r.outcome.running
        ]

    def _ended_stacks(self) -> list[ProcessStacks]:
        """The processes that ended while the others run: in a hang, often the one that skipped a collective."""
        from distrun.agent.stacks import ProcessStacks

        ended = []
        for r in self.running:
            if not r.outcome.running:
                said = r.outcome.describe_exit()  # "exited with code 0", "was killed by SIGKILL"
                error = f"has {said}" if said.startswith("exited") else said
                ended.append(ProcessStacks(r.spec.name, who(r.outcome), r.spec.node_rank, r.proc.pid, error=error))
        return ended

    def _early_read_current(self) -> bool:
        """A read of the stacks started during the present silence (none since the last progress)."""
        return self.early_read is not None and self.early_read.since == self.progress.last_progress

    def _elsewhere_clock(self) -> Callable[[], float | None] | None:
        """The latest metric, or output on another node (seconds since the epoch): progress too."""
        metric, board = self.options.last_metric, self.board
        if board is None:
            return metric
        if metric is None:
            return board.latest_elsewhere
        return lambda: max((t for t in (metric(), board.latest_elsewhere()) if t is not None), default=None)

    def _publish_progress(self) -> None:
        """This node's last output, in wall-clock time, where the other nodes' agents read it."""
        self.publish_at = None
        if self.board is not None:
            self.board.publish(time.time() - (time.monotonic() - self.progress.last_progress))

    def _start_early_read(self) -> None:
        early = _EarlyRead(self.progress.last_progress, [])
        targets, ended = self._stack_targets(), self._ended_stacks()

        def read() -> None:
            from distrun.agent.stacks import read_stacks

            with self.read_lock:
                local = read_stacks(targets) + ended
            early.local = local
            early.found.extend(local)
            early.found.extend(self._other_nodes_stacks())

        early.thread = threading.Thread(target=read, name="distrun-hang-stacks", daemon=True)
        early.thread.start()
        self.early_read = early

    def _other_nodes_stacks(self) -> list[ProcessStacks]:
        """The stacks of the nodes other agents run, asked through the job folder like `job stacks`."""
        if not self.other_nodes or self.stack_watch is None:
            return []
        from distrun.agent.stacks import ProcessStacks

        request_id = os.urandom(8).hex()
        self.stack_watch.own.add(request_id)
        try:
            # An agent may be reading its own stacks for its own verdict first: two reads' time.
            found, missing = ask_nodes(
                self.log_dir.parent,
                request_id,
                self.other_nodes,
                answer_wait(self.other_processes, reads_ahead=2),
                stop=lambda: self.stop is not None,
            )
        except OSError as exc:
            found, missing = [], sorted(self.other_nodes)
            said = f"could not ask its node agent ({exc.strerror or exc})"
        else:
            said = "its node agent did not answer in time"
        finally:
            self.stack_watch.own.discard(request_id)
        return found + [ProcessStacks(f"node {k}", f"node {k}", k, 0, error=said) for k in missing]

    def _hang_check(self) -> None:
        """No output for hang_timeout: a metric logged since then is progress; otherwise the job hangs.

        The verdict waits (without holding up this loop, which answers the other nodes' requests)
        until the stacks of every node are read.
        """
        if self.hang_pending is None:
            if not self.progress.hung(time.monotonic()):
                return
            if not self._early_read_current():
                self._start_early_read()
            self.hang_pending = self.early_read
        pending = self.hang_pending
        assert pending is not None and pending.thread is not None
        if pending.thread.is_alive():
            return
        self.hang_pending = None
        if not self.progress.hung(time.monotonic()):
            return  # progress came while the stacks were read (a line, a metric, another node's): not hung
        from distrun.agent.hang_report import hang_reason, hang_root_cause, write_hang_files

        seconds = self.progress.timeout or 0.0
        reason = hang_reason(seconds)
        self.stream.message(f"distrun: {reason}: every process's stack is in hang/stacks.txt")
        processes = sorted(pending.found, key=lambda p: p.node_rank)  # in the job's order, whichever node saw it
        problem = write_hang_files(self.log_dir.parent, processes, reason)
        if problem:
            self.stream.message(f"distrun: {problem}")
        root = hang_root_cause(
            processes,
            reason,
            round((time.monotonic() - self.started) * 1000, 1),
            {node.node_rank: node.host for node in self.plan.nodes},
            {r.spec.name: r.outcome.log for r in self.running},
        )
        self._begin_stop(_Stop(FAILED, root["reason"], root_cause=root))

    def _answer_stack_requests(self) -> None:
        """`distrun job stacks`: new requests are answered in a thread, one read at a time."""
        watch = self.stack_watch
        assert watch is not None
        early = self.early_read if self._early_read_current() else None
        reading = early is not None and early.local is None and early.thread is not None and early.thread.is_alive()
        if reading or (self.stack_reader is not None and self.stack_reader.is_alive()):
            watch.next_poll = time.monotonic() + STACK_POLL_SECONDS  # the next request waits for this read
            return
        requests = watch.new_requests()
        if not requests:
            return
        if early is not None and early.local is not None:
            # Read during this silence (other nodes' agents ask when they see it too): answered
            # with that read, so agents that see a hang at once each read their processes once.
            for request_id, native in requests:
                if not native:
                    watch.taken(request_id)
                    watch.answer(request_id, early.local)
            requests = [(request_id, native) for request_id, native in requests if native]
            if not requests:
                return
        from distrun.agent.stacks import read_stacks

        targets, ended = self._stack_targets(), self._ended_stacks()
        for request_id, _ in requests:
            watch.taken(request_id)

        def answer() -> None:
            for native in sorted({native for _, native in requests}):
                with self.read_lock:
                    processes = read_stacks(targets, native=native) + ended
                for request_id, wanted in requests:
                    if wanted == native:
                        watch.answer(request_id, processes)

        self.stack_reader = threading.Thread(target=answer, name="distrun-stacks", daemon=True)
        self.stack_reader.start()

    # ------------------------------------------------------------ signals

    def _install_signal_handlers(self) -> Callable[[], None]:
        if not self.options.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.selector.register(wake_r, selectors.EVENT_READ, ("wake", None))
        previous_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous_fd)
            os.close(wake_r)
            os.close(wake_w)

        return restore

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    @staticmethod
    def _drain_wakeup(fd: int) -> None:
        try:
            while os.read(fd, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def _handle_signals(self) -> None:
        while self.signals:
            signum = self.signals.pop(0)
            if self.stop is None and self.options.preempted_by is not None and self.options.preempted_by(signum):
                self.stream.message(
                    f"distrun: {signal_name(signum)} from outside: the job is preempted; every process gets "
                    f"{self.options.grace_period:g} s to save its work"
                )
                self._begin_stop(_Stop(PREEMPTED, f"preempted ({signal_name(signum)} from outside)"))
            elif self.stop is None:
                how = "canceled" if signum != signal.SIGHUP else "canceled: the terminal closed"
                self.stream.message(self._stopping_message(signum))
                self._begin_stop(_Stop(CANCELED, how if signum == signal.SIGHUP else f"{how} ({signal_name(signum)})"))
            else:
                # A second interrupt: the user does not want to wait for the grace period.
                self._kill_remaining()

    def _stopping_message(self, signum: int) -> str:
        """What a user who pressed Ctrl-C waits for, and how not to wait (ranks may ignore SIGTERM)."""
        grace = self.options.grace_period
        text = f"distrun: {signal_name(signum)} received, stopping the job: SIGTERM sent to every process"
        if grace > 0:
            text += f"; those still running in {grace:g} s are killed"
            if signum == signal.SIGINT:
                text += " (press Ctrl-C again to kill them now)"
        return text

    # ------------------------------------------------------------ result

    def _result(self) -> GangResult:
        outcomes = [item.outcome for item in self.running]
        started = {o.name for o in outcomes}
        outcomes += [
            never_started(spec, node.host, self.log_dir)
            for node in self.nodes
            for spec in node.processes
            if spec.name not in started
        ]
        stop = self.stop
        if stop is None:
            return GangResult(COMPLETED, "all processes completed", None, outcomes)
        root = None
        reason = stop.reason
        if stop.root is not None and stop.root.demux is not None:
            from distrun.agent.mpi_output import mpi_root_cause

            root = mpi_root_cause(stop.root.outcome, stop.root.demux, [node.host for node in self.plan.nodes])
            reason = root["reason"]
        elif stop.root_cause is not None:
            root = stop.root_cause
        elif stop.root is not None:
            root = root_cause_of(stop.root.outcome, last_traceback(stop.root.outcome.log, stop.root.log_fd))
            if self.options.container is not None:
                said = start_failure(self.options.container, root["exit_code"], root["log_tail"])
                root["reason"] = said or root["reason"]
            reason = root["reason"]
        return GangResult(stop.status, reason, root, outcomes)


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


def _stop_group(item: _Running, now: float) -> None:
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


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
