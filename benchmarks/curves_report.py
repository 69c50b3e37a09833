"""B8's growth curves, from the raw figures to RESULTS.md and PNG plots.

    python -m benchmarks.curves_report RAW_DIR [--results benchmarks/RESULTS.md] [--plots DIR]

The benchmark (`python -m benchmarks --cases B8`) writes RAW_DIR/b8.json with the standard
library only, so it runs where only distrun's core is installed; this step reads it and writes
the "Growth curves" section of RESULTS.md (replacing the one there) with a PNG per curve
in `curves/` beside it. The plots need matplotlib (`pip install 'distrun[bench]'`); without it the section
is written with its tables and says how to get the plots.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results import ANALYSIS_MARKER, fmt

HERE = Path(__file__).resolve().parent
RAW_NAME = "b8.json"
BEGIN = "<!-- B8 growth curves: written by python -m benchmarks.curves_report; rewritten with it. -->"
END = "<!-- End of the B8 growth curves. -->"
INSTALL = "pip install 'distrun[bench]'  (or: pip install matplotlib)"


@dataclass
class Curve:
    """One measured quantity against a size: points[method][x] = the samples there."""

    name: str
    x_label: str  # "ranks", "writers" or "backend"
    points: dict[str, dict[str, list[float]]]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "x": self.x_label, "points": self.points}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Curve:
        return cls(data["name"], data["x"], data["points"])

    def xs(self) -> list[str]:
        seen: dict[str, None] = {}
        for by_x in self.points.values():
            seen.update(dict.fromkeys(by_x))
        return sorted(seen, key=lambda x: (0, int(x), "") if x.isdigit() else (1, 0, x))

    @property
    def numeric(self) -> bool:
        return all(x.isdigit() for x in self.xs())

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower().split("(")[0]).strip("-")


def plots_for(results: Path) -> Path:
    """Where the plots of a report go: `curves/` beside it (RESULTS.md links them relatively)."""
    return results.parent / "curves"


def load(raw_dir: Path) -> dict[str, Any]:
    path = raw_dir / RAW_NAME
    if not path.exists():
        raise SystemExit(f"no {RAW_NAME} in {raw_dir}: run `python -m benchmarks --cases B8 --raw {raw_dir}` first")
    return json.loads(path.read_text())


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def plot(raw: dict[str, Any], plots: Path) -> dict[str, Path]:
    """One PNG per curve: medians with min-max bars, ranks on a log scale. Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots.mkdir(parents=True, exist_ok=True)
    made = {}
    for curve in map(Curve.from_dict, raw["curves"]):
        xs = curve.xs()
        if not xs:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        for index, (method, by_x) in enumerate(curve.points.items()):
            here = [x for x in xs if by_x.get(x)]
            medians = [_median(by_x[x]) for x in here]
            low = [m - min(by_x[x]) for m, x in zip(medians, here, strict=True)]
            high = [max(by_x[x]) - m for m, x in zip(medians, here, strict=True)]
            if curve.numeric:
                ax.errorbar([int(x) for x in here], medians, yerr=[low, high], marker="o", capsize=3, label=method)
            else:
                width = 0.8 / max(1, len(curve.points))
                spots = [xs.index(x) + index * width for x in here]
                ax.bar(spots, medians, width=width, yerr=[low, high], capsize=3, label=method)
        if curve.numeric:
            ax.set_xscale("log", base=2)
            ax.set_xticks([int(x) for x in xs], labels=xs)
        else:
            ax.set_xticks(range(len(xs)), labels=xs)
        ax.set_xlabel(curve.x_label)
        ax.set_title(curve.name, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = plots / f"b8-{curve.slug}.png"
        fig.savefig(path)
        plt.close(fig)
        made[curve.name] = path
    return made


def section(raw: dict[str, Any], images: dict[str, str], plot_note: str = "") -> str:
    """The RESULTS.md section: when, where, the targets, then every curve's plot and table."""
    lines = [BEGIN, "", "## Growth curves (B8)", ""]
    machine = "; ".join(f"{k} {v}" for k, v in raw["machine"].items())
    lines += [f"Measured {raw['date']} on: {machine}; load average at end: {raw['load average at end']}.", ""]
    if plot_note:
        lines += [plot_note, ""]
    for target in raw["targets"]:
        mark = {True: "met", False: "MISSED", None: "not judged"}[target["met"]]
        lines.append(f"- Target ({mark}): {target['goal']}. Measured: {target['measured']}.")
    lines.append("")
    for curve in map(Curve.from_dict, raw["curves"]):
        xs = curve.xs()
        if not xs:
            continue
        lines += [f"### {curve.name}", ""]
        if curve.name in images:
            lines += [f"![{curve.name}]({images[curve.name]})", ""]
        lines.append(f"| {curve.x_label} | " + " | ".join(xs) + " |")
        lines.append("|---|" + "---:|" * len(xs))
        for method, by_x in curve.points.items():
            cells = []
            for x in xs:
                values = by_x.get(x, [])
                cells.append(f"{fmt(_median(values))} ({fmt(min(values))}-{fmt(max(values))})" if values else "-")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines += ["", "Median (min-max) of the samples.", ""]
    lines += [f"- {note}" for note in raw.get("notes", []) if "Growth curves" not in note]
    lines += ["", END, ""]
    return "\n".join(lines)


def kept_block(text: str) -> str:
    """The curves section of an existing RESULTS.md ('' if none), kept when other cases rewrite it."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return ""
    return "\n" + text[start : end + len(END)] + "\n"


def replace_block(text: str, block: str) -> str:
    """RESULTS.md with its curves section replaced by `block` (inserted before the hand-written part if new)."""
    start, end = text.find(BEGIN), text.find(END)
    if start >= 0 and end > start:
        return text[:start] + block.rstrip("\n") + text[end + len(END) :]
    at = text.find(ANALYSIS_MARKER)
    if at >= 0:
        return text[:at] + block + "\n" + text[at:]
    return text.rstrip("\n") + ("\n\n" if text else "") + block


def publish(raw_dir: Path, results: Path, plots: Path) -> str:
    """Write the plots (when matplotlib is there) and the section; returns what was done, in words."""
    raw = load(raw_dir)
    try:
        made = plot(raw, plots)
    except ImportError:
        made = {}
        again = f"python -m benchmarks.curves_report {raw_dir}"
        note = f"Plots not drawn: matplotlib is not installed here. `{INSTALL}`, then `{again}`."
    else:
        note = ""
    images = {name: os.path.relpath(path, results.parent) for name, path in made.items()}
    text = results.read_text() if results.exists() else ""
    results.write_text(replace_block(text, section(raw, images, note)))
    done = f"B8 curves written to {results}" + (f", {len(made)} plots in {plots}" if made else "")
    return done + (f"; {note}" if note else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.curves_report", description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help=f"folder holding {RAW_NAME} (python -m benchmarks --raw)")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md", help="the report to update")
    parser.add_argument("--plots", type=Path, default=None, help="where the PNGs go (default: curves/ beside it)")
    args = parser.parse_args(argv)
    print(publish(args.raw, args.results, args.plots or plots_for(args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
