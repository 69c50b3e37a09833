"""`distrun logs NAME [--rank N] [--follow] [--tail N]`."""

from __future__ import annotations

import sys
from typing import BinaryIO

from distrun.core.errors import DistrunError
from distrun.core.safe_files import read_text
from distrun.core.terminal_text import neutral
from distrun.plan.common import process_log_name
from distrun.runner.follow import follow_logs, lines_of, log_files, log_labels, tail_bytes
from distrun.runner.jobs import fetch_logs, get_job, is_finished, refuse_pipeline_logs
from distrun.store.layout import Layout


def show_logs(
    layout: Layout,
    name: str,
    *,
    rank: int | None,
    follow: bool,
    tail: int | None,
    color: bool,
    out: BinaryIO | None = None,
) -> None:
    record = get_job(layout, name)
    refuse_pipeline_logs(record)
    fetch_logs(layout, record)
    folder = layout.job(record.name)
    only = None
    if rank is not None:
        only = _log_of_rank(layout, record.name, rank)
    if out is None:
        out = sys.stdout.buffer
    # One rank's log into a file or a pipe is the log, byte for byte; anything shown on a
    # terminal, or mixed with other ranks' lines, has its escape sequences neutralized.
    raw = only is not None and not out.isatty()
    if tail is not None:
        labels = log_labels(folder)
        files = log_files(folder)
        for path in files:
            if only is not None and path.name != only:
                continue
            try:
                data = tail_bytes(path, tail)
            except OSError:  # gone, or replaced by a link, since it was listed
                continue
            if only is None:
                prefix = f"[{labels.get(path.name, (path.stem, 0))[0]}] ".encode()
                data = b"".join(prefix + line for line in lines_of(data))
            out.write(data if raw else neutral(data))
        out.flush()
        if not follow:
            return
    follow_logs(
        folder,
        out,
        is_finished(layout, record.name),
        only=only,
        color=color,
        follow=follow,
        prefix=only is None,
        raw=raw,
        stop_when_unread=True,
    )


def _log_of_rank(layout: Layout, name: str, rank: int) -> str:
    import json

    ranks = {}
    try:
        plan = json.loads(read_text(layout.job(name).plan_json))
        for node in plan["nodes"]:
            for proc in node["processes"]:
                if proc.get("rank") is not None:
                    ranks[proc["rank"]] = proc["log_name"]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        # No plan, or one the job's processes overwrote (they can write its folder): rank N's
        # log by the name distrun gives it, if there is one.
        fallback = process_log_name(rank)
        if rank >= 0 and fallback in {path.name for path in log_files(layout.job(name))}:
            return fallback
    if rank not in ranks:
        known = ", ".join(str(r) for r in sorted(ranks)) or "none"
        raise DistrunError(f"job {name} has no rank {rank}", f"its ranks: {known}")
    return ranks[rank]
