"""The gang's hang watchdog and stack reads: apart from its loop, which asks them when to look.

With `limits.hang_timeout`, no output from any process of the job and no metric for that long
is a hang: every process's stack is read (ahead of the verdict, so the verdict does not wait for
py-spy), the other nodes' agents are asked for theirs through the job folder, and the gang ends
Failed with the odd process out as its root cause (`agent.hang_report`). The same reads answer
`distrun job stacks` requests (`agent.stack_requests`) in a thread: the loop never waits for them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from distrun.agent.containers import container_name
from distrun.agent.gang_state import GangOptions, GangStop, RunningProcess
from distrun.agent.hang_watch import HangWatch, read_lead
from distrun.agent.job_progress import ProgressBoard, publish_interval
from distrun.agent.line_stream import LineStream
from distrun.agent.outcome import FAILED, who
from distrun.agent.stack_requests import POLL_SECONDS as STACK_POLL_SECONDS
from distrun.agent.stack_requests import StackRequestWatch, answer_wait, ask_nodes
from distrun.plan.model import LaunchPlan

if TYPE_CHECKING:  # Reading stacks (py-spy, a thread pool) is imported by the gangs that read them.
    from distrun.agent.stacks import ProcessStacks, StackTarget

# How often a hang verdict waiting for the other nodes' stacks looks again.
HANG_WAIT_POLL = 0.1


@dataclass
class _EarlyRead:
    since: float  # the progress moment the read started after
    found: list[ProcessStacks]  # filled by the thread
    thread: threading.Thread | None = None
    local: list[ProcessStacks] | None = None  # this node's own, once read (the other nodes' come after)


class HangAndStackReader:
    """One gang's hang verdicts and stack reads, over the processes it started (`running`, kept by the gang)."""

    def __init__(
        self,
        plan: LaunchPlan,
        node_ranks: Collection[int],
        own_nodes: Sequence[int],
        job_root: Path,
        options: GangOptions,
        running: list[RunningProcess],
        stream: LineStream,
        stopping: Callable[[], bool],
    ) -> None:
        self.plan = plan
        self.job_root = job_root
        self.options = options
        self.running = running
        self.stream = stream
        self.stopping = stopping
        count = sum(len(node.processes) for node in plan.nodes if node.node_rank in own_nodes)
        lead = read_lead(options.hang_timeout, count) if options.hang_timeout else 0.0
        # The job's nodes that other agents run: a hang is judged on the whole job's progress,
        # and its stacks are read on every node (`agent.job_progress`, `agent.stack_requests`).
        working = {node.node_rank for node in plan.nodes if node.processes}
        self.other_nodes = working - set(node_ranks) if options.peers_share_job_folder else set()
        self.other_processes = sum(len(n.processes) for n in plan.nodes if n.node_rank in self.other_nodes)
        self.board = ProgressBoard(job_root, sorted(node_ranks)) if options.hang_timeout and self.other_nodes else None
        self.publish_at: float | None = None  # when this node's last output is next published
        self.progress = HangWatch(options.hang_timeout, self._elsewhere_clock(), lead)
        self.early_read: _EarlyRead | None = None  # stacks read ahead of the hang timeout
        self.hang_pending: _EarlyRead | None = None  # hung: waiting for the other nodes' stacks
        self.read_lock = threading.Lock()  # one py-spy read of this node's processes at a time
        self.stack_watch = StackRequestWatch(job_root, list(own_nodes)) if options.stack_requests else None
        self.stack_reader: threading.Thread | None = None

    # ------------------------------------------------------------ what the loop asks

    def started(self) -> None:
        """This node's start is progress: a node that starts later than another (srun starts the
        nodes' agents one by one) is not judged silent since the first start."""
        if self.board is not None:
            self.publish_progress()

    def output_seen(self) -> None:
        self.progress.output_seen()
        if self.board is not None and self.publish_at is None:
            self.publish_at = time.monotonic() + publish_interval(self.progress.timeout or 1.0)

    def moments(self, now: float, stopping: bool) -> list[float | None]:
        """When the loop must next look at a hang, the stack requests and this node's progress."""
        hang_check = None
        if not stopping and self.hang_pending is not None:
            hang_check = now + HANG_WAIT_POLL
        elif not stopping:
            hang_check = self.progress.check_at if self.early_read_current() else self.progress.read_at
        stacks_check = self.stack_watch.next_poll if self.stack_watch is not None and not stopping else None
        return [hang_check, stacks_check, self.publish_at]

    def check(self, now: float, started: float) -> GangStop | None:
        """While nothing stops the gang: read ahead when the silence is long enough; the hang's stop once it hangs."""
        if not self.early_read_current() and self.progress.read_due(now):
            self.start_early_read()
        if self.hang_pending is not None or self.progress.due(now):
            return self.hang_check(started)
        return None

    def tend(self, now: float, stopping: bool) -> None:
        """Publish this node's progress when due; answer new stack requests while the gang runs."""
        if self.publish_at is not None and now >= self.publish_at:
            self.publish_progress()
        if not stopping and self.stack_watch is not None and self.stack_watch.due(now):
            self.answer_stack_requests()

    # ------------------------------------------------------------ stacks

    def stack_targets(self) -> list[StackTarget]:
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

    def ended_stacks(self) -> list[ProcessStacks]:
        """The processes that ended while the others run: in a hang, often the one that skipped a collective."""
        from distrun.agent.stacks import ProcessStacks

        ended = []
        for r in self.running:
            if not r.outcome.running:
                said = r.outcome.describe_exit()  # "exited with code 0", "was killed by SIGKILL"
                error = f"has {said}" if said.startswith("exited") else said
                ended.append(ProcessStacks(r.spec.name, who(r.outcome), r.spec.node_rank, r.proc.pid, error=error))
        return ended

    def early_read_current(self) -> bool:
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

    def publish_progress(self) -> None:
        """This node's last output, in wall-clock time, where the other nodes' agents read it."""
        self.publish_at = None
        if self.board is not None:
            self.board.publish(time.time() - (time.monotonic() - self.progress.last_progress))

    def start_early_read(self) -> None:
        early = _EarlyRead(self.progress.last_progress, [])
        targets, ended = self.stack_targets(), self.ended_stacks()

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
                self.job_root,
                request_id,
                self.other_nodes,
                answer_wait(self.other_processes, reads_ahead=2),
                stop=self.stopping,
            )
        except OSError as exc:
            found, missing = [], sorted(self.other_nodes)
            said = f"could not ask its node agent ({exc.strerror or exc})"
        else:
            said = "its node agent did not answer in time"
        finally:
            self.stack_watch.own.discard(request_id)
        return found + [ProcessStacks(f"node {k}", f"node {k}", k, 0, error=said) for k in missing]

    def hang_check(self, started: float) -> GangStop | None:
        """No output for hang_timeout: a metric logged since then is progress; otherwise the job hangs.

        The verdict waits (without holding up the loop, which answers the other nodes' requests)
        until the stacks of every node are read.
        """
        if self.hang_pending is None:
            if not self.progress.hung(time.monotonic()):
                return None
            if not self.early_read_current():
                self.start_early_read()
            self.hang_pending = self.early_read
        pending = self.hang_pending
        assert pending is not None and pending.thread is not None
        if pending.thread.is_alive():
            return None
        self.hang_pending = None
        if not self.progress.hung(time.monotonic()):
            return None  # progress came while the stacks were read (a line, a metric, another node's): not hung
        from distrun.agent.hang_report import hang_reason, hang_root_cause, write_hang_files

        seconds = self.progress.timeout or 0.0
        reason = hang_reason(seconds)
        self.stream.message(f"distrun: {reason}: every process's stack is in hang/stacks.txt")
        processes = sorted(pending.found, key=lambda p: p.node_rank)  # in the job's order, whichever node saw it
        problem = write_hang_files(self.job_root, processes, reason)
        if problem:
            self.stream.message(f"distrun: {problem}")
        root = hang_root_cause(
            processes,
            reason,
            round((time.monotonic() - started) * 1000, 1),
            {node.node_rank: node.host for node in self.plan.nodes},
            {r.spec.name: r.outcome.log for r in self.running},
        )
        return GangStop(FAILED, root["reason"], root_cause=root)

    def answer_stack_requests(self) -> None:
        """`distrun job stacks`: new requests are answered in a thread, one read at a time."""
        watch = self.stack_watch
        assert watch is not None
        early = self.early_read if self.early_read_current() else None
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

        targets, ended = self.stack_targets(), self.ended_stacks()
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
