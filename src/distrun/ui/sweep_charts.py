"""A sweep's charts, drawn on the server as SVG: its primary metric by trial, and by each parameter.

Pure functions from a sweep's trial views to markup, no JavaScript. Each trial with a metric is
one <circle> carrying its trial, its x value and its metric (data-trial, data-x, data-value) with
a tooltip, so what a chart shows can be read back; the best trial's is marked `best`. A choice
parameter is drawn on a categorical axis, one column per value in the search space's order; the
log forms (loguniform, lognormal and their q forms) on a log axis. Every text that came from the
sweep file or the trials (names, choice values) is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from distrun.ui.charts import LEFT, TOP, frame, number
from distrun.ui.sweep_view import LOG_FORMS, SweepView, TrialView, shown_value

WIDTH, HEIGHT = 420, 220
RIGHT, BOTTOM = 14, 40  # LEFT and TOP as the metric charts'; below, the values and the axis's title
MAX_LABEL = 14  # characters of a category's label under its column; the whole value is in the tooltips
MAX_CATEGORY_LABELS = 12  # a choice of more values labels only some columns
MAX_PARAMETER_CHARTS = 12
MAX_POINTS = 1000  # trials drawn per chart, the best first (each point about 250 bytes, every 2 s)


@dataclass(frozen=True)
class Dot:
    trial: TrialView
    x: float  # on the axis's scale: the value (its log10 on a log axis), or a category's index
    x_text: str  # the x value as shown


@dataclass(frozen=True)
class Axis:
    title: str
    low: float
    high: float
    ticks: list[tuple[float, str]]  # (position on the axis's scale, label)


def charts(view: SweepView) -> list[tuple[str, str]]:
    """(what it shows, SVG markup): the metric by trial, then by each parameter; none before a trial has a metric."""
    scored = [t for t in view.trials if t.metric is not None][:MAX_POINTS]  # best first
    if not scored:
        return []
    drawn = [("trial", by_trial(view.metric, scored))]
    for name in view.parameter_names[:MAX_PARAMETER_CHARTS]:
        drawn.append((name, by_parameter(view.metric, name, view.expressions.get(name, {}), scored)))
    return drawn


def by_trial(metric: str, trials: list[TrialView]) -> str:
    dots = [Dot(t, float(t.number), str(t.number)) for t in trials if t.number is not None]
    return scatter(f"{metric} by trial", _numeric_axis("trial", dots, lambda x: f"{x:g}"), dots)


def by_parameter(metric: str, name: str, expression: dict[str, object], trials: list[TrialView]) -> str:
    given = [t for t in trials if name in t.parameters]
    if expression.get("type") == "choice" or any(not _numeric(t.parameters[name]) for t in given):
        return _categorical(metric, name, expression, given)
    values = [float(t.parameters[name]) for t in given]  # type: ignore[arg-type]  # _numeric checked each
    log = expression.get("type") in LOG_FORMS and all(v > 0 for v in values)
    dots = [
        Dot(t, math.log10(v) if log else v, shown_value(t.parameters[name])) for t, v in zip(given, values, strict=True)
    ]
    label: Callable[[float], str] = (lambda x: number(10**x)) if log else number
    axis = _numeric_axis(f"{name} (log scale)" if log else name, dots, label)
    return scatter(f"{metric} by {name}", axis, dots)


def _categorical(metric: str, name: str, expression: dict[str, object], trials: list[TrialView]) -> str:
    values = expression.get("values")
    categories = [shown_value(v) for v in values] if isinstance(values, list) else []
    for trial in trials:  # a value the search space does not list (an older record): its own column
        if trial.shown(name) not in categories:
            categories.append(trial.shown(name))
    place = {text: i for i, text in enumerate(categories)}
    dots = [Dot(t, float(place[t.shown(name)]), t.shown(name)) for t in trials]
    every = max(1, math.ceil(len(categories) / MAX_CATEGORY_LABELS))
    ticks = [(float(i), _cut(text)) for i, text in enumerate(categories) if i % every == 0]
    axis = Axis(name, -0.5, max(len(categories), 1) - 0.5, ticks)
    return scatter(f"{metric} by {name}", axis, dots)


def _numeric_axis(title: str, dots: list[Dot], label: Callable[[float], str]) -> Axis:
    """Padded around the values, labelled at the lowest and the highest."""
    xs = [d.x for d in dots]
    low, high = _span(xs)
    ticks = sorted({(x, label(x)) for x in (min(xs), max(xs))}) if xs else []
    return Axis(title, low, high, ticks)


def scatter(title: str, axis: Axis, dots: list[Dot]) -> str:
    ys = [d.trial.metric for d in dots if d.trial.metric is not None]
    y0, y1 = _span(ys, pad=0)  # labelled with the lowest and highest metric
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + (value - axis.low) / (axis.high - axis.low) * inner_w

    def y(value: float) -> float:
        return TOP + (y1 - value) / (y1 - y0) * inner_h

    ticks = "".join(
        f'<text x="{x(at):.1f}" y="{TOP + inner_h + 14}" text-anchor="middle" class="tick">{escape(label)}</text>'
        for at, label in axis.ticks
    )
    circles = "".join(_circle(d, x(d.x), y(d.trial.metric or 0.0)) for d in dots)
    return (
        f'<svg class="chart sweep-chart" data-chart="{escape(axis.title)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        f"{frame(escape(title), inner_w, inner_h, y0, y1)}"
        f'<text x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle" class="axis-title">'
        f"{escape(axis.title)}</text>{ticks}{circles}</svg>"
    )


def _circle(dot: Dot, cx: float, cy: float) -> str:
    trial = dot.trial
    best = " best" if trial.best else ""
    tip = f"{trial.key}: {shown_value(trial.metric)} ({trial.state}) at {dot.x_text}"
    return (
        f'<circle class="point {trial.css}{best}" cx="{cx:.1f}" cy="{cy:.1f}" r="{5 if best else 3.5}" '
        f'data-trial="{escape(trial.key)}" data-x="{escape(dot.x_text)}" data-value="{trial.metric!r}">'
        f"<title>{escape(tip)}</title></circle>"
    )


def _span(values: list[float], pad: float = 0.05) -> tuple[float, float]:
    """From the lowest to the highest value, widened by `pad` of the range each side (so no dot
    sits on the axis), or by 1 each side when they are one value."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low == high:
        return low - 1, high + 1
    return low - (high - low) * pad, high + (high - low) * pad


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"
