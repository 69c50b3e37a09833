"""The one table of job kinds: what the faces (CLI, SDK, web UI) need of each kind of job.

A record knows its kind (`JobRecord.kind`, stored at submit) and a loaded document knows the kind
it would run as (`LoadedJob.kind`, ...); the faces look the kind up here instead of testing which
fields a record holds. A row says how the kind is named, what its children are called, which
view shows it, its summary, and how a document of the kind is planned, validated, run and
downloaded. A kind with children (a pipeline, a sweep) is run by its supervisor (`runner`).

Adding a kind is a row here plus the module that runs it: for a kind with children, a policy
over the one parent-run loop (`distrun.runner.parent_policy.ParentPolicy`; docs/parent-jobs.md).
Its `view` picks how the faces show it: a kind with children shown as a list of them can use
the pipeline's view ("pipeline").

Each runner module is imported when its kind is used, not here: this module is imported by the
orchestrator (`distrun.runner.jobs`) and by every face.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind

if TYPE_CHECKING:
    from distrun.runner.parent_policy import ParentPolicy
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

# What a document of a kind is checked, planned and downloaded with: (loaded, layout, compute).
Check = Callable[[Any, "Layout", "str | None"], dict[str, Any]]
Download = Callable[["Layout", str, Path, "str | None", bool], list[Path]]


@dataclass(frozen=True)
class KindRow:
    """What the faces need of one kind of job."""

    kind: JobKind  # also says how one is named and what its children are called
    view: str  # the view the faces show it with: "command", "automl", "pipeline" or "sweep"
    summary: Callable[[JobRecord], str]  # what `distrun run` prints when it has ended
    plan: Check  # `distrun plan`: the dry run, as plain data
    plan_text: Callable[[dict[str, Any]], str]  # the dry run for people
    validate: Check  # `distrun job validate`: the resolved document, as plain data
    download: Download  # `distrun job download`
    # The policy of a kind with children over the one parent-run loop (`distrun.runner.parent_run`),
    # imported when asked for; None for a command job.
    policy: Callable[[], type[ParentPolicy]] | None = None

    @property
    def children(self) -> str:
        return self.kind.children

    @property
    def has_children(self) -> bool:
        return self.kind.has_children


# ---------------------------------------------------------------- command jobs


def _command_summary(record: JobRecord) -> str:
    from distrun.runner.report import execution_summary

    return execution_summary(record)


def _plan_command(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.jobs import plan_job

    return plan_job(loaded, layout, compute).show()


def _command_plan_text(planned: dict[str, Any]) -> str:
    from distrun.plan.text import plan_as_text

    return plan_as_text(planned)


def _validate_command(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.jobs import check_target

    check_target(loaded, layout, compute)
    return loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


def _download_job(layout: Layout, name: str, dest: Path, output: str | None, everything: bool) -> list[Path]:
    from distrun.runner.download import download_job

    return download_job(layout, name, dest, output, everything)


# ---------------------------------------------------------------- pipelines


def _pipeline_summary(record: JobRecord) -> str:
    from distrun.runner.summaries import pipeline_summary

    return pipeline_summary(record)


def _plan_pipeline(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.pipelines import plan_pipeline

    return plan_pipeline(loaded, layout, compute)


def _pipeline_plan_text(planned: dict[str, Any]) -> str:
    from distrun.plan.pipeline_text import pipeline_as_text

    return pipeline_as_text(planned)


def _validate_pipeline(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.pipelines import check_pipeline

    targets = check_pipeline(loaded, layout, compute)
    return {
        "pipeline": loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"jobs"}),
        "steps": {
            name: {
                "compute": targets[name][0].name,
                "depends_on": list(step.depends_on),
                "job": step.document,
            }
            for name, step in loaded.steps.items()
        },
    }


def _download_children(layout: Layout, name: str, dest: Path, output: str | None, everything: bool) -> list[Path]:
    from distrun.runner.download import download_pipeline

    return download_pipeline(layout, name, dest, output, everything)


def _pipeline_policy() -> type[ParentPolicy]:
    from distrun.runner.pipeline_policy import PipelinePolicy

    return PipelinePolicy


# ---------------------------------------------------------------- sweeps


def _sweep_summary(record: JobRecord) -> str:
    from distrun.runner.summaries import sweep_summary

    return sweep_summary(record)


def _plan_sweep(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.sweep_run import plan_sweep

    return plan_sweep(loaded, layout, compute)


def _sweep_plan_text(planned: dict[str, Any]) -> str:
    from distrun.runner.summaries import sweep_plan_text

    return sweep_plan_text(planned)


def _validate_sweep(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.sweep_run import check_sweep

    target, _, trial = check_sweep(loaded, layout, compute)
    sweep = loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"trial"})
    trial_job = trial.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"sweep": sweep, "compute": target.name, "trial": trial_job}


def _sweep_policy() -> type[ParentPolicy]:
    from distrun.runner.sweep_policy import SweepPolicy

    return SweepPolicy


# ---------------------------------------------------------------- Spark jobs


def _validate_spark(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    from distrun.runner.jobs import check_target

    check_target(loaded, layout, compute)
    return loaded.spark.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- AutoML jobs
# One process runs the search (`distrun.automl_search`): run, shown and downloaded as a command
# job; its plan also says the settings it cannot honour exactly, as its run says them.


def _plan_automl(loaded: Any, layout: Layout, compute: str | None) -> dict[str, Any]:
    import json

    from distrun.spec.automl_models import SETTINGS_VARIABLE, AutoMLJob
    from distrun.spec.automl_notes import setting_notes

    planned = _plan_command(loaded, layout, compute)
    job = AutoMLJob.model_validate(json.loads(loaded.spec.environment_variables[SETTINGS_VARIABLE]))
    planned["notes"] = [*planned.get("notes", []), *setting_notes(job)]
    return planned


# ---------------------------------------------------------------- the table

_COMMAND_ROW = KindRow(
    JobKind.COMMAND,
    view="command",
    summary=_command_summary,
    plan=_plan_command,
    plan_text=_command_plan_text,
    validate=_validate_command,
    download=_download_job,
)

KINDS: dict[JobKind, KindRow] = {
    row.kind: row
    for row in (
        _COMMAND_ROW,
        # A parallel job is a gang, as a command job is: shown, planned and downloaded as one; the
        # faces say its kind, and `job show` adds its mini-batches (`distrun.runner.parallel_view`).
        replace(_COMMAND_ROW, kind=JobKind.PARALLEL),
        # A Spark job runs as the command job that runs spark-submit (`distrun.spec.spark_submit`).
        replace(_COMMAND_ROW, kind=JobKind.SPARK, validate=_validate_spark),
        KindRow(
            JobKind.PIPELINE,
            view="pipeline",
            summary=_pipeline_summary,
            plan=_plan_pipeline,
            plan_text=_pipeline_plan_text,
            validate=_validate_pipeline,
            download=_download_children,
            policy=_pipeline_policy,
        ),
        KindRow(
            JobKind.SWEEP,
            view="sweep",
            summary=_sweep_summary,
            plan=_plan_sweep,
            plan_text=_sweep_plan_text,
            validate=_validate_sweep,
            download=_download_children,
            policy=_sweep_policy,
        ),
        # An AutoML job's one process runs the search: a command job with its own view and plan.
        replace(_COMMAND_ROW, kind=JobKind.AUTOML, view="automl", plan=_plan_automl),
    )
}


def kind_row(kind: JobKind) -> KindRow:
    """The row of a kind (every kind has one: tests/unit/test_job_kind_dispatch.py)."""
    return KINDS[JobKind(kind)]


def row_of(record: JobRecord) -> KindRow:
    """The row of a job's record."""
    return kind_row(record.kind)


def row_of_document(loaded: Any) -> KindRow:
    """The row of a loaded document (`LoadedJob`, `LoadedPipeline`, `LoadedSweep`: each has its `kind`)."""
    return kind_row(loaded.kind)


def policy_of(kind: JobKind | str) -> type[ParentPolicy]:
    """The policy that runs a kind of parent job over the one parent-run loop."""
    row = kind_row(JobKind(kind))
    if row.policy is None:
        raise DistrunError(f"{row.kind.a_noun} is not a job with children", "run it as a job")
    return row.policy()


def policy_for(loaded: Any) -> type[ParentPolicy]:
    """The policy that runs what the loader made of a file (a pipeline, a sweep)."""
    kind = getattr(loaded, "kind", None)
    if kind is None:
        raise DistrunError(f"{type(loaded).__name__} is not a job with children", "run it as a job")
    return policy_of(kind)
