"""The metrics part of a job page, bounded whatever the job logged.

A job can log any number of metric names with names of any length (it can even write its own
store and point its tracking file at it), and a running job's metrics part is fetched again
every 3 s: so at most MAX_CHARTS charts and MAX_NAMES last values are shown, the first by
name, with a "showing N of M" note; `distrun metrics` prints them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distrun.metrics.history import History, last_values
from distrun.ui.charts import line_chart

MAX_CHARTS = 12  # each at most charts.MAX_POINTS points: about 70 KB
MAX_NAMES = 200  # rows of the last-values table
MAX_NAME_CHARS = 200  # a longer name is cut on the page


@dataclass
class MetricsView:
    charts: list[tuple[str, str]] = field(default_factory=list)  # (name, SVG markup)
    last: list[tuple[str, float]] = field(default_factory=list)
    total: int = 0  # metric names the job logged

    @property
    def cut(self) -> bool:
        return self.total > len(self.last)


def shown_name(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


def bounded(history: History) -> MetricsView:
    names = sorted(name for name, points in history.items() if points)
    last = last_values({name: history[name] for name in names[:MAX_NAMES]})
    return MetricsView(
        charts=[(shown_name(name), line_chart(shown_name(name), history[name])) for name in names[:MAX_CHARTS]],
        last=[(shown_name(name), last[name]) for name in names[:MAX_NAMES]],
        total=len(names),
    )
