"""A pipeline job as the loader gives it: the validated pipeline, and each step as the command
job document it runs as (a sweep step: the sweep job document).

Plain data. A step's `document` is what `distrun.loading.loader.load_job_data` takes, with the
inputs it reads from other steps still unbound: `bound_document` gives them their paths once
the run knows where the upstream steps wrote (`azureml://jobs/<job>/outputs/<name>` of the
step's job), so each step is loaded, checked and run as a command job of its own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from distrun.core.errors import Position
from distrun.core.job_kind import JobKind
from distrun.spec import pipeline_graph
from distrun.spec.pipeline_models import CommandComponent, PipelineComponent, PipelineJob
from distrun.spec.source_map import SourceMap
from distrun.spec.spark_models import SparkComponent

__all__ = ["LoadedComponent", "LoadedPipeline", "PipelineStep", "UpstreamOutput"]


@dataclass
class LoadedComponent:
    """A command, pipeline or spark component, validated, with its document and where its keys were written."""

    spec: CommandComponent | PipelineComponent | SparkComponent
    data: dict[str, Any]
    source_map: SourceMap
    base_dir: Path  # its file's folder: its `code` and conda file resolve here
    source: str


@dataclass(frozen=True)
class UpstreamOutput:
    """An output of another step that a step's input reads."""

    step: str
    output: str


@dataclass
class PipelineStep:
    name: str  # a step of a pipeline component a step names: "OUTER.STEP"
    document: dict[str, Any]  # the command job this step runs as (upstream inputs unbound)
    source_map: SourceMap  # positions of the document's keys, in the pipeline or component file
    base_dir: Path  # relative paths of the document resolve here (the component's folder)
    component: str | None  # the component file, or None for an inline command step
    upstream: dict[str, UpstreamOutput] = field(default_factory=dict)  # input name -> what it reads
    # Of those, the inputs that take the upstream output's value (a `string`, `integer`, ...
    # output), not its path: input name -> its declared type.
    values: dict[str, str] = field(default_factory=dict)
    pipeline_outputs: dict[str, str] = field(default_factory=dict)  # step output -> pipeline output
    is_deterministic: bool = True
    force_rerun: bool = False  # the step's own `force_rerun`: never reused
    compute_key: str = ""  # where the step's compute was written: jobs.STEP.compute, settings.default_compute
    key: str = ""  # the step's key path in the file that wrote it (jobs.STEP), for its problems
    # A sweep step (`type: sweep`): its trial's command component, and `document` is then the
    # sweep job it runs as (`distrun.loading.sweep_loader` loads it, with this component as its trial).
    trial: LoadedComponent | None = None

    @property
    def is_sweep(self) -> bool:
        return self.trial is not None

    @property
    def depends_on(self) -> tuple[str, ...]:
        """The steps this step reads from, each once, in the order its inputs name them."""
        return tuple(dict.fromkeys(up.step for up in self.upstream.values()))

    def bound_document(
        self, path_of: Callable[[UpstreamOutput], str], value_of: Callable[[UpstreamOutput, str], Any] | None = None
    ) -> dict[str, Any]:
        """The step's command job document with every upstream input's `path` given by `path_of`,
        and every input reading a value given `value_of(upstream, type)` (a stand-in of its type
        without it: the value exists only once the upstream step ran)."""
        document = copy.deepcopy(self.document)
        for name, upstream in self.upstream.items():
            if name in self.values:
                kind = self.values[name]
                document["inputs"][name] = value_of(upstream, kind) if value_of else VALUE_STAND_INS[kind]
            else:
                document["inputs"][name]["path"] = path_of(upstream)
        return document


# What an input reading another step's value holds until that step ran (a plan, a check).
VALUE_STAND_INS: dict[str, Any] = {"string": "", "integer": 0, "number": 0.0, "boolean": False}


@dataclass
class LoadedPipeline:
    kind: ClassVar[JobKind] = JobKind.PIPELINE  # what it runs as (`distrun.runner.job_kinds`)
    spec: PipelineJob
    base_dir: Path
    source: str
    source_map: SourceMap
    steps: dict[str, PipelineStep]  # in file order
    notes: list[str] = field(default_factory=list)

    def position(self, *path: str | int) -> Position:
        return self.source_map.find(tuple(path))

    @property
    def depends_on(self) -> dict[str, tuple[str, ...]]:
        return {name: step.depends_on for name, step in self.steps.items()}

    def run_order(self) -> list[str]:
        return pipeline_graph.run_order(self.depends_on)

    def levels(self) -> dict[str, int]:
        return pipeline_graph.levels(self.depends_on)
