"""Metric charts drawn on the server as SVG: one line per metric over its steps, no JavaScript.

Pure functions from points to markup. Each point is also a <circle> carrying its step and
value (data-step, data-value) with a tooltip, so what the chart shows can be read back.
"""

from __future__ import annotations

from html import escape

from distrun.metrics.history import MetricPoint

WIDTH, HEIGHT = 420, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 24, 28
MAX_POINTS = 400  # a longer history is thinned evenly (first and last kept): about 70 KB a chart


def number(value: float) -> str:
    return f"{value:.4g}"


def thinned(points: list[MetricPoint]) -> list[MetricPoint]:
    if len(points) <= MAX_POINTS:
        return points
    step = (len(points) - 1) / (MAX_POINTS - 1)
    return [points[round(i * step)] for i in range(MAX_POINTS)]


def frame(title: str, inner_w: float, inner_h: float, y0: float, y1: float) -> str:
    """A chart's title (already escaped), its two axes around the inner_w x inner_h plot area
    (at LEFT, TOP), and its lowest and highest value."""
    return (
        f'<text x="{LEFT}" y="15" class="chart-title">{title}</text>'
        f'<line x1="{LEFT}" y1="{TOP + inner_h}" x2="{LEFT + inner_w}" y2="{TOP + inner_h}" class="axis"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + inner_h}" class="axis"/>'
        f'<text x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end" class="tick">{number(y1)}</text>'
        f'<text x="{LEFT - 4}" y="{TOP + inner_h}" text-anchor="end" class="tick">{number(y0)}</text>'
    )


def line_chart(name: str, points: list[MetricPoint]) -> str:
    shown = thinned(points)
    steps = [p.step for p in shown]
    values = [p.value for p in shown]
    x0, x1 = min(steps), max(steps)
    y0, y1 = min(values), max(values)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if y0 == y1:
        y0, y1 = y0 - 1, y1 + 1
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(step: float) -> float:
        return LEFT + (step - x0) / (x1 - x0) * inner_w

    def y(value: float) -> float:
        return TOP + (y1 - value) / (y1 - y0) * inner_h

    path = " ".join(f"{x(p.step):.1f},{y(p.value):.1f}" for p in shown)
    dots = "".join(
        f'<circle class="point" cx="{x(p.step):.1f}" cy="{y(p.value):.1f}" r="2.5" '
        f'data-step="{p.step}" data-value="{p.value!r}"><title>step {p.step}: {number(p.value)}</title></circle>'
        for p in shown
    )
    label = escape(name)
    return (
        f'<svg class="chart" data-metric="{label}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{label} by step">'
        f"{frame(label, inner_w, inner_h, y0, y1)}"
        f'<text x="{LEFT}" y="{HEIGHT - 8}" class="tick">step {x0 if len(set(steps)) > 1 else steps[0]}</text>'
        f'<text x="{LEFT + inner_w}" y="{HEIGHT - 8}" text-anchor="end" class="tick">'
        f"{x1 if len(set(steps)) > 1 else ''}</text>"
        f'<polyline points="{path}" class="series"/>{dots}</svg>'
    )
