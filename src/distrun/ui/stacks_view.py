"""Stacks on the web UI: a hung job's (read from hang/stacks.json) and a running job's (read on request).

Plain data for the templates: each group of alike processes as its headline and the stack of
its first process, the odd one out first named apart. hang/stacks.json is in the job folder,
which the job's processes can write: it is read through the safe path, bounded, and what is not
what distrun wrote is skipped.
"""

from __future__ import annotations

from typing import Any

from distrun.agent.hang_report import HANG_FOLDER, STACKS_JSON, STACKS_JSON_LIMIT
from distrun.agent.stack_groups import group_stacks, odd_one_out, traceback_text
from distrun.agent.stacks import ProcessStacks
from distrun.store.index import JobRecord
from distrun.store.layout import JobFolder
from distrun.ui.job_files import read_json

MAX_GROUPS = 64  # groups shown on a page; a job with more differing stacks shows the first


def groups_view(processes: list[ProcessStacks]) -> dict[str, Any]:
    """{"groups": [{"headline", "stack"}...], "odd": reason or "", "hidden": groups not shown}."""
    groups = group_stacks(processes)
    odd = odd_one_out(groups)
    shown = [
        {"headline": g.headline(), "stack": traceback_text(g.members[0]) if g.error is None else ""}
        for g in groups[:MAX_GROUPS]
    ]
    return {"groups": shown, "odd": odd.reason if odd is not None else "", "hidden": max(0, len(groups) - MAX_GROUPS)}


def hang_view(record: JobRecord, folder: JobFolder) -> dict[str, Any] | None:
    """A job that ended hung: its stacks as they were then; None for any other job."""
    cause = record.root_cause
    if record.status != "Failed" or not isinstance(cause, dict) or not cause.get("hang"):
        return None
    data, problem = read_json(folder, folder.root / HANG_FOLDER / STACKS_JSON, STACKS_JSON_LIMIT)
    processes = []
    for item in data.get("processes") or []:
        try:
            processes.append(ProcessStacks.from_dict(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # not what distrun wrote
    view = groups_view(processes)
    view["problem"] = problem or ("" if processes else "hang/stacks.json holds no process")
    return view
