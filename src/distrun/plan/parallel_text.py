"""A parallel step's mini-batch split as `distrun plan` says it (`distrun.runner.parallel_view`
finds it)."""

from __future__ import annotations

from typing import Any


def parallel_lines(info: dict[str, Any]) -> list[str]:
    processes = info["processes"]
    pulled = f"pulled from one queue by {len(processes)} processes: {', '.join(processes)}"
    if info.get("later"):
        return [f"  mini-batches: split when the step starts (its input {info['input']} is not there yet); {pulled}"]
    if info.get("problem"):
        return [f"  mini-batches: {info['input']} cannot be split: {info['problem']}"]
    unit = info["unit"]
    sizes = str(info["largest"]) if info["smallest"] == info["largest"] else f"{info['smallest']} to {info['largest']}"
    how = f"one per value of {', '.join(info['partition_keys'])}, " if info.get("partition_keys") else ""
    return [
        f"  mini-batches: {info['mini_batches']} ({how}{sizes} {unit} each; {info['items']} {unit} in {info['input']})",
        f"  {pulled}",
    ]
