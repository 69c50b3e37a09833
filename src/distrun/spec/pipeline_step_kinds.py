"""Whether a pipeline step's `type` is one distrun runs, and whether its component is of that
kind: a command step names a command component, a pipeline step a pipeline component, a sweep
step's `trial` a command component.

Pure: each check says its problem through `problem(message, key_path, hint)` and answers whether
the step can be built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distrun.spec import pipeline_models
from distrun.spec.loaded_pipeline import LoadedComponent
from distrun.spec.source_map import KeyPath
from distrun.spec.spark_models import SparkComponent

ProblemAt = Callable[[str, KeyPath, str], None]


def is_sweep_step(raw: dict[str, Any]) -> bool:
    return str(raw.get("type", "command")).lower() == "sweep"


def component_key(raw: dict[str, Any]) -> str:
    """Where a step names its component: a sweep step's is its `trial`."""
    return "trial" if is_sweep_step(raw) else "component"


def step_kind_ok(problem: ProblemAt, name: str, raw: dict[str, Any]) -> bool:
    kind = raw.get("type", "command")
    text = str(kind).lower()
    if text in pipeline_models.STEP_TYPES_RUN:
        return True
    later = pipeline_models.STEP_TYPES_LATER.get(text)
    if later is not None:
        problem(
            f"step {name!r} is a {text} step: {later}",
            ("jobs", name, "type"),
            "distrun runs `type: command` steps (inline, or `component: ./file.yml`), "
            "`type: pipeline` steps naming a pipeline component, and `type: sweep`, `type: parallel`, "
            "`type: automl` and `type: spark` steps",
        )
    else:
        problem(
            f"unknown step type {kind!r}",
            ("jobs", name, "type"),
            "use `type: command`, `type: pipeline` naming a pipeline component, `type: sweep` "
            "with `trial: ./train.yml`, `type: parallel` with its `task`, `type: automl` or `type: spark`",
        )
    return False


def component_fits(problem: ProblemAt, name: str, raw: dict[str, Any], component: LoadedComponent | None) -> bool:
    """A step's type says what its component is: command, or pipeline (a sweep step's trial: command)."""
    pipeline_step = str(raw.get("type", "command")).lower() == "pipeline"
    if is_sweep_step(raw):
        return _trial_fits(problem, name, raw, component)
    spark_step = str(raw.get("type", "command")).lower() == "spark"
    if component is not None and spark_step != isinstance(component.spec, SparkComponent):
        kind = "spark" if not spark_step else "command or pipeline"
        problem(
            f"the step is `type: {raw.get('type', 'command')}` but its component is not one: it is a {kind} component",
            ("jobs", name, "type"),
            "a `type: spark` step names a spark component, a command step a command component",
        )
        return False
    if "component" in raw and component is None:
        return False  # its problem is said
    if pipeline_step and component is None:
        problem(
            "a pipeline step names its pipeline component",
            ("jobs", name),
            "add `component: ./stage.yml` (a pipelineComponent file), or make it `type: command`",
        )
        return False
    if component is not None and pipeline_step != isinstance(component.spec, pipeline_models.PipelineComponent):
        kind = "pipeline" if not pipeline_step else "command"
        problem(
            f"the step is `type: {'pipeline' if pipeline_step else 'command'}` but its component is a {kind} component",
            ("jobs", name, "type"),
            f"write `type: {kind}`",
        )
        return False
    return True


def _trial_fits(problem: ProblemAt, name: str, raw: dict[str, Any], component: LoadedComponent | None) -> bool:
    """A sweep step names its trial, a command component."""
    if "trial" in raw and component is None:
        return False  # its problem is said
    if component is None:
        problem(
            "a sweep step names its trial: the command component each trial runs",
            ("jobs", name),
            "add `trial: ./train.yml` (a commandComponent file)",
        )
        return False
    if not isinstance(component.spec, pipeline_models.CommandComponent):
        problem(
            "a sweep step's trial is a command component, not a pipeline component",
            ("jobs", name, "trial"),
            "name a `type: command` component file",
        )
        return False
    return True
