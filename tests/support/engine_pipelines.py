"""The pipeline the engines' pipeline tests run, and what every engine must show after it.

`tests/data/pipelines/ddp_after_prepare`: `prepare` (1 process) writes `rows.txt` to its output,
naming where it wrote it; `train` (2 nodes x 2 processes, DDP over gloo) reads it on every rank,
prints where it read it, all-reduces the ranks (sum 6) and writes `result.txt` from rank 0.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.cli import REPO
from support.jobs import record

DDP_AFTER_PREPARE = REPO / "tests" / "data" / "pipelines" / "ddp_after_prepare" / "pipeline.yml"
STEPS = ("prepare", "train")


def completed_steps(home: Path, name: str, compute: str, out: str) -> dict[str, dict[str, Any]]:
    """The steps' job records, checked: the pipeline and both steps Completed on `compute`, each
    step a job of its own naming the pipeline, train started only once prepare had completed."""
    parent = record(home, name)
    assert parent["status"] == "Completed", parent
    assert {step: (s["status"], s["job"], s["compute"]) for step, s in parent["steps"].items()} == {
        step: ("Completed", f"{name}.{step}", compute) for step in STEPS
    }
    children = {step: record(home, f"{name}.{step}") for step in STEPS}
    for child in children.values():
        assert (child["status"], child["parent"], child["compute"]) == ("Completed", name, compute)
    started = f"[train] started as job {name}.train on {compute}, 4 processes"
    assert out.index("[prepare] Completed") < out.index(started)
    return children


def upstream_rows(home: Path, name: str) -> tuple[str, str]:
    """What prepare wrote, as it came back into its job folder here, and the folder it wrote it in."""
    rows = (home / "jobs" / f"{name}.prepare" / "named-outputs" / "data" / "rows.txt").read_text().strip()
    assert rows.startswith("rows written to "), rows
    return rows, rows.removeprefix("rows written to ").split(" on ")[0]


def every_rank_read(home: Path, name: str, rows: str, read_in: Callable[[int], str]) -> None:
    """Each of train's 4 ranks read `rows` in `read_in(rank)` (its node's own copy of the input),
    took part in the all-reduce, and rank 0's result came back into the job folder here."""
    train = home / "jobs" / f"{name}.train"
    # The input travelled in train's own job folder (copied there when the step was submitted).
    assert (train / "inputs" / "data" / "rows.txt").read_text().strip() == rows
    for rank in range(4):
        text = (train / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} read {rows!r} in {read_in(rank)}\n" in text, text
        assert f"rank {rank} of 4 sum 6\n" in text, text
    assert (train / "named-outputs" / "result" / "result.txt").read_text() == f"sum 6 of {rows}\n"
