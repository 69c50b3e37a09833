"""The CLI's tables and its readable times and durations: what every listing prints for people."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from distrun.core.terminal_text import neutral_text

WIDTH = 80  # what the tables fit in when the terminal's width is not known


def _console(out: io.StringIO, fit: bool) -> Any:
    from rich.console import Console

    width = os.environ.get("COLUMNS")
    fit_width = int(width) if width and width.isdigit() else WIDTH
    return Console(file=out, width=fit_width if fit else 1 << 12, no_color=True, highlight=False, emoji=False)


def table(columns: Iterable[str], rows: Iterable[Iterable[str]], *, keep: Iterable[str] = (), fit: bool = True) -> str:
    """A borderless table. With `fit`, it fits the terminal (80 columns when unknown): the `keep`
    columns are never wrapped or cut, the others are cut with … when there is no room."""
    from rich import box
    from rich.table import Table

    shown = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    kept = set(keep)
    columns, rows = list(columns), [list(row) for row in rows]
    for number, column in enumerate(columns):
        if column in kept:
            widest = max([len(column), *(len(row[number]) for row in rows)])
            shown.add_column(column, no_wrap=True, overflow="ignore", min_width=widest)
        else:
            shown.add_column(column, no_wrap=True, overflow="ellipsis")
    for row in rows:
        shown.add_row(*row)
    out = io.StringIO()
    _console(out, fit).print(shown)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def format_seconds(seconds: float | None) -> str:
    """A duration as every view shows it: `4.2s`, `3m05s`, `2h10m`."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def when(stamp: float | None, now: float) -> str:
    """`14:05` today, `Nov 21` before: short enough for the list to fit 80 columns."""
    if not stamp:
        return ""
    today = time.localtime(now)[:3] == time.localtime(stamp)[:3]
    return time.strftime("%H:%M" if today else "%b %d", time.localtime(stamp))


def cell(value: Any) -> str:
    """A value in a table's cell: text as the terminal shows a job's text (controls as caret
    text, `distrun.core.terminal_text`), never read as the table's markup; a dict or list as
    compact JSON."""
    from rich.markup import escape

    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        import json

        value = json.dumps(value, separators=(",", ":"), default=str)
    return escape(neutral_text(str(value)))


def records_table(
    items: Iterable[Mapping[str, Any]], columns: Iterable[str], *, keep: Iterable[str] = (), empty: str = ""
) -> str:
    """Records (plain dicts) as a table of the given keys, headed by them in capitals; a
    `created_at` epoch time is shown as a time of day or date. Not fitted to the terminal: paths
    and URIs are what users copy, so no cell is cut."""
    items, columns = list(items), list(columns)
    if not items and empty:
        return empty
    now = time.time()
    rows = [
        [when(item.get(key), now) if key == "created_at" else cell(item.get(key)) for key in columns] for item in items
    ]
    heads = ["CREATED" if key == "created_at" else key.upper() for key in columns]
    return table(heads, rows, keep=[k.upper() for k in keep], fit=False)


def flat_fields(item: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as one level, for `fields_table`: a mapping's keys as dotted paths
    (`steps.train.job.command`), a list of plain values as `a, b`; empty values left out."""
    flat: dict[str, Any] = {}
    for key, value in item.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flat_fields(value, f"{path}."))
        elif isinstance(value, (list, tuple)) and all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            if value:
                flat[path] = ", ".join(str(v) for v in value)
        elif value is not None and value != "":
            flat[path] = value
    return flat


def fields_table(item: Mapping[str, Any]) -> str:
    """One record (a plain dict) as `KEY  VALUE` lines; a `created_at` epoch time as a date and time."""
    rows = []
    for key, value in item.items():
        if key == "created_at" and isinstance(value, (int, float)):
            value = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        rows.append((str(key), cell(value)))
    return table(("FIELD", "VALUE"), rows, keep=("FIELD",), fit=False)
