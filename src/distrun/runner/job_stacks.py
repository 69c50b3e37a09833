"""`distrun job stacks NAME`: ask a running job's node agents for every process's stack.

The request goes through the job folder (`distrun.agent.stack_requests`), which every node
agent of the job watches: a backend whose node agents see the job folder (shared or relayed)
answers with no code of its own. One whose nodes are reached only through the engine
(Kubernetes: node 0's pod agent, through the API server's pod proxy) asks on its own channel
(`Backend.ask_stacks`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from distrun.agent.stack_requests import answer_wait, ask_nodes
from distrun.agent.stacks import INSTALL_HINT, ProcessStacks, py_spy_path
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.core.safe_files import read_text
from distrun.runner.jobs import get_job, record_backend
from distrun.store.layout import Layout


@dataclass
class StacksAnswer:
    processes: list[ProcessStacks]
    missing_nodes: list[int]  # nodes whose agent did not answer in time


def job_stacks(layout: Layout, name: str, *, native: bool = False) -> StacksAnswer:
    """Every process's stack of the running job `name`; DistrunError when it is not running."""
    record = get_job(layout, name)
    if JobStatus.of(record.status) != JobStatus.RUNNING:
        hint = f"`distrun job show {name}` says how it ended"
        if record.status == JobStatus.FAILED and (record.reason or "").startswith("hung:"):
            hint = f"it ended hung: its stacks are in {layout.job(name).root / 'hang' / 'stacks.txt'}"
        raise DistrunError(f"job {name} is {record.status}: only a running job's processes have stacks", hint)
    if py_spy_path() is None:
        raise DistrunError("reading stacks needs py-spy, which is not installed", INSTALL_HINT)
    root = layout.job(name).root
    nodes, processes = _planned(layout.job(name).plan_json)
    wait = answer_wait(processes)
    try:
        asked = record_backend(layout, record).ask_stacks(record, layout, native, wait)
        if asked is not None:
            return StacksAnswer([ProcessStacks.from_dict(p) for p in asked[0]], asked[1])
        found, missing = ask_nodes(root, os.urandom(8).hex(), nodes, wait, native=native)
    except OSError as exc:
        raise DistrunError(f"cannot ask job {name} for its stacks: {exc.strerror or exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise DistrunError(f"job {name}: its node agents answered with what is not a stack: {exc}") from None
    return StacksAnswer(found, missing)


def _planned(plan_json: Path) -> tuple[set[int], int]:
    """The nodes that run processes, and how many processes, as plan.json says."""
    try:
        plan = json.loads(read_text(plan_json))
        nodes = [n for n in plan["nodes"] if n.get("processes")]
        return {int(n["node_rank"]) for n in nodes}, sum(len(n["processes"]) for n in nodes)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DistrunError(f"cannot read the job's plan: {exc}", "wait for the job to start, then ask again") from None
