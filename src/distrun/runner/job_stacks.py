"""`distrun job stacks NAME`: ask a running job's node agents for every process's stack.

The request goes through the job folder (`distrun.agent.stack_requests`), which every node
agent of the job watches: nothing here knows the engine, so a backend whose node agents see
the job folder answers with no code of its own.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from distrun.agent.folder_writes import listed_beneath, remove_beneath, write_beneath
from distrun.agent.stack_requests import ANSWERS, POLL_SECONDS, REQUESTS, read_answer
from distrun.agent.stacks import DEFAULT_TIMEOUT, INSTALL_HINT, PARALLEL, ProcessStacks, py_spy_path
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.core.safe_files import MAX_METADATA_BYTES, read_text
from distrun.runner.jobs import get_job
from distrun.store.layout import Layout

# Beyond the agents' own time (a poll, then py-spy's timeout for each batch of processes).
WAIT_MARGIN = 5.0
_WAIT_STEP = 0.1


@dataclass
class StacksAnswer:
    processes: list[ProcessStacks]
    missing_nodes: list[int]  # nodes whose agent did not answer in time


def job_stacks(layout: Layout, name: str, *, native: bool = False) -> StacksAnswer:
    """Every process's stack of the running job `name`; DistrunError when it is not running."""
    record = get_job(layout, name)
    if JobStatus.of(record.status) != JobStatus.RUNNING:
        hint = "`distrun job show NAME` says how it ended"
        if record.status == JobStatus.FAILED and (record.reason or "").startswith("hung:"):
            hint = f"it ended hung: its stacks are in {layout.job(name).root / 'hang' / 'stacks.txt'}"
        raise DistrunError(f"job {name} is {record.status}: only a running job's processes have stacks", hint)
    if py_spy_path() is None:
        raise DistrunError("reading stacks needs py-spy, which is not installed", INSTALL_HINT)
    root = layout.job(name).root
    nodes, processes = _planned(layout.job(name).plan_json)
    request_id = os.urandom(8).hex()
    try:
        write_beneath(root, REQUESTS, request_id, json.dumps({"native": native}).encode())
    except OSError as exc:
        raise DistrunError(f"cannot ask job {name} for its stacks: {exc.strerror or exc}") from None
    give_up = (
        time.monotonic() + 2 * POLL_SECONDS + DEFAULT_TIMEOUT * math.ceil(max(processes, 1) / PARALLEL) + WAIT_MARGIN
    )
    answers: dict[str, dict[str, object]] = {}
    try:
        while time.monotonic() < give_up:
            for file in listed_beneath(root, ANSWERS):
                if file.startswith(f"{request_id}-") and file not in answers:
                    found = read_answer(root, file, MAX_METADATA_BYTES)
                    if found is not None:
                        answers[file] = found
            if nodes <= _covered(answers):
                break
            time.sleep(_WAIT_STEP)
    finally:
        remove_beneath(root, REQUESTS, [request_id])
        remove_beneath(root, ANSWERS, [f for f in listed_beneath(root, ANSWERS) if f.startswith(f"{request_id}-")])
    found_processes = []
    for file in sorted(answers):
        for item in answers[file].get("processes") or []:  # type: ignore[union-attr]
            try:
                found_processes.append(ProcessStacks.from_dict(item))
            except (KeyError, TypeError, ValueError):
                continue  # not an answer distrun wrote
    return StacksAnswer(found_processes, sorted(nodes - _covered(answers)))


def _covered(answers: dict[str, dict[str, object]]) -> set[int]:
    return {rank for answer in answers.values() for rank in answer["node_ranks"] if isinstance(rank, int)}  # type: ignore[attr-defined]


def _planned(plan_json: Path) -> tuple[set[int], int]:
    """The nodes that run processes, and how many processes, as plan.json says."""
    try:
        plan = json.loads(read_text(plan_json))
        nodes = [n for n in plan["nodes"] if n.get("processes")]
        return {int(n["node_rank"]) for n in nodes}, sum(len(n["processes"]) for n in nodes)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DistrunError(f"cannot read the job's plan: {exc}", "wait for the job to start, then ask again") from None
