"""The faces tell a kind of job from another by its kind, through one table (`distrun.runner.job_kinds`).

Read from the source, as the layer test reads imports: no face (the CLI, the SDK, the web UI)
and none of the modules that used to (the orchestrator's job verbs, job output locations) tests
which fields a record holds (`record.steps is None`, `record.sweep is not None`) or which class
a loaded document is (`isinstance(loaded, LoadedSweep)`). And the table itself: every kind that
distrun runs has a row, and a record or document is looked up by its kind alone.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest

from distrun.cli.views import job_list_text, job_show_text
from distrun.core.job_kind import JobKind, inferred_kind
from distrun.loading.parallel_step import runs_as
from distrun.runner import job_kinds
from distrun.runner.job_kinds import KINDS, row_of, row_of_document
from distrun.spec.loaded import LoadedJob
from distrun.spec.loaded_pipeline import LoadedPipeline
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.store.index import JobRecord

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "distrun"
# The faces, and the modules below them that dispatched on a record's fields before records knew their kind.
DISPATCHERS = [
    *sorted((PACKAGE / "cli").rglob("*.py")),
    *sorted((PACKAGE / "sdk").rglob("*.py")),
    *sorted((PACKAGE / "ui").rglob("*.py")),
    PACKAGE / "runner" / "jobs.py",
    PACKAGE / "data" / "locations.py",
]
KIND_FIELDS = ("steps", "sweep")
TEMPLATES = sorted((PACKAGE / "ui" / "templates").glob("*.html"))
TEMPLATE_GUESS = re.compile(r"\.(steps|sweep)\s+is\s+(not\s+)?none", re.IGNORECASE)


def _kind_guesses(text: str, where: str) -> list[str]:
    """`X.steps is (not) None`, `X.sweep is (not) None` and `isinstance(X, Loaded...)` in a module's text."""
    found = []
    for node in ast.walk(ast.parse(text, where)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            left, right = node.left, node.comparators[0]
            is_none = isinstance(right, ast.Constant) and right.value is None
            if is_none and isinstance(left, ast.Attribute) and left.attr in KIND_FIELDS:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            classes = node.args[1] if len(node.args) == 2 else None
            names = [ast.unparse(c) for c in (classes.elts if isinstance(classes, ast.Tuple) else [classes])]
            if any(name.split(".")[-1].startswith("Loaded") for name in names if name):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_faces_exist_where_this_test_reads_them() -> None:
    assert all(path.is_file() for path in DISPATCHERS)
    assert len(DISPATCHERS) > 20


def test_no_face_tells_a_kind_of_job_by_the_fields_of_its_record_or_the_class_of_its_document() -> None:
    found = [guess for path in DISPATCHERS for guess in _kind_guesses(path.read_text(), str(path.relative_to(PACKAGE)))]
    assert found == [], "dispatch on the record's or document's kind (distrun.runner.job_kinds):\n" + "\n".join(found)


def test_no_page_of_the_web_ui_tells_a_kind_of_job_by_the_fields_of_its_record() -> None:
    assert len(TEMPLATES) > 5
    found = [
        f"ui/templates/{path.name}:{number}: {line.strip()}"
        for path in TEMPLATES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if TEMPLATE_GUESS.search(line)
    ]
    assert found == [], "use the record's kind (job.kind):\n" + "\n".join(found)
    assert TEMPLATE_GUESS.search("{% if job.sweep is not none %}sweep, {% elif job.steps is none %}")


@pytest.mark.parametrize(
    "source",
    [
        "if record.steps is None:\n    pass\n",
        "x = 'a' if final.sweep is not None else 'b'\n",
        "if get_job(layout, name).steps is not None:\n    pass\n",
        "if not isinstance(loaded, LoadedJob):\n    pass\n",
        "if isinstance(loaded, (loaded_sweep.LoadedSweep, int)):\n    pass\n",
    ],
)
def test_the_check_finds_each_way_of_guessing_a_kind(source: str) -> None:
    assert len(_kind_guesses(source, "cli/example.py")) == 1


def test_every_kind_distrun_runs_has_a_row_and_each_row_is_its_kinds() -> None:
    assert set(KINDS) == set(JobKind)
    assert all(row.kind is kind for kind, row in KINDS.items())
    assert {kind for kind, row in KINDS.items() if row.has_children} == {JobKind.PIPELINE, JobKind.SWEEP}
    assert all((row.policy is None) is (not row.has_children) for row in KINDS.values())
    assert {row.view for row in KINDS.values()} == {"command", "pipeline", "sweep", "automl"}


def _record(kind: JobKind, **fields: object) -> JobRecord:
    return JobRecord("j", "Running", "local", "/nowhere/j", time.time(), kind=kind, **fields)  # type: ignore[arg-type]


def test_a_record_is_looked_up_by_its_kind_not_by_its_fields() -> None:
    # A sweep's record before its first trial, a pipeline's before its steps are recorded.
    assert row_of(_record(JobKind.SWEEP)).view == "sweep"
    assert row_of(_record(JobKind.PIPELINE)).children == "steps"
    assert row_of(_record(JobKind.COMMAND, steps={"a": {}})).view == "command"


def test_a_document_is_looked_up_by_the_kind_its_class_runs_as() -> None:
    assert LoadedJob.kind is JobKind.COMMAND
    assert LoadedPipeline.kind is JobKind.PIPELINE
    assert LoadedSweep.kind is JobKind.SWEEP
    assert row_of_document(LoadedSweep).kind is JobKind.SWEEP


def test_a_parallel_job_is_a_gang_shown_as_a_command_job_and_named_by_its_kind() -> None:
    row = row_of(_record(JobKind.PARALLEL))
    assert row.view == "command" and not row.has_children and row.policy is None
    command = '"$P" -m distrun.agent.parallel_run --entry-script score.py -- --model m'
    assert runs_as(f"P=python; {command}") is JobKind.PARALLEL
    assert runs_as("python -m distrun.agent.parallel_runner x") is JobKind.COMMAND
    assert runs_as("python train.py") is runs_as(None) is JobKind.COMMAND
    shown = job_show_text(_record(JobKind.PARALLEL, distribution="pytorch"))
    assert "Compute:  local (parallel job)" in shown
    assert "local (parallel job)" in job_list_text([_record(JobKind.PARALLEL)])
    assert "local (parallel job)" not in job_list_text([_record(JobKind.COMMAND)])


def test_kinds_name_themselves_and_their_children() -> None:
    assert [kind.a_noun for kind in JobKind] == [
        "a job",
        "a pipeline",
        "a sweep",
        "a parallel job",
        "an AutoML job",
        "a Spark job",
    ]
    assert [kind.children for kind in JobKind] == ["", "steps", "trials", "", "", ""]
    assert inferred_kind(None, None) is JobKind.COMMAND


def test_the_table_imports_no_runner_module_when_it_is_imported() -> None:
    # The orchestrator and every face import it: the modules that run each kind load when used.
    tree = ast.parse(Path(job_kinds.__file__).read_text())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert all(not (getattr(node, "module", "") or "").startswith("distrun.runner") for node in top)


def test_an_automl_jobs_record_is_listed_and_shown_as_one() -> None:
    from distrun.cli.views import job_list_text, job_show_text
    from distrun.runner.automl_results import TASK_TAG

    record = _record(JobKind.AUTOML, tags={TASK_TAG: "classification"})
    row = row_of(record)
    # One process runs its search: its logs, cancel and download are a command job's.
    assert row.view == "automl" and not row.has_children and row.download is KINDS[JobKind.COMMAND].download
    assert "local (automl)" in job_list_text([record])
    shown = job_show_text(record)
    assert "AutoML job: classification with FLAML" in shown and "Logs: /nowhere/j/user_logs" in shown


def test_every_view_a_kind_names_is_one_each_face_has() -> None:
    from distrun.cli.views import _VIEWS
    from distrun.sdk.client import _JOB_OF_VIEW

    views = {row.view for row in KINDS.values()}
    assert views <= set(_VIEWS) and views <= set(_JOB_OF_VIEW)
