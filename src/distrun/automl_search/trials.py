"""The trials as they end: FLAML appends each to its training log; a thread reads the new lines
(on a Ray cluster, Ray Tune's hooks give them instead: `ray_trials`), prints one line per trial
(algorithm, score, best so far) and records the trial as a child run of the job's MLflow run
(its algorithm, hyperparameters and metrics), as Azure ML shows an AutoML job's trials. The
leaderboard is every trial, best first."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.spec.automl_names import azure_name

POLL_S = 0.2
# Child runs recorded at once. One trial's record is four calls to the tracking server (about
# 0.25 s); a fast search on a small table ends ten trials a second, and recorded one after the
# other its trials' runs fell minutes behind the search, past the job's time limit.
RECORDERS = 4


@dataclass
class Trial:
    number: int
    algorithm: str
    estimator: str
    score: float
    metrics: dict[str, float]
    hyperparameters: dict[str, Any]
    seconds: float
    run_id: str | None = None

    def row(self) -> dict[str, Any]:
        return {
            "trial": self.number,
            "algorithm": self.algorithm,
            "score": self.score,
            "metrics": self.metrics,
            "hyperparameters": self.hyperparameters,
            "seconds": round(self.seconds, 3),
            "run_id": self.run_id,
        }


@dataclass
class Trials:
    """What the search saw: each trial, the best so far, and where they are recorded."""

    task: str
    primary: str
    greater_is_better: bool
    log: Path
    say: Callable[[str], None]
    on_score: Callable[[float], None] = lambda score: None
    runs: ChildRuns | None = None
    seen: list[Trial] = field(default_factory=list)
    stopped: bool = False  # set once the search is to end (its exit score reached)
    _read: int = 0

    def best(self) -> Trial | None:
        scored = [t for t in self.seen if not math.isnan(t.score)]
        if not scored:
            return None
        return (max if self.greater_is_better else min)(scored, key=lambda t: t.score)

    def leaderboard(self) -> list[dict[str, Any]]:
        ordered = sorted(
            self.seen, key=lambda t: (math.isnan(t.score), -t.score if self.greater_is_better else t.score)
        )
        return [trial.row() for trial in ordered]

    def read_new(self) -> None:
        """The trials FLAML logged since the last read."""
        try:
            with self.log.open("rb") as handle:
                handle.seek(self._read)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a line being written is read once it is whole
        self._read += end
        for line in data[:end].splitlines():
            record = json.loads(line)
            if "learner" in record and "validation_loss" in record:
                self.take(record)

    def take(self, record: dict[str, Any]) -> None:
        """One trial that ended, as a line of FLAML's training log has it."""
        metrics = {k: float(v) for k, v in (record.get("logged_metric") or {}).items() if isinstance(v, (int, float))}
        metrics.pop("pred_time", None)
        score = metrics.get(self.primary, float("nan"))
        trial = Trial(
            len(self.seen),
            azure_name(record["learner"], self.task),
            record["learner"],
            score,
            metrics,
            dict(record.get("config") or {}),
            float(record.get("trial_time") or 0.0),
        )
        if self.runs is not None:
            self.runs.submit(trial)  # its run id is set once recorded (`ChildRuns.drain`)
        self.seen.append(trial)
        best = self.best()
        best_text = f"{best.score:.4f} (trial {best.number})" if best else "none"
        self.say(f"trial {trial.number}: {trial.algorithm} {self.primary}={score:.4f}  best so far {best_text}")
        if best is not None:
            self.on_score(best.score)


class Follower(threading.Thread):
    """Reads the trials as FLAML logs them until stopped, then once more."""

    def __init__(self, trials: Trials) -> None:
        super().__init__(name="automl-trials", daemon=True)
        self.trials = trials
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            self.trials.read_new()

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.trials.read_new()


