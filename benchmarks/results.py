"""What a benchmark run found: rows of samples, targets met or missed, notes; as a markdown report."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

DISTRUN = "distrun"
# Everything after this line in RESULTS.md is written by hand (analysis of missed targets)
# and kept when the benchmark rewrites the file.
ANALYSIS_MARKER = "<!-- Written by hand below this line; python -m benchmarks keeps it when it rewrites the file. -->"


@dataclass
class Row:
    case: str  # e.g. "B1 launch, 8 ranks"
    method: str  # distrun, bare loop, torchrun, torchx, ...
    metric: str  # e.g. "wall s"
    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else math.nan

    @property
    def low(self) -> float:
        return min(self.values) if self.values else math.nan

    @property
    def high(self) -> float:
        return max(self.values) if self.values else math.nan


@dataclass
class Target:
    case: str
    goal: str  # the target as the issue states it
    measured: str  # what this run measured, in words
    met: bool | None  # None: could not be judged (case skipped, peer missing)


@dataclass
class CaseResult:
    key: str  # B1 ... B7
    title: str
    rows: list[Row] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reps: dict[str, int] = field(default_factory=dict)  # method -> samples taken
    profiles: list[tuple[str, str]] = field(default_factory=list)  # (what, profile text)
    skipped: str | None = None

    def row(self, case: str, method: str, metric: str) -> Row | None:
        for row in self.rows:
            if (row.case, row.method, row.metric) == (case, method, metric):
                return row
        return None

    def median(self, case: str, method: str, metric: str) -> float:
        row = self.row(case, method, metric)
        return row.median if row else math.nan


def fmt(value: float) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "never"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    if abs(value) >= 0.01:
        return f"{value:.3f}"
    return f"{value:.2e}"


def ratio(distrun: float, peer: float) -> str:
    if any(math.isnan(v) for v in (distrun, peer)) or peer == 0:
        return "-"
    if math.isinf(peer):
        return "0 (peer never)" if not math.isinf(distrun) else "-"
    if math.isinf(distrun):
        return "never"
    value = distrun / peer
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def table(result: CaseResult) -> list[str]:
    """Markdown table: one line per (case, method, metric), ratio distrun/peer on peer lines."""
    lines = [
        "| case | method | metric | n | median | min | max | distrun/peer |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result.rows:
        mine = result.median(row.case, DISTRUN, row.metric)
        shown_ratio = "" if row.method == DISTRUN else ratio(mine, row.median)
        lines.append(
            f"| {row.case} | {row.method} | {row.metric} | {len(row.values)} | {fmt(row.median)} | "
            f"{fmt(row.low)} | {fmt(row.high)} | {shown_ratio} |"
        )
    return lines


def case_section(result: CaseResult) -> list[str]:
    lines = [f"## {result.key}: {result.title}", ""]
    if result.skipped:
        return [*lines, f"Skipped: {result.skipped}", ""]
    if result.reps:
        lines.append("Samples: " + ", ".join(f"{m} {n}" for m, n in result.reps.items()) + " (alternating)")
        lines.append("")
    if result.rows:
        lines += [*table(result), ""]
    for target in result.targets:
        mark = {True: "met", False: "MISSED", None: "not judged"}[target.met]
        lines.append(f"- Target ({mark}): {target.goal}. Measured: {target.measured}.")
    if result.targets:
        lines.append("")
    for note in result.notes:
        lines.append(f"- {note}")
    if result.notes:
        lines.append("")
    for what, text in result.profiles:
        lines += [f"Profile of {what}:", "", "```text", text.rstrip(), "```", ""]
    return lines


def targets_summary(results: list[CaseResult]) -> list[str]:
    lines = ["| case | target | measured | verdict |", "|---|---|---|---|"]
    for result in results:
        for target in result.targets:
            verdict = {True: "met", False: "**missed**", None: "not judged"}[target.met]
            lines.append(f"| {target.case} | {target.goal} | {target.measured} | {verdict} |")
    return lines
