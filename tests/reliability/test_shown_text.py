"""Text a job chose, in every view of the CLI, cannot drive the user's terminal.

A job file's display name, description, experiment name, tags and inputs, a rank's metric
names, an environment's name in config.yaml and a failure's root cause all end up on the
terminal through `job list`, `job show` (text and YAML), `distrun metrics`, `env list`,
`job cancel` and `distrun plan`. Each is fed escape sequences (the clipboard write and screen
clear that once reached a terminal among them) and must show them as caret text, as the live
stream does (tests/reliability/test_terminal_escapes.py covers the stream itself).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from support.jobs import prepare_local_job
from support.reliability import job_file, run_bytes

# As YAML double-quoted escapes: OSC 52 (clipboard), CSI 2J (clear), OSC 0 (title), C1 CSI.
HOSTILE_YAML = r"x\e]52;c;cHduZWQ=\a\e[2J\e]0;title\e\\\u009b2Jy"
HOSTILE = "x\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b]0;title\x1b\\\x9b2Jy"
_SGR = re.compile(rb"\x1b\[[0-9;:]{0,64}m")
_CONTROL = re.compile(rb"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")
NAME = "shown"


def assert_harmless(shown: bytes) -> None:
    rest = _SGR.sub(b"", shown)
    found = _CONTROL.search(rest)
    assert found is None, rest[max(0, found.start() - 60) : found.end() + 60]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One prepared (never run) job whose every name is hostile, failed with a hostile reason."""
    import os

    from distrun.data.assets import DataAsset, create_asset
    from distrun.store.index import JobIndex

    root = tmp_path_factory.mktemp("shown")
    home = root / "home"
    saved = {key: os.environ.get(key) for key in ("DISTRUN_HOME", "DISTRUN_MLFLOW")}
    os.environ.update(DISTRUN_HOME=str(home), DISTRUN_MLFLOW="0")  # the store is made below, by hand
    try:
        job = job_file(
            root / "spec",
            f"""
            command: echo ${{{{inputs.lr}}}}
            code: src
            display_name: "{HOSTILE_YAML}"
            description: "{HOSTILE_YAML}"
            experiment_name: "exp{HOSTILE_YAML}"
            tags:
              "{HOSTILE_YAML}": "{HOSTILE_YAML}"
            inputs:
              lr: "{HOSTILE_YAML}"
            """,
        )
        prepare_local_job(job, NAME)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    JobIndex(home / "jobs.db").update(NAME, status="Failed", reason=f"rank 0 failed: {HOSTILE}")
    store = home / "mlflow.db"
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, step INTEGER, run_uuid TEXT)")
        conn.execute("INSERT INTO metrics VALUES (?, 0.5, 1000, 1, 'run1')", (f"loss{HOSTILE}",))
    tracking = {"tracking_uri": f"sqlite:///{store}", "experiment_id": "1", "experiment_name": f"exp{HOSTILE}"}
    (home / "jobs" / NAME / "tracking.json").write_text(json.dumps({**tracking, "run_id": "run1"}))
    create_asset(home, DataAsset("ds", "1", "uri_folder", str(root), description=HOSTILE))
    (home / "config.yaml").write_text(f'environments:\n  "env{HOSTILE_YAML}":\n    python: /usr/bin/python3\n')
    (root / "job.yml").write_text((root / "spec" / "job.yml").read_text())
    return home


VIEWS = {
    "job-list": ["job", "list"],
    "job-show": ["job", "show", NAME],
    "job-show-yaml": ["job", "show", NAME, "-o", "yaml"],
    "metrics": ["metrics", NAME],
    "data-list": ["data", "list"],
    "env-list": ["env", "list"],
    "job-cancel": ["job", "cancel", NAME],
    "plan": ["plan", "JOBFILE"],
}


@pytest.mark.parametrize("view", VIEWS)
def test_each_view_shows_the_jobs_escapes_as_text(home: Path, view: str) -> None:
    args = [str(home.parent / "spec" / "job.yml") if a == "JOBFILE" else a for a in VIEWS[view]]
    done = run_bytes(home, *args, timeout=120)
    shown = done.stdout + done.stderr
    assert b"Traceback" not in shown, shown[-2000:]
    assert_harmless(shown)
    if view != "job-list":  # (its columns hold no text a job chose: harmless is all it must be)
        forms = (b"^[]52;c;cHduZWQ=^G^[[2J", b"\\u001b]52;c;cHduZWQ=\\u0007", b"\\e]52;c;cHduZWQ=\\a\\e[2J")
        assert any(form in shown for form in forms), shown[-2000:]  # shown, as caret text or escaped
