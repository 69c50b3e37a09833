"""Sweep jobs on local compute through the CLI: each trial a real distrun job with its parameters,
its primary metric read from its MLflow run as it logs it, a failing trial leaving the sweep
going, early termination stopping a trial with its reason, trial_timeout and cancel."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrun.store.index import JobIndex
from support.cli import distrun_cli, with_src_first
from support.jobs import processes_of_job, wait_for

# Their tests share one module-scoped tracked home: on one worker, so that it is made once per suite.
pytestmark = pytest.mark.xdist_group("sweep_cli")

# Logs `score` = x * step for steps 0..2, or fails (x = -1) before importing mlflow.
SCORE = """
    import sys
    x = float(sys.argv[1])
    if x < 0:
        sys.exit(f"no score for x={x}")
    import mlflow
    for step in range(3):
        mlflow.log_metric("score", x * (step + 1), step=step)
"""


def _sweep(tmp_path: Path, parameter: str, expression: str, rest: str, script: str) -> Path:
    """A sweep whose trial runs `python trial.py ${{search_space.PARAMETER}}` (the script given)
    with its search space, then the `rest` of its keys (one per line)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "trial.py").write_text(textwrap.dedent(script), encoding="utf-8")
    head = (
        "type: sweep\ntrial:\n  command: python trial.py ${{search_space." + parameter + "}}\n  code: src\n"
        f"search_space:\n  {parameter}: {expression}\n"
    )
    path = tmp_path / "sweep.yml"
    path.write_text(head + textwrap.dedent(rest), encoding="utf-8")
    return path


def _records(home: Path) -> dict[str, dict]:
    return {record.name: record.to_dict() for record in JobIndex(home / "jobs.db").list(100)}


