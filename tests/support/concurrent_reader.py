"""One of the readers in test_concurrency: `job list`, `job show` and `logs` in a loop.

Runs the CLI's commands in this process (as `distrun` would, without paying an interpreter
start per call) until the stop file appears, checks every answer, and writes a JSON summary:
how many calls, and every error or inconsistency seen.

Usage: python concurrent_reader.py STOP_FILE SUMMARY_FILE
"""

from __future__ import annotations

import io
import json
import re
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from distrun.cli.main import cli

STATUSES = {"Queued", "Starting", "Running", "Finalizing", "Completed", "Failed", "Canceled"}
TERMINAL = {"Completed", "Failed", "Canceled"}
LOG_LINE = re.compile(rb"^\[0/[01]\] (bound \d+|line \d+)$")


class Capture(io.TextIOWrapper):
    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8")

    def value(self) -> bytes:
        self.flush()
        return self.buffer.getvalue()  # type: ignore[attr-defined]


def call(*args: str) -> bytes:
    out, err = Capture(), Capture()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            cli.main(list(args), standalone_mode=False)
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"exit {exc.code}: {err.value()!r}") from None
    return out.value()


def check_record(rec: dict) -> list[str]:
    problems = []
    status = rec["status"]
    if status not in STATUSES:
        problems.append(f"unknown status {status!r}")
    if status in TERMINAL:
        if rec["ended_at"] is None:
            problems.append(f"{rec['name']}: {status} without ended_at")
        if status == "Completed":
            procs = rec["processes"] or []
            if len(procs) != 2 or any(p["exit_code"] != 0 for p in procs):
                problems.append(f"{rec['name']}: Completed with processes {procs}")
    if status == "Running" and rec["started_at"] is None:
        problems.append(f"{rec['name']}: Running without started_at")
    return problems


def main(stop: Path, summary: Path) -> None:
    calls = 0
    errors: list[str] = []
    while not stop.exists():
        try:
            listed = json.loads(call("job", "list", "--output", "json"))
            calls += 1
            for rec in listed:
                errors.extend(check_record(rec))
            for rec in listed[:3]:
                shown = json.loads(call("job", "show", rec["name"], "-o", "json"))
                calls += 1
                errors.extend(check_record(shown))
                if shown["status"] in ("Queued", "Starting"):
                    continue
                text = call("logs", rec["name"])
                calls += 1
                for line in text.splitlines():
                    if not LOG_LINE.match(line):
                        errors.append(f"{rec['name']}: torn or foreign log line {line[:80]!r}")
        except Exception:
            errors.append(traceback.format_exc(limit=3))
        if len(errors) > 20:
            break
    summary.write_text(json.dumps({"calls": calls, "errors": errors}))


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
