"""Small tables for AutoML jobs, written as MLTable folders (a CSV and its `MLTable` file)."""

from __future__ import annotations

import random
from pathlib import Path

MLTABLE = "paths:\n  - file: ./data.csv\ntransformations:\n  - read_delimited:\n      delimiter: ','\n"


def write_mltable(folder: Path, header: list[str], rows: list[list[object]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MLTable").write_text(MLTABLE, encoding="utf-8")
    lines = [",".join(header)] + [",".join(str(value) for value in row) for row in rows]
    (folder / "data.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def customers(count: int, seed: int) -> list[list[object]]:
    """Rows of (age, job, balance, y): `y` is "yes" mostly for the old and rich, with noise."""
    pick = random.Random(seed)
    rows = []
    for _ in range(count):
        age, balance = pick.randint(18, 80), round(pick.uniform(-500, 5000), 1)
        job = pick.choice(["admin", "technician", "retired", "student"])
        likely = (age > 55) + (balance > 2500) + (job == "retired")
        y = "yes" if likely + pick.random() * 1.2 > 1.8 else "no"
        rows.append([age, job, balance, y])
    return rows


CUSTOMER_COLUMNS = ["age", "job", "balance", "y"]