@pytest.fixture(scope="module")
def tracked_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One DISTRUN_HOME for the sweeps that read metrics: its MLflow store and server are made
    once (tens of seconds on a busy 2-core machine), not once per test."""
    return tmp_path_factory.mktemp("tracked") / "home"


@pytest.fixture
def run_tracked(tracked_home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    monkeypatch.setenv("DISTRUN_HOME", str(tracked_home))

    def run(*args: str) -> Any:
        return distrun_cli(tracked_home, *args, env={"DISTRUN_MLFLOW": "1"}, timeout=300)

    return run


@pytest.mark.slow
def test_a_grid_sweep_runs_each_trial_as_a_job_ranks_them_and_names_the_best(
    run_tracked: Callable[..., Any], tracked_home: Path, tmp_path: Path
) -> None:
    run_cli, distrun_home = run_tracked, tracked_home
    sweep = _sweep(
        tmp_path,
        "x",
        "{type: choice, values: [0.5, -1, 2]}",
        """
        outputs:
          model: {type: uri_folder}
        sampling_algorithm: grid
        objective: {goal: maximize, primary_metric: score}
        limits: {max_total_trials: 10, max_concurrent_trials: 2}
        """,
        SCORE,
    )
    plan = run_cli("plan", str(sweep))
    assert plan.returncode == 0, plan.stderr
    assert "First 3 trials:\n  trial_0  x=0.5\n  trial_1  x=-1\n  trial_2  x=2\n" in plan.stdout
    assert "python trial.py 0.5" in plan.stdout  # the first trial's job, as `distrun plan` shows a job

    result = run_cli("run", str(sweep), "--name", "grid")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Sweep: grid sampling, up to 10 trials, 2 at once on local; maximize score" in out
    assert "[trial_0] started as job grid.trial_0 on local, 1 process: x=0.5" in out
    assert "[trial_1] Failed in" in out and "rank 0 on node 0 exited with code 1" in out  # the sweep goes on
    assert "[trial_2] score = 2 (interval 1)" in out
    assert "[trial_2] score = 6 (interval 3)" in out
    assert "[trial_2] Completed in" in out and ": score 6" in out
    assert "Best trial: trial_2 (job grid.trial_2), score 6 (maximize)" in out
    table = out[out.index("Trials: 3") :].splitlines()[1:5]
    assert [row.split()[:3] for row in table] == [
        ["TRIAL", "STATUS", "SCORE"],
        ["trial_2", "Completed", "6"],
        ["trial_0", "Completed", "1.5"],
        ["trial_1", "Failed", "0"],  # no metric: its INTERVALS column
    ]
    records = _records(distrun_home)
    assert {"grid", "grid.trial_0", "grid.trial_1", "grid.trial_2"} <= set(records)
    record = records["grid"]
    assert (record["status"], record["compute"]) == ("Completed", "sweep")
    assert [(s["parameters"], s["status"], s["metric"]) for s in record["steps"].values()] == [
        ({"x": 0.5}, "Completed", 1.5),
        ({"x": -1}, "Failed", None),
        ({"x": 2}, "Completed", 6.0),
    ]
    best = record["sweep"]["best"]
    model = distrun_home / "jobs" / "grid.trial_2" / "named-outputs" / "model"
    assert best == {
        "trial": "trial_2",
        "job": "grid.trial_2",
        "parameters": {"x": 2},
        "metric": 6.0,
        "outputs": {"model": str(model)},
    }
    assert all(records[f"grid.trial_{n}"]["parent"] == "grid" for n in range(3))
    # The faces: show's table, list's count, the trials' logs, a trial's own record.
    shown = run_cli("job", "show", "grid").stdout
    assert "Trials: 3, best first" in shown and "Best trial: trial_2" in shown
    assert "sweep (3 trials)" in run_cli("job", "list").stdout
    logs = run_cli("logs", "grid")
    assert logs.returncode == 0, logs.stderr  # every trial's logs, each line prefixed by its trial
    assert "[trial_1]" in logs.stdout and "no score for x=-1" in logs.stdout
    assert "Sweep: grid" in run_cli("job", "show", "grid.trial_1").stdout


@pytest.mark.slow
def test_early_termination_stops_a_trial_with_the_policys_reason(
    run_tracked: Callable[..., Any], tracked_home: Path, tmp_path: Path
) -> None:
    run_cli, distrun_home = run_tracked, tracked_home
    sweep = _sweep(
        tmp_path,
        "loss",
        "{type: choice, values: [0.5, 0.9]}",
        """
        sampling_algorithm: grid
        objective: {goal: minimize, primary_metric: loss}
        early_termination: {type: bandit, slack_factor: 0.1}
        limits: {max_concurrent_trials: 1}
        """,
        """
        import sys, time
        import mlflow
        loss = float(sys.argv[1])
        mlflow.log_metric("loss", loss, step=0)
        if loss > 0.6:
            time.sleep(120)  # only the policy ends this one
        """,
    )
    result = run_cli("run", str(sweep), "--name", "bandit")
    assert result.returncode == 0, result.stdout + result.stderr
    reason = "stopped early by bandit policy at interval 1: 0.9 > best 0.5 x 1.1"
    assert "[trial_1] Canceled in" in result.stdout and reason in result.stdout
    records = _records(distrun_home)
    assert records["bandit"]["steps"]["trial_1"]["reason"] == reason
    assert (records["bandit.trial_1"]["status"], records["bandit.trial_1"]["reason"]) == ("Canceled", reason)
    assert records["bandit"]["sweep"]["best"]["trial"] == "trial_0"
    assert processes_of_job("bandit.trial_1") == []


def test_trial_timeout_ends_a_trial_and_the_sweep_goes_on(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    sweep = _sweep(
        tmp_path,
        "seconds",
        "{type: choice, values: [60, 0]}",
        """
        sampling_algorithm: grid
        objective: {goal: minimize, primary_metric: loss}
        limits: {max_concurrent_trials: 2, trial_timeout: 2}
        """,
        "import sys, time\ntime.sleep(float(sys.argv[1]))\n",
    )
    result = run_cli("run", str(sweep), "--name", "timed")
    # One trial completed, but tracking is off here (DISTRUN_MLFLOW=0): none could be ranked.
    assert result.returncode == 1, result.stdout + result.stderr
    records = _records(distrun_home)
    assert records["timed.trial_0"]["status"] == "Failed"
    assert "timeout" in records["timed.trial_0"]["reason"]
    assert records["timed.trial_1"]["status"] == "Completed"
    assert "[trial_1] logged no loss: it cannot be ranked (its metrics were not tracked)" in result.stdout
    assert "Best trial: none (no completed trial logged loss)" in result.stdout
    why = "no trial could be ranked: tracking is off (DISTRUN_MLFLOW=0), so no trial's loss was read"
    assert (records["timed"]["status"], records["timed"]["reason"]) == ("Failed", why)
    assert f"Reason: {why}" in result.stdout
    assert processes_of_job("timed.trial_0") == []


def test_job_cancel_of_a_sweep_cancels_its_running_trials(
    start_cli, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    sweep = _sweep(
        tmp_path,
        "s",
        "{type: uniform, min_value: 100, max_value: 200}",
        """
        objective: {goal: minimize, primary_metric: loss}
        limits: {max_total_trials: 5, max_concurrent_trials: 1}
        """,
        "import sys, time\ntime.sleep(float(sys.argv[1]))\n",
    )
    proc = start_cli("run", str(sweep), "--name", "long")
    wait_for(lambda: _records(distrun_home).get("long.trial_0", {}).get("status") == "Running", timeout=60)
    result = run_cli("job", "cancel", "long")
    assert result.returncode == 0, result.stdout + result.stderr
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    records = _records(distrun_home)
    assert (records["long"]["status"], records["long"]["reason"]) == ("Canceled", "canceled by the user")
    assert records["long.trial_0"]["status"] == "Canceled"
    assert "long.trial_1" not in records
    assert processes_of_job("long.trial_0") == []


def test_a_detached_sweep_ends_at_its_timeout_canceling_the_running_trial(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    sweep = _sweep(
        tmp_path,
        "s",
        "{type: choice, values: [100]}",
        """
        sampling_algorithm: grid
        objective: {goal: minimize, primary_metric: loss}
        limits: {timeout: 2}
        """,
        "import sys, time\ntime.sleep(float(sys.argv[1]))\n",
    )
    started = run_cli("run", "-d", str(sweep), "--name", "capped")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "Created sweep capped (Queued)" in started.stdout
    log = distrun_home / "jobs" / "capped" / "system_logs" / "launcher.txt"
    # The background supervisor prints the summary once it recorded the end.
    wait_for(lambda: "Status: Failed" in log.read_text(), timeout=60)
    assert "Sweep timeout (2 s) reached" in log.read_text()
    records = _records(distrun_home)
    why = "the sweep's timeout (2 s) was reached"
    assert records["capped"]["reason"] == f"no trial completed; trial_0: {why}"
    assert (records["capped.trial_0"]["status"], records["capped.trial_0"]["reason"]) == ("Canceled", why)
    assert processes_of_job("capped.trial_0") == []
    # `distrun stream` of the sweep ends with the sweep's summary: its trials, and no best.
    streamed = run_cli("stream", "capped")
    assert streamed.returncode != 0 and "Streaming the logs of its trials' jobs" in streamed.stdout
    assert "Trials: 1" in streamed.stdout and "Best trial: none (no completed trial logged loss)" in streamed.stdout


def test_stream_of_a_detached_sweep_shows_its_event_lines_beside_its_trials_output(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    sweep = _sweep(
        tmp_path,
        "n",
        "{type: choice, values: [1]}",
        "sampling_algorithm: grid\nobjective: {goal: minimize, primary_metric: loss}\n",
        "import sys\nprint('trial says', sys.argv[1])\n",
    )
    started = run_cli("run", "-d", str(sweep), "--name", "told")
    assert started.returncode == 0, started.stdout + started.stderr
    streamed = run_cli("stream", "told")  # followed until the sweep ended (no loss logged: Failed)
    out = streamed.stdout
    assert "[trial_0] [0/0] trial says 1" in out, out + streamed.stderr
    # The background supervisor's lines (its launcher.txt), before the summary, which is shown once.
    assert out.index("[trial_0] started as job told.trial_0") < out.index("Execution Summary")
    assert out.index("[trial_0] logged no loss") < out.index("Execution Summary")
    assert out.count("Execution Summary") == 1 and "Trials: 1" in out
    quiet = run_cli("job", "stream", "told", "--events-only")
    assert "[trial_0] started as job told.trial_0" in quiet.stdout and "trial says" not in quiet.stdout
    assert quiet.stdout.count("Execution Summary") == 1 and quiet.returncode == streamed.returncode != 0


@pytest.mark.slow
def test_a_metric_never_logged_fails_the_sweep_naming_what_the_trials_logged(
    run_tracked: Callable[..., Any], tracked_home: Path, tmp_path: Path
) -> None:
    run_cli, distrun_home = run_tracked, tracked_home
    sweep = _sweep(
        tmp_path,
        "x",
        "{type: choice, values: [1, 2]}",
        "sampling_algorithm: grid\nobjective: {goal: maximize, primary_metric: acurracy}\n"
        "limits: {max_concurrent_trials: 1}\n",
        """
        import sys
        import mlflow
        print("training with x =", sys.argv[1], flush=True)
        mlflow.log_metric("accuracy", float(sys.argv[1]), step=0)
        mlflow.log_metric("loss", 1.0, step=0)
        """,
    )
    result = run_cli("run", str(sweep), "--name", "typo")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    # Each trial's own output, live, prefixed by its trial and [node/rank], beside the sweep's lines.
    assert out.index("[trial_0] started") < out.index("[trial_0] [0/0] training with x = 1") < out.index("Trials: 2")
    assert "[trial_1] [0/0] training with x = 2" in out
    # Every trial that cannot be ranked says so, with what it logged.
    logged = "(it logged: accuracy, loss; did you mean 'accuracy'?)"
    for key in ("trial_0", "trial_1"):
        assert f"[{key}] logged no acurracy: it cannot be ranked {logged}" in out
    why = f"no trial could be ranked: no completed trial logged acurracy {logged}"
    record = _records(distrun_home)["typo"]
    assert (record["status"], record["reason"]) == ("Failed", why)
    assert "Status: Failed" in out and f"Reason: {why}" in out
    quiet = run_cli("run", str(sweep), "--name", "typo_quiet", "--events-only")
    assert quiet.returncode == 1 and "training with" not in quiet.stdout, quiet.stdout


# Hides mlflow from the Python it is imported in (sitecustomize): as if it were not installed.
NO_MLFLOW = """
import sys
from importlib.machinery import PathFinder


