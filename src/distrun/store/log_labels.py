"""Which stream label (and node) each of a job's log files has, from the plan in its folder.

A reader of the log files (`distrun.runner.follow`) prefixes each line as the live stream did; an engine
without a shared filesystem (Kubernetes) splits its pods' logs back into those files by label.
"""

from __future__ import annotations

import json
import re
from typing import Any

from distrun.core.safe_files import read_text
from distrun.plan.common import process_log_name
from distrun.store.layout import JobFolder

# A Spark job's executors' logs (`distrun.backends.spark.executor_logs`), one per executor id.
_EXECUTOR_LOG = re.compile(r"std_log_executor_([0-9]{1,9})\.txt")


def executor_log_name(executor_id: str) -> str:
    """The log an executor of a Spark job's standalone cluster has in the job's user_logs."""
    return f"std_log_executor_{executor_id}.txt"


def label_of_unplanned(name: str) -> tuple[str, int]:
    """The label of a log file the plan does not name: an executor's by its role, else its stem."""
    executor = _EXECUTOR_LOG.fullmatch(name)
    return (f"executor {executor.group(1)}", 0) if executor else (name.removesuffix(".txt"), 0)


def log_labels(folder: JobFolder) -> dict[str, tuple[str, int]]:
    """log file name -> (stream label, node rank), from the job's plan."""
    try:
        plan = json.loads(read_text(folder.plan_json))
    except (OSError, ValueError):
        return {}  # no plan, or one the job's processes overwrote (they can write its folder)
    return labels_from_plan(plan)


def labels_from_plan(plan: Any) -> dict[str, tuple[str, int]]:
    """The same from a plan already read (as far as it makes sense: the job can rewrite its plan)."""
    labels = {}
    try:
        nodes = plan.get("nodes", [])
        for node in nodes:
            for proc in node.get("processes", []):
                labels[proc["log_name"]] = (proc["label"], node["node_rank"])
                if proc.get("output_demux"):
                    # An MPI launcher: its ranks' logs are split out of its output, rank r on node
                    # r // (ranks per node), as the agent labels them in the live stream.
                    world = min(int(plan.get("world_size") or 0), 1 << 20)  # a plan the job rewrote stays bounded
                    per_node = max(1, world // max(1, len(nodes)))
                    for rank in range(world):
                        labels[process_log_name(rank)] = (f"{rank // per_node}/{rank}", rank // per_node)
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # a plan the job's processes overwrote: the labels found so far
    return labels