class ChildRuns:
    """Each trial a child run of the job's MLflow run (MLFLOW_RUN_ID, set by distrun)."""

    def __init__(self, parent_run_id: str, job_name: str, primary: str) -> None:
        # mlflow prints each run's web address when it ends: one per trial would drown the trials' lines.
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient()
        self.parent = parent_run_id
        self.experiment_id = self.client.get_run(parent_run_id).info.experiment_id
        self.job_name = job_name
        self.primary = primary
        self._pool = ThreadPoolExecutor(max_workers=RECORDERS, thread_name_prefix="automl-record")
        self._pending: list[tuple[Trial, Future[str]]] = []

    def __getstate__(self) -> dict[str, Any]:
        # Ray Tune pickles its stopper, which holds the trials and so these runs, each time it
        # saves the experiment's state: a copy records nothing, and a pool cannot be pickled.
        state = dict(self.__dict__)
        del state["_pool"]
        state["_pending"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool = ThreadPoolExecutor(max_workers=RECORDERS, thread_name_prefix="automl-record")

    def submit(self, trial: Trial) -> None:
        """Record `trial` beside the search (`drain` waits for it)."""
        self._pending.append((trial, self._pool.submit(self.record, trial)))

    def drain(self) -> None:
        """Every trial submitted so far recorded, its run id set; a trial the server refused keeps
        none, and the first refusal is said (the search's results stand without it)."""
        refused: list[BaseException] = []
        for trial, future in self._pending:
            error = future.exception()
            if error is None:
                trial.run_id = future.result()
            else:
                refused.append(error)
        self._pending.clear()
        if refused:
            print(f"note: {len(refused)} trial(s) not recorded as child runs: {refused[0]}", flush=True)

    def record(self, trial: Trial) -> str:
        tags = {
            "mlflow.parentRunId": self.parent,
            "mlflow.runName": f"{self.job_name}_{trial.number}",
            "algorithm": trial.algorithm,
            "flaml.estimator": trial.estimator,
        }
        run = self.client.create_run(self.experiment_id, tags=tags)
        run_id = run.info.run_id
        from mlflow.entities import Metric, Param

        params = [Param(k, str(v)[:500]) for k, v in trial.hyperparameters.items()]
        values = [Metric(k, v, 0, 0) for k, v in trial.metrics.items() if not math.isnan(v)]
        self.client.log_batch(run_id, metrics=values, params=params)
        self.client.set_terminated(run_id, "FINISHED")
        primary = trial.metrics.get(self.primary, math.nan)
        if not math.isnan(primary):  # the job's own run: the primary metric over trials
            self.client.log_metric(self.parent, self.primary, primary, step=trial.number)
        return str(run_id)

    def finish(
        self, best: Trial | None, leaderboard: list[dict[str, Any]], model: Path | None, described: dict[str, str]
    ) -> None:
        """The job's run as Azure ML's AutoML parent run: the best child run named in its tag
        `automl_best_child_run_id`, that child holding the best model (and the `described`
        files) under `outputs/`."""
        if best is None:
            return
        self.client.set_tag(self.parent, "automl_best_child_run_id", best.run_id or "")
        if best.run_id and model is not None:
            from mlflow.exceptions import MlflowException

            from distrun.automl_search.model import log_model_outputs

            try:
                log_model_outputs(self.client, best.run_id, model, described)
            except (OSError, MlflowException) as exc:  # the artifact store out of this node's reach
                # The job's `best_model` output holds the model all the same: the job has not failed.
                print(f"note: the best trial's run has no outputs/ (its artifact store refused: {exc})", flush=True)
        self.client.set_tag(self.parent, "best_algorithm", best.algorithm)
        for key, value in best.metrics.items():
            if not math.isnan(value):
                self.client.log_metric(self.parent, key if key != self.primary else f"best_{key}", value)


def child_runs(primary: str) -> ChildRuns | None:
    """The job's MLflow run, when distrun tracks the job and mlflow is installed."""
    parent = os.environ.get("MLFLOW_RUN_ID")
    if not parent:
        return None
    try:
        return ChildRuns(parent, os.environ.get("DISTRUN_JOB_NAME", "automl"), primary)
    except ImportError:
        return None