class _NoMlflow(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "mlflow" or name.startswith("mlflow."):
            return None
        return PathFinder.find_spec(name, path, target)


sys.meta_path = [_NoMlflow if finder is PathFinder else finder for finder in sys.meta_path]
"""


def test_a_sweep_without_mlflow_is_refused_before_any_trial_starts(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    hider = tmp_path / "no_mlflow"
    hider.mkdir()
    (hider / "sitecustomize.py").write_text(NO_MLFLOW)
    sweep = _sweep(
        tmp_path,
        "x",
        "{type: choice, values: [1, 2]}",
        "sampling_algorithm: grid\nobjective: {goal: maximize, primary_metric: accuracy}\n",
        "import mlflow\n",
    )
    python_path = with_src_first(os.pathsep.join([str(hider), os.environ.get("PYTHONPATH", "")]))
    result = run_cli("run", str(sweep), "--name", "blind", env={"DISTRUN_MLFLOW": "1", "PYTHONPATH": python_path})
    assert result.returncode != 0, result.stdout + result.stderr
    assert "MLflow is not installed in the Python distrun runs in" in result.stderr
    assert "pip install 'distrun[mlflow]'" in result.stderr
    assert "blind.trial_0" not in _records(distrun_home)  # no trial started


def test_a_sweep_whose_every_trial_failed_shows_the_first_ones_traceback(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    sweep = _sweep(
        tmp_path,
        "x",
        "{type: choice, values: [1, 2]}",
        "sampling_algorithm: grid\nobjective: {goal: maximize, primary_metric: accuracy}\n"
        "limits: {max_concurrent_trials: 1}\n",
        "import sys\nraise ValueError(f'no data for x={sys.argv[1]}')\n",
    )
    result = run_cli("run", str(sweep), "--name", "broken")
    assert result.returncode == 1, result.stdout + result.stderr
    record = _records(distrun_home)["broken"]
    assert record["status"] == "Failed" and record["reason"].startswith("no trial completed; trial_0: ")
    cause = record["root_cause"]
    assert (cause["trial"], cause["job"]) == ("trial_0", "broken.trial_0")
    assert "ValueError: no data for x=1" in cause["traceback"]
    summary = result.stdout[result.stdout.index("Execution Summary") :]
    assert "Failed first: trial_0 (job broken.trial_0)" in summary
    assert "    ValueError: no data for x=1" in summary.splitlines()
