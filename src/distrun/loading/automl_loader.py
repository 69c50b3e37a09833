"""Load an AutoML job (`type: automl`) into the command job that runs its search.

The search is one process, `python -m distrun.automl_search`, run as the job's one rank: the
node agent supervises it as any job's rank (cancel, `limits.timeout`, the hang watchdog, logs,
restarts), its inputs are the job's MLTable folders and its `best_model` output is the job's. The
AutoML settings travel to it as plain JSON in one environment variable (`SETTINGS_VARIABLE`).
docs/automl.md says why the trials are runs of that process, not jobs of their own.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, Problem, ValidationError
from distrun.loading.loader import load_job_data
from distrun.loading.raw_checks import in_file_order
from distrun.spec.automl_models import REFUSED_TASKS, REFUSED_WHY, SETTINGS_VARIABLE, TASK_TAG, AutoMLJob
from distrun.spec.automl_names import estimators, metric_problem
from distrun.spec.loaded import LoadedJob
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.overrides import overridden_mapping
from distrun.spec.pipeline_steps import copy_positions
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

__all__ = [
    "INSTALL_HINT",
    "SETTINGS_VARIABLE",
    "automl_job_document",
    "automl_step",
    "is_automl_document",
    "load_automl_data",
]

INSTALL_HINT = "pip install 'distrun[automl]'"
DATA_INPUTS = ("training_data", "validation_data", "test_data")
# The search's own margin past `timeout_minutes`: the best model is refit and saved after it.
SAVE_MARGIN_S = 120.0


def is_automl_document(data: Any) -> bool:
    """`type: automl`, or an autoMLJob `$schema`."""
    if not isinstance(data, dict):
        return False
    schema = str(data.get("$schema") or "").lower().rsplit("/", 1)[-1]
    kind = data.get("type")
    return (isinstance(kind, str) and kind.lower() == "automl") or "automljob" in schema


def automl_step(
    raw: dict[str, Any], smap: SourceMap, at: KeyPath, problem: Callable[[str, KeyPath, str], None]
) -> dict[str, Any] | None:
    """A pipeline's AutoML step (`type: automl` under `jobs:`) as the inline command step that runs
    its search; None when its settings have problems (each said through `problem`). Its data may
    be another step's output (`${{parent.jobs.prep.outputs.train}}`): bound as any step's input."""
    data = dict(raw)
    given = data.pop("inputs", None)  # an @pipeline function's step gives its data as inputs
    data.update({key: value for key, value in (given or {}).items() if key in DATA_INPUTS})
    bindings = {key: data[key] for key in DATA_INPUTS if isinstance(data.get(key), str)}
    data.update({key: {"type": "mltable", "path": "."} for key in bindings})  # checked once bound
    step_map = SourceMap(smap.source)
    copy_positions(smap, at, step_map, ())
    try:
        job = automl_spec(data, step_map)
    except ValidationError as exc:
        for found in exc.problems:
            problem(found.message, (*at, *found.key_path.split(".")), found.hint)
        return None
    _need_flaml()
    document = automl_job_document(job)
    document["inputs"].update(bindings)
    return document


def _need_flaml() -> None:
    try:
        found = importlib.util.find_spec("flaml")  # found, not imported: FLAML takes seconds to import
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise DistrunError("AutoML jobs run with FLAML, which is not installed", INSTALL_HINT)


def load_automl_data(
    data: Any,
    base_dir: Path,
    source: str = "<python>",
    overrides: list[str] | tuple[str, ...] = (),
    smap: SourceMap | None = None,
) -> LoadedJob:
    smap = smap or SourceMap(source)
    data = overridden_mapping(data, smap, overrides, "an AutoML job", "`type: automl`, `task:`")
    job = automl_spec(data, smap)
    _need_flaml()
    return load_job_data(automl_job_document(job), base_dir, source, (), smap)  # a LoadedAutoMLJob


def automl_spec(data: dict[str, Any], smap: SourceMap) -> AutoMLJob:
    """The job's settings, checked: an image or NLP task is said in one line."""
    task = data.get("task")
    if isinstance(task, str) and task.lower() in REFUSED_TASKS:
        what = REFUSED_TASKS[task.lower()]
        problem = Problem(
            f"`task: {task}` is {what}, which distrun does not run", "task", smap.find(("task",)), REFUSED_WHY
        )
        raise ValidationError([problem])
    problems = []
    if (why := metric_problem(data.get("task"), data.get("primary_metric"))) is not None:
        problems.append(Problem(why, "primary_metric", smap.find(("primary_metric",)), "use one of those names"))
    try:
        job = AutoMLJob.model_validate(data)
    except ModelError as exc:  # said with the metric's problem, in file order
        raise ValidationError(in_file_order([*translate(exc, data, smap, AutoMLJob), *problems])) from None
    chosen, said = estimators(job)
    if not chosen:
        key = ("training", "allowed_training_algorithms")
        hint = "; ".join(said) or "allow at least one algorithm FLAML has (docs/automl.md lists them)"
        problems.append(Problem("no training algorithm is left to run", format_key_path(key), smap.find(key), hint))
    if job.task == "forecasting" and job.forecasting is None:
        hint = "add `forecasting: {time_column_name: ..., forecast_horizon: ...}`"
        problems.append(Problem("a forecasting job needs its forecasting settings", "task", smap.find(("task",)), hint))
    if problems:
        raise ValidationError(problems)
    return job


def automl_job_document(job: AutoMLJob) -> dict[str, Any]:
    """The command job that runs the search: its data inputs, `best_model` output and settings."""
    inputs = {
        key: value.model_dump(mode="json", exclude_none=True)
        for key in DATA_INPUTS
        if (value := getattr(job, key)) is not None
    }
    outputs: dict[str, Any] = {"best_model": {"type": "mlflow_model"}, "leaderboard": {"type": "uri_folder"}}
    outputs.update({k: v.model_dump(mode="json", exclude_none=True) if v else None for k, v in job.outputs.items()})
    arguments = " ".join(f"--{key} ${{{{inputs.{key}}}}}" for key in inputs)
    command = (
        f"{shlex.quote(sys.executable)} -m distrun.automl_search {arguments} --best_model ${{{{outputs.best_model}}}}"
    )
    command += " --leaderboard ${{outputs.leaderboard}}"
    document: dict[str, Any] = {
        "type": "command",
        "command": command,
        "inputs": inputs,
        "outputs": outputs,
        "environment_variables": {SETTINGS_VARIABLE: json.dumps(job.model_dump(mode="json", exclude_none=True))},
    }
    header = job.model_dump(mode="json", exclude_none=True, include={"name", "display_name", "experiment_name"})
    document.update(header)
    document.update({k: v for k, v in (("description", job.description), ("compute", job.compute)) if v})
    document["tags"] = {**job.tags, TASK_TAG: job.task}
    if job.limits.timeout_minutes:
        document["limits"] = {"timeout": job.limits.timeout_minutes * 60 + SAVE_MARGIN_S}
    return document
