"""Restarts of a Slurm job: the batch script's bookkeeping between attempts, and how `observe` reads it.

With restarts on (`distrun.restarts.policy`), the batch script runs attempts in a loop, asking this
module before and after each:

    python -m distrun.backends.slurm.attempts --job-dir DIR begin
        prints the attempt number k (DISTRUN_RESTART_COUNT) for the attempt about to start, or
        `stop <code>` when a requeue by Slurm itself was one preemption too many
    python -m distrun.backends.slurm.attempts --job-dir DIR end
        records the attempt that just ended (slurm/attempts.json) and prints what comes next:
        `restart <pause s>`  a failure: srun again in this allocation after the pause
        `requeue`            a preemption: the allocation is going away; `scontrol requeue`
        `stop <code>`        the job is over (0: Completed)

A failure restarts in the same allocation (no wait in the queue, the nodes are known good
enough); a preemption gives the nodes back and waits in the queue again, as Slurm's own
`--requeue` does. The attempt that ended keeps its node outcomes in slurm/attempt_<k>/ and its
logs in user_logs/attempt_<k>/, so the next one starts with a clean channel and user_logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.cluster import first_failure
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.state import read_canceled_at
from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, write_file_beneath
from distrun.core.job_status import TERMINAL_STATUSES, JobStatus
from distrun.core.safe_files import SMALL_FILE_LIMIT, open_folder_beneath, read_text
from distrun.restarts.loop import end_attempt
from distrun.restarts.policy import Attempt, Decision, keep_attempt

# Node outcomes and peer markers of the outcome channel (slurm/node_NN.json, slurm/main_done_NN).
CHANNEL_FILE = re.compile(r"^(node_\d+\.json|[a-z_]+_\d\d)$")


def read_attempts(paths: SlurmPaths) -> list[dict[str, Any]]:
    """The attempts recorded so far, oldest first ([] before the first one ended)."""
    try:
        data = json.loads(read_text(paths.attempts))
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def _write_attempts(paths: SlurmPaths, attempts: Sequence[dict[str, Any]]) -> None:
    data = json.dumps(list(attempts), indent=2).encode("utf-8")
    write_file_beneath(paths.job_dir, paths.attempts, data)  # whole, FILE_MODE, never through a planted link


def set_aside_outcomes(paths: SlurmPaths, attempt: int) -> None:
    """The node outcomes of `attempt` (regular files of slurm/ named as the channel names them)
    moved into slurm/attempt_<k>/, and the preemption marker removed.

    The attempt's ranks could write the job folder: slurm/ and the attempt folder are made and
    opened without following a link (a link at the attempt folder's name is replaced, never
    followed), and every move and removal is relative to those open folders, so nothing outside
    the job folder is made, moved or removed.
    """
    root = paths.job_dir
    engine = paths.folder.name
    folder_fd = open_folder_beneath(root, engine, DIR_MODE)
    try:
        kept_fd = open_folder_beneath(
            root, f"{engine}/{paths.attempt_folder(attempt).name}", DIR_MODE, replace_planted=True
        )
        try:
            with os.scandir(folder_fd) as listed:
                names = [e.name for e in listed if CHANNEL_FILE.match(e.name) and e.is_file(follow_symlinks=False)]
            for name in names:
                os.replace(name, name, src_dir_fd=folder_fd, dst_dir_fd=kept_fd)
        finally:
            os.close(kept_fd)
        try:
            os.unlink(paths.preempted.name, dir_fd=folder_fd)
        except FileNotFoundError:
            pass
    finally:
        os.close(folder_fd)


def attempt_state(
    outcomes: Sequence[NodeOutcome],
    node_count: int,
    *,
    canceled_at: float | None,
    preempted: str | None,
    preempted_at: float | None = None,
) -> tuple[JobStatus, str, dict[str, Any] | None]:
    """How an attempt ended, from its node outcomes and the markers in slurm/. Pure.

    A rank's failure wins (the job's own fault) unless the stop caused it; then a cancel by the
    user (`canceled_at`, when `distrun job cancel` asked); then a preemption (the batch script
    noted a SIGTERM from outside at `preempted_at`, or an agent saw one). scancel and Slurm signal
    every process of the job, ranks included, so a rank that exits non-zero on that SIGTERM (a
    checkpoint handler's `sys.exit(143)`) may report before its node agent knows it was a stop:
    such a failure is the stop's doing (`stopped_it`), not the attempt's cause.
    """
    if preempted is None and any(o.status == JobStatus.PREEMPTED for o in outcomes):
        preempted = "preempted (SIGTERM from outside)"
    stopped = canceled_at is not None or preempted is not None
    stop_at = min((t for t in (canceled_at, preempted_at) if t is not None), default=None)
    failures = [o for o in outcomes if o.status == JobStatus.FAILED and not (stopped and stopped_it(o, stop_at))]
    cause = first_failure(failures)
    if cause is not None:
        root = dict(cause.root_cause) if cause.root_cause else None
        return JobStatus.FAILED, cause.reason or "a process failed", root
    if canceled_at is not None:
        return JobStatus.CANCELED, "canceled by the user", None
    if preempted is not None:
        return JobStatus.PREEMPTED, preempted, None
    reported = {o.node_rank for o in outcomes}
    if len(reported) >= node_count and all(o.status == JobStatus.COMPLETED for o in outcomes):
        return JobStatus.COMPLETED, "", None
    missing = sorted(set(range(node_count)) - reported)
    if missing:
        said = ", ".join(map(str, missing))
        return JobStatus.FAILED, f"node(s) {said} wrote no outcome: see slurm/output.txt in the job folder", None
    return JobStatus.FAILED, "the nodes reported no failure but did not all complete", None


def stopped_it(failed: NodeOutcome, stop_at: float | None) -> bool:
    """Whether a node's failure came from a cancel or preemption (at `stop_at`, when known). Pure.

    It did when it happened at or after the stop was noted, or when the failed rank ended by the
    stop's own SIGTERM (killed by it, or exited 128+15 from a handler): Slurm's own preemption
    signals the ranks as soon as the batch script, whose note may come a moment after their exit.
    """
    root = failed.root_cause or {}
    if root.get("signal") == "SIGTERM" or root.get("exit_code") == 128 + 15:
        return True
    return stop_at is not None and (failed.failed_at or float("inf")) >= stop_at


class AttemptBook:
    """One job's attempts on Slurm, kept in its job folder (every node and the submitter see it): the
    restart loop's bookkeeping (`distrun.restarts.loop.Bookkeeping`), its body run once per step of the
    batch script's loop."""

    def __init__(self, job_dir: Path) -> None:
        from distrun.agent.node import read_job

        self.job_dir = job_dir
        self.paths = SlurmPaths(job_dir)
        self.job = read_job(job_dir)
        self.policy = self.job.plan_job.restarts
        self.node_count = self.job.plan_job.node_count

    def begin(self, slurm_restarts: int) -> str:
        """The number of the attempt about to start; first records one that Slurm ended itself."""
        attempts = read_attempts(self.paths)
        outcomes = self._outcomes()
        if outcomes or self._user_logs_written():
            # The last attempt never reached `end`: Slurm stopped the batch script (its own
            # preemption, a node failure) and requeued the job.
            said = f"requeued by Slurm (SLURM_RESTART_COUNT={slurm_restarts})"
            noted_at = self._preempted()[1]
            status, reason, root = attempt_state(
                outcomes, self.node_count, canceled_at=None, preempted=said, preempted_at=noted_at
            )
            if status == JobStatus.FAILED and root is None:
                status, reason = JobStatus.PREEMPTED, said
            ended = self._end(attempts, outcomes, status, reason, root)
            if ended.startswith("stop"):
                return ended
        if self.paths.cancel.exists():
            # `distrun job cancel` came while the script waited to (re)start: no attempt starts.
            return "stop 1"
        self.paths.preempted.unlink(missing_ok=True)
        return str(len(read_attempts(self.paths)))

    def end(self) -> str:
        attempts = read_attempts(self.paths)
        outcomes = self._outcomes()
        preempted, preempted_at = self._preempted()
        canceled_at = read_canceled_at(self.paths)
        status, reason, root = attempt_state(
            outcomes, self.node_count, canceled_at=canceled_at, preempted=preempted, preempted_at=preempted_at
        )
        return self._end(attempts, outcomes, status, reason, root)

    def _end(
        self,
        attempts: list[dict[str, Any]],
        outcomes: Sequence[NodeOutcome],
        status: JobStatus,
        reason: str,
        root: dict[str, Any] | None,
    ) -> str:
        """The restart loop's body (`distrun.restarts.loop.end_attempt`) over this book, in words for the script."""
        started = min((o.started_at for o in outcomes), default=None)
        ended = max((o.ended_at for o in outcomes), default=None) or time.time()
        attempt = Attempt(len(attempts), status, reason, root, started, ended)
        history = [Attempt.from_dict(a) for a in attempts]
        follows = end_attempt(self.policy, history, attempt, self)
        if not follows.restart:
            self.note(history)
            return f"stop {0 if status == JobStatus.COMPLETED else 1}"
        return "requeue" if follows.after_preemption else f"restart {follows.pause:g}"

    # ------------------------------------------------------------ the restart loop's bookkeeping

    def overrule(self, attempt: Attempt, decision: Decision) -> Decision:
        """A cancel the user asked for stops the job whatever the attempt's status: it is never restarted."""
        return Decision(False, decision.reason) if self.paths.cancel.exists() else decision

    def set_aside(self, attempt: Attempt) -> None:
        """The ended attempt's logs and node outcomes move aside; the next one starts clean."""
        keep_attempt(attempt, self.job.folder.user_logs)
        set_aside_outcomes(self.paths, attempt.attempt)

    def note(self, attempts: Sequence[Attempt]) -> None:
        _write_attempts(self.paths, [a.to_dict() for a in attempts])

    def _outcomes(self) -> list[NodeOutcome]:
        from distrun.backends.slurm.node_agent import outcome_channel

        return list(outcome_channel(self.job_dir, self.node_count).outcomes().values())

    def _preempted(self) -> tuple[str | None, float | None]:
        """The batch script's preemption note: what it says, and when (epoch s) it was noted."""
        try:
            text = read_text(self.paths.preempted, SMALL_FILE_LIMIT)
        except OSError:
            return None, None
        return read_preempted(text)

    def _user_logs_written(self) -> bool:
        user_logs = self.job.folder.user_logs
        return user_logs.is_dir() and any(e.is_file() for e in user_logs.iterdir())


def read_preempted(text: str) -> tuple[str, float | None]:
    """slurm/preempted as the batch script writes it: the time (epoch s) on line 1, then what it saw. Pure."""
    first, _, rest = text.strip().partition("\n")
    try:
        noted_at: float | None = float(first)
    except ValueError:
        noted_at, rest = None, text.strip()  # no time: the whole note is what it saw
    return f"preempted ({rest.strip() or 'SIGTERM from outside'})", noted_at


def restart_aware_status(
    slurm_status: JobStatus, observed: tuple[JobStatus, str, dict[str, Any] | None], attempts: Sequence[dict[str, Any]]
) -> tuple[JobStatus, str, dict[str, Any] | None]:
    """A job with restarts: terminal only once Slurm ended it; then as its last attempt says. Pure.

    Between attempts the nodes' outcomes may all be in while the batch script decides: that is
    not the job's end. A requeued job is Queued again ("attempt k waits for nodes").
    """
    status, reason, root = observed
    last = attempts[-1] if attempts else None
    slurm_done = slurm_status in TERMINAL_STATUSES or slurm_status == JobStatus.UNKNOWN
    if slurm_done:
        if last is not None and not last.get("restarted"):
            return JobStatus(last["status"]), str(last.get("reason", "")), last.get("root_cause")
        if last is not None and root is None and status == JobStatus.FAILED:
            # The next attempt never reported: the script ended (or was killed) between attempts.
            why = f"Slurm ended the job before attempt {len(attempts)} ran: see slurm/output.txt in the job folder"
            return JobStatus.FAILED, why, None
        return status, reason, root
    if status == JobStatus.CANCEL_REQUESTED:
        return observed
    if status in TERMINAL_STATUSES or status == JobStatus.FINALIZING:
        status, reason, root = JobStatus.RUNNING, "an attempt ended; the batch script decides what follows", None
    if last is not None and last.get("restarted"):
        what = f"attempt {len(attempts)} after: {last.get('reason', '')}"
        reason = f"{reason}; {what}" if reason else what
    return status, reason, root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m distrun.backends.slurm.attempts", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--job-dir", type=Path, required=True, help="the job folder")
    parser.add_argument("step", choices=("begin", "end"))
    args = parser.parse_args(argv)
    try:
        book = AttemptBook(args.job_dir.absolute())
    except DistrunError as exc:  # job.json changed after submission (PlanJob.from_dump says how)
        print(f"distrun: error: {exc.render()}", file=sys.stderr, flush=True)
        return 1
    if args.step == "begin":
        restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
        print(book.begin(int(restarts) if restarts.isdigit() else 0))
    else:
        print(book.end())
    return 0


if __name__ == "__main__":
    sys.exit(main())
