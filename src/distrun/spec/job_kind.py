"""Recognize Azure ML documents that are not command jobs (components, pipelines, sweeps).

Their keys (`version`, `jobs`, `trial`) would otherwise surface as "unknown key" errors,
which send the user hunting for a typo instead of telling them what the file is.
"""

from __future__ import annotations

from typing import Any

from distrun.core.errors import Problem
from distrun.spec.source_map import SourceMap

# `$schema` file names (and `type:` values) of Azure ML documents distrun does not run.
_KINDS = (
    ("commandcomponent", "a command component"),
    ("pipelinecomponent", "a pipeline component"),
    ("parallelcomponent", "a parallel component"),
    ("sparkcomponent", "a spark component"),
    ("pipelinejob", "a pipeline job"),
    ("sweepjob", "a sweep job"),
    ("sparkjob", "a spark job"),
    ("automl", "an AutoML job"),
    ("parallel", "a parallel job"),
)
_TYPES = {"pipeline": "a pipeline job", "sweep": "a sweep job", "spark": "a spark job", "parallel": "a parallel job"}
_HINTS = {
    "spark component": "use it as a pipeline step's `component:`, or run it as a `type: spark` job file without "
    "`version`",
    "component": "distrun runs command jobs: put the component's `command`, `code`, `environment`, `inputs` "
    "and `outputs` in a job file, without `version`",
    "pipeline": "`distrun run FILE` runs a pipeline, `distrun plan FILE` and `distrun job validate -f FILE` "
    "check one; here a command job is expected",
    "sweep": "`distrun run FILE` runs a sweep, `distrun plan FILE` and `distrun job validate -f FILE` "
    "check one; here a command job is expected",
}
# The job types distrun runs, as a job of another type is told (one line, not a problem per key).
RUN_TYPES_HINT = (
    "distrun runs command jobs (`type: command`, or no `type`), pipeline jobs (`type: pipeline`), "
    "sweep jobs (`type: sweep`), AutoML jobs (`type: automl`) and Spark jobs (`type: spark`)"
)


def not_a_command_job(data: dict[str, Any], smap: SourceMap) -> Problem | None:
    """A problem naming what the document is, when it is not a command job; else None."""
    schema = str(data.get("$schema") or "").lower().replace("_", "").replace("-", "")
    kind = next((what for mark, what in _KINDS if mark in schema.rsplit("/", 1)[-1]), None)
    key = "$schema"
    if kind is None and isinstance(data.get("type"), str) and data["type"].lower() in _TYPES:
        kind, key = _TYPES[data["type"].lower()], "type"
        if kind == "a spark job" and "version" in data:  # a spark job has no version; its component has
            kind = "a spark component"
    if kind is None and isinstance(data.get("type"), str) and data["type"].lower() != "command":
        # A job type distrun does not know (`finetuning`, `automl`, a typo): its other keys are that
        # type's, so reporting each as unknown would say nothing useful.
        return Problem(
            f"`type: {data['type']}` is not a job type distrun runs", "type", smap.find(("type",)), RUN_TYPES_HINT
        )
    if kind is None and isinstance(data.get("jobs"), dict):
        kind, key = "a pipeline job", "jobs"
    if kind is None and "version" in data and "command" in data:
        # Command jobs have no version; command components always do.
        kind, key = "a command component", "version"
    if kind is None:
        return None
    hint = next((text for word, text in _HINTS.items() if word in kind), RUN_TYPES_HINT)
    return Problem(f"this file is {kind}, not a command job", key, smap.find((key,)), hint)


def is_pipeline_document(data: dict[str, Any]) -> bool:
    """A pipeline job: `type: pipeline`, a pipelineJob `$schema`, or steps under `jobs:`."""
    schema = str(data.get("$schema") or "").lower().replace("_", "").replace("-", "")
    if "pipelinejob" in schema.rsplit("/", 1)[-1]:
        return True
    kind = data.get("type")
    if isinstance(kind, str):
        return kind.lower() == "pipeline"
    return isinstance(data.get("jobs"), dict)


def is_sweep_document(data: dict[str, Any]) -> bool:
    """A sweep job: `type: sweep`, or a sweepJob `$schema`."""
    schema = str(data.get("$schema") or "").lower().replace("_", "").replace("-", "")
    if "sweepjob" in schema.rsplit("/", 1)[-1]:
        return True
    kind = data.get("type")
    return isinstance(kind, str) and kind.lower() == "sweep"
