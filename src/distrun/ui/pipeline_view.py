"""What a pipeline's page shows, as plain data and markup: each step's state, and the graph drawn as SVG.

Everything here comes from the pipeline's record in the job index (its `steps`: each step's job,
state, times and the steps it reads from), which only distrun writes; no file of a job folder
is read. Step names and job names are still escaped wherever they land in markup, and every
value is checked for its type: a record an older distrun wrote may lack a key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote

from distrun.spec.pipeline_graph import levels
from distrun.store.index import JobRecord

BOX_W, BOX_H = 190, 50  # one step's box
GAP_X, GAP_Y = 70, 18  # between levels (left to right), between steps of one level
PAD = 10
MAX_LABEL = 24  # characters of a step's name in its box; the whole name is in its tooltip
MAX_DRAWN = 400  # a pipeline with more steps is drawn in part (the table lists them all)
NOT_STARTED = "NotStarted"


@dataclass
class StepView:
    name: str
    job: str
    state: str  # as shown: Completed, Failed, Running, Reused, Canceled, not started, Queued, ...
    duration: str
    reason: str
    depends_on: list[str] = field(default_factory=list)
    linked: bool = False  # whether the step's job exists (a step that never started has none)
    compute: str = ""

    @property
    def css(self) -> str:
        return "state-" + self.state.lower().replace(" ", "-")


def step_views(record: JobRecord, now: float | None = None) -> list[StepView]:
    """One view per step of the pipeline, in the record's (file) order."""
    steps = record.steps if isinstance(record.steps, dict) else {}
    views = []
    for name, state in steps.items():
        state = state if isinstance(state, dict) else {}
        status = str(state.get("status") or NOT_STARTED)
        reason = str(state.get("reason") or "")
        never_ran = status == NOT_STARTED or reason.startswith("not started")
        upstream = state.get("depends_on")
        views.append(
            StepView(
                name=str(name),
                job=str(state.get("job") or ""),
                state=_shown_state(status, bool(state.get("reused"))),
                duration=took(state.get("started_at"), state.get("ended_at"), status, now),
                reason=reason,
                depends_on=[str(u) for u in upstream if str(u) in steps] if isinstance(upstream, list) else [],
                linked=bool(state.get("job")) and not never_ran,
                compute=str(state.get("compute") or ""),
            )
        )
    return views


def counts(record: JobRecord) -> str:
    """'3 steps: 2 Completed, 1 Running', for the jobs list."""
    return tally([view.state for view in step_views(record)], "step")


def tally(states: list[str], noun: str) -> str:
    """'3 NOUNs: 2 Completed, 1 Running': how many of each state, in first-seen order."""
    seen: dict[str, int] = {}
    for state in states:
        seen[state] = seen.get(state, 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in seen.items())
    return f"{len(states)} {noun}{'s' if len(states) != 1 else ''}" + (f": {parts}" if parts else "")


def step_of(record: JobRecord) -> str | None:
    """A step's job: its step's name in its pipeline (`train` of job `nightly.train`)."""
    if not record.parent or not record.name.startswith(record.parent + "."):
        return None
    return record.name[len(record.parent) + 1 :]


def graph_svg(views: list[StepView]) -> str:
    """The steps as boxes in levels, left to right (a level's steps can run at the same time),
    with an arrow from each step to every step that reads its outputs. Each box links to its
    step's job page and says its state and duration."""
    drawn = views[:MAX_DRAWN]
    names = {v.name for v in drawn}
    depends_on = {v.name: [u for u in v.depends_on if u in names] for v in drawn}
    try:
        depth = levels(depends_on)
    except ValueError:  # a record naming a cycle (never written by distrun): one column
        depth = dict.fromkeys(depends_on, 0)
    place: dict[str, tuple[int, int]] = {}
    filled: dict[int, int] = {}
    for view in drawn:
        level = depth[view.name]
        place[view.name] = (PAD + level * (BOX_W + GAP_X), PAD + filled.get(level, 0) * (BOX_H + GAP_Y))
        filled[level] = filled.get(level, 0) + 1
    width = PAD * 2 + (max(depth.values(), default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max(filled.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [
        f'<svg class="pipeline-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="the pipeline\'s steps and their data flow">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" class="arrow-head"/></marker></defs>',
    ]
    for view in drawn:
        x2, y2 = place[view.name]
        for upstream in depends_on[view.name]:
            x1, y1 = place[upstream]
            sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H // 2, x2, y2 + BOX_H // 2
            mid = (sx + ex) // 2
            parts.append(
                f'<path class="edge" data-from="{escape(upstream)}" data-to="{escape(view.name)}" '
                f'd="M {sx} {sy} C {mid} {sy}, {mid} {ey}, {ex - 2} {ey}" marker-end="url(#arrow)"/>'
            )
    for view in drawn:
        parts.append(_box(view, *place[view.name]))
    parts.append("</svg>")
    return "".join(parts)


def _box(view: StepView, x: int, y: int) -> str:
    label = view.name if len(view.name) <= MAX_LABEL else view.name[: MAX_LABEL - 1] + "…"
    detail = f"{view.state} · {view.duration}" if view.duration else view.state
    tip = f"{view.name}: {view.state}" + (f" ({view.reason})" if view.reason else "") + f", job {view.job}"
    box = (
        f'<g class="step {view.css}" data-step="{escape(view.name)}" data-state="{escape(view.state)}">'
        f"<title>{escape(tip)}</title>"
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text x="{x + 10}" y="{y + 20}" class="step-name">{escape(label)}</text>'
        f'<text x="{x + 10}" y="{y + 38}" class="step-state">{escape(detail)}</text></g>'
    )
    if not view.linked:
        return box
    return f'<a href="/jobs/{escape(quote(view.job, safe=""))}">{box}</a>'


def _shown_state(status: str, reused: bool) -> str:
    if reused:
        return "Reused"
    return "not started" if status == NOT_STARTED else status


def took(started: object, ended: object, status: str, now: float | None) -> str:
    if not isinstance(started, (int, float)):
        return ""
    if isinstance(ended, (int, float)):
        seconds = max(0.0, ended - started)
    elif status in ("Queued", "Starting", "Running", "Finalizing", "CancelRequested"):
        seconds = max(0.0, (now or time.time()) - started)
    else:
        return ""
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds) // 60}m {int(seconds) % 60:02d}s"


def failed_step(record: JobRecord) -> dict[str, Any] | None:
    """The first failing step, its job and, inside it, its first failing process, for the banner."""
    cause = record.root_cause
    if record.status != "Failed" or not isinstance(cause, dict) or not cause.get("step"):
        return None
    return {
        "step": str(cause.get("step")),
        "job": str(cause.get("job") or ""),
        "process": cause.get("name"),
        "reason": record.reason or "",
        "traceback": str(cause.get("traceback") or ""),
    }
