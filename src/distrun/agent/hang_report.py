"""What a hung job leaves: every process's stack in the job folder, and the process to blame.

`hang/stacks.txt` (the grouped stacks, for people) and `hang/stacks.json` (every process's
every thread, for tools and the web UI) are written by the node agent that saw no progress;
the root cause has the shape of a failed process's (`outcome.root_cause_of`), with the odd
process's stack as its traceback, so every place that shows a traceback shows it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distrun.agent.folder_writes import write_beneath
from distrun.agent.stack_groups import OddOneOut, group_stacks, grouped_text, odd_one_out
from distrun.agent.stacks import ProcessStacks

HANG_FOLDER = "hang"
STACKS_TEXT = "stacks.txt"
STACKS_JSON = "stacks.json"
# hang/stacks.json of the largest job (8,192 processes, deep stacks) stays well under this.
STACKS_JSON_LIMIT = 64 << 20


def hang_reason(seconds: float) -> str:
    return f"hung: no progress for {seconds:g} s"


def stacks_document(processes: list[ProcessStacks], reason: str) -> dict[str, Any]:
    return {"reason": reason, "processes": [p.to_dict() for p in processes]}


def write_hang_files(job_root: Path, processes: list[ProcessStacks], reason: str) -> str | None:
    """Write hang/stacks.txt and hang/stacks.json; the problem, if they could not be written."""
    text = f"distrun: {reason}\n\n" + grouped_text(group_stacks(processes), every_thread=True)
    try:
        write_beneath(job_root, HANG_FOLDER, STACKS_JSON, json.dumps(stacks_document(processes, reason)).encode())
        write_beneath(job_root, HANG_FOLDER, STACKS_TEXT, text.encode())
    except OSError as exc:
        return f"could not write {job_root / HANG_FOLDER}: {exc.strerror or exc}"
    return None


def hang_root_cause(
    processes: list[ProcessStacks], reason: str, after_ms: float, hosts: dict[int, str], log_of: dict[str, str]
) -> dict[str, Any]:
    """The record's root cause for a hang: the odd process out, or (all alike) the frame they share.

    `hosts` maps each node rank to its host; `log_of` each process name (of this node) to its log.
    """
    odd: OddOneOut | None = odd_one_out(group_stacks(processes))
    # All alike: the record still names a process (the first), the reason says they all stand there.
    who = odd.process if odd is not None and odd.process is not None else (processes[0] if processes else None)
    said = odd.reason if odd is not None else "no process to read"
    return {
        "name": who.name if who else None,
        "role": "rank" if who and _rank_of(who.who) is not None else None,
        "index": None,
        "rank": _rank_of(who.who) if who else None,
        "node_rank": who.node_rank if who else None,
        "host": hosts.get(who.node_rank, "") if who else "",
        "exit_code": None,
        "signal": None,
        "after_ms": after_ms,
        "reason": f"{reason}: {said}",
        "traceback": odd.traceback if odd is not None else "",
        "log_tail": "",
        "log": log_of.get(who.name, "") if who else "",
        "hang": f"{HANG_FOLDER}/{STACKS_JSON}",
    }


def _rank_of(who: str) -> int | None:
    """3 for `rank 3` (or `rank 3 (pid 123)`); None for a process that is not a rank."""
    words = who.split()
    return int(words[1]) if len(words) > 1 and words[0] == "rank" and words[1].isdigit() else None
