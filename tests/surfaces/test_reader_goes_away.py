"""`distrun job stream NAME | head`: when the reader of the output goes away, a command that
follows a running job ends at once, with status 0, and the job goes on.

Before, click turned the EPIPE into status 1, and `job stream` / `logs -f` followed the job,
unread, until it ended (seconds here, hours for a training job).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess, Popen

import pytest

# One line every 0.2 s for up to a minute: still running when its follower is let go.
CHATTY = "command: for i in $(seq 1 300); do echo line $i; sleep 0.2; done\n"
SWEEP = textwrap.dedent(
    """\
    type: sweep
    trial:
      command: for i in $(seq 1 300); do echo x=${{search_space.x}} line $i; sleep 0.2; done
    search_space:
      x: {type: choice, values: [1, 2]}
    sampling_algorithm: grid
    objective: {goal: minimize, primary_metric: loss}
    """
)


def _status(run_cli: Callable[..., CompletedProcess[str]], name: str) -> str:
    shown = run_cli("job", "show", name, "-o", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return str(json.loads(shown.stdout)["status"])


def _read_until(proc: Popen[str], marker: str) -> list[str]:
    assert proc.stdout is not None
    seen: list[str] = []
    while not any(marker in line for line in seen):
        line = proc.stdout.readline()
        assert line, f"the output ended before {marker!r}: {seen}"
        seen.append(line)
    return seen


@pytest.mark.parametrize("follow", [("job", "stream"), ("logs", "-f")], ids=["job stream", "logs -f"])
def test_following_a_running_job_ends_when_its_reader_goes_away(
    follow: tuple[str, str], run_cli, start_cli, tmp_path: Path
) -> None:
    job = tmp_path / "chatty.yml"
    job.write_text(CHATTY)
    created = run_cli("run", "-d", str(job), "--name", "chatty")
    assert created.returncode == 0, created.stdout + created.stderr
    proc = start_cli(*follow, "chatty")
    _read_until(proc, "[0/0] line 2")
    assert proc.stdout is not None
    proc.stdout.close()  # `| head -N` has what it wanted
    assert proc.wait(timeout=15) == 0  # at the follower's next line: 0.2 s later, not when the job ends
    assert _status(run_cli, "chatty") == "Running"  # the job goes on
    assert run_cli("job", "cancel", "chatty").returncode == 0


def test_streaming_a_running_sweep_ends_when_its_reader_goes_away(run_cli, start_cli, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(SWEEP)
    created = run_cli("run", "-d", str(sweep), "--name", "tune")
    assert created.returncode == 0, created.stdout + created.stderr
    proc = start_cli("stream", "tune")
    _read_until(proc, "line 2")
    assert proc.stdout is not None
    proc.stdout.close()
    assert proc.wait(timeout=15) == 0
    assert _status(run_cli, "tune") == "Running"
    assert run_cli("job", "cancel", "tune").returncode == 0


def test_streaming_a_sweeps_events_only_ends_when_its_reader_goes_away(run_cli, start_cli, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(SWEEP)
    created = run_cli("run", "-d", str(sweep), "--name", "told")
    assert created.returncode == 0, created.stdout + created.stderr
    proc = start_cli("job", "stream", "--events-only", "told")
    _read_until(proc, "[trial_1] started as job told.trial_1")  # no line after it for a minute
    assert proc.stdout is not None
    proc.stdout.close()
    assert proc.wait(timeout=15) == 0
    assert _status(run_cli, "told") == "Running"
    assert run_cli("job", "cancel", "told").returncode == 0
