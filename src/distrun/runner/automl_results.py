"""An AutoML job's results as its search left them: the leaderboard (every trial, best first),
the best trial and the test data's metrics, read from its `leaderboard` output with the safe
reader (the file is the job's: it may be anything), and said in lines for `job show`."""

from __future__ import annotations

import json
from typing import Any

from distrun.core.safe_files import read_text
from distrun.spec.automl_models import TASK_TAG  # an AutoML job's record says its task
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

LEADERBOARD = ("leaderboard", "leaderboard.json")  # the output, and the search's file in it

LIMIT = 4 << 20
SHOWN = 10  # trials `job show` lists


def automl_results(layout: Layout, record: JobRecord) -> dict[str, Any] | None:
    """The search's results, or None: not an AutoML job, not ended, or nothing readable."""
    if TASK_TAG not in (record.tags or {}):
        return None
    folder = layout.job(record.name)
    try:
        found = json.loads(read_text(folder.named_outputs / LEADERBOARD[0] / LEADERBOARD[1], LIMIT, root=folder.root))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("leaderboard"), list) else None


def results_lines(results: dict[str, Any]) -> list[str]:
    metric = str(results.get("primary_metric", "score"))
    best = results.get("best") or {}
    lines = [f"AutoML:   {results.get('task')}, {len(results['leaderboard'])} trials, primary metric {metric}"]
    if best:
        lines.append(
            f"Best:     trial {best.get('trial')} {best.get('algorithm')} {metric}={_number(best.get('score'))}"
        )
    lines.append("Leaderboard:")
    for row in results["leaderboard"][:SHOWN]:
        if isinstance(row, dict):
            lines.append(f"  trial {row.get('trial')}: {row.get('algorithm')} {_number(row.get('score'))}")
    test = results.get("test_metrics")
    if isinstance(test, dict) and test:
        lines.append("Test data: " + ", ".join(f"{k}={_number(v)}" for k, v in sorted(test.items())))
    return lines


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
