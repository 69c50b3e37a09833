"""The `distrun` command line: a thin face over the job orchestrator (`distrun.runner.jobs`).

Verbs follow `az ml job` (create/show/list/stream/cancel/download/validate) plus `run`,
`plan` and `logs`. Heavy modules are imported inside the commands that need them, so
`distrun --help` and the CLI's start stay fast.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import click

from distrun.cli.envdata import resource_file_option
from distrun.cli.output import echo_json, emit, output_option
from distrun.cli.shown import echo
from distrun.cli.stdout_reader import QuietWhenUnread
from distrun.core.errors import DistrunError, JobAlreadyEndedError
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.core.safe_files import UnsafeFileError
from distrun.prepare.compute import USER_KINDS

EXIT_FAILED = 1
EXIT_CANCELED = 130

_set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a job field before validation, e.g. --set inputs.epochs=3 (repeatable).",
)
_compute_option = click.option("--compute", default=None, help="Compute target (default: the job's, else local).")


def _color(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ


def _layout():  # type: ignore[no-untyped-def]
    from distrun.store.layout import Layout

    return Layout()


@click.group(cls=QuietWhenUnread, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="distrun")
def cli() -> None:
    """Run distributed training jobs (Azure ML command-job YAML) here or on a cluster."""


# ---------------------------------------------------------------- run / plan


def _run(
    file: str,
    overrides: tuple[str, ...],
    name: str | None,
    compute: str | None,
    stream: bool,
    output: str = "table",
    events_only: bool = False,
) -> NoReturn:
    from distrun.runner import jobs
    from distrun.runner.job_kinds import row_of_document

    layout = _layout()
    loaded = _load_document(file, overrides, compute)
    if row_of_document(loaded).has_children:  # a pipeline or a sweep
        if name is not None:  # the names of its steps' or trials' jobs, checked before anything is recorded
            from distrun.core.errors import ValidationError
            from distrun.spec.derived_names import run_name_problems

            if problems := run_name_problems(loaded, name):
                raise ValidationError(problems)
        _run_parent_file(loaded, layout, name, compute, stream, file, overrides, output, events_only)
    if not stream:
        record, _ = jobs.submit_job(loaded, layout, compute, name)
        emit(record.to_dict(), output, lambda: views().created_text(record))
        sys.exit(0)
    record = jobs.run_job(loaded, layout, sys.stdout.buffer, _color(sys.stdout), compute, name)
    sys.exit(_exit_code(record.status))


def _run_parent_file(
    loaded: Any,
    layout: Any,
    name: str | None,
    compute: str | None,
    stream: bool,
    file: str,
    overrides: tuple[str, ...],
    output: str,
    events_only: bool = False,
) -> NoReturn:
    """A pipeline's or sweep's supervisor submits each step's or trial's job and follows them: this
    process (attached, each child's output shown live beside its lines unless `events_only`), or
    one started in the background (`-d`, `job create` without --stream)."""
    from distrun.cli.children_output import ChildrenOutput
    from distrun.runner.parent_run import ParentRun, start_detached

    if not stream or events_only:
        run = ParentRun.of(loaded, layout, _say_on_stdout, compute, name)
        _run_parent(run, lambda: start_detached(run, file, list(overrides)), run.policy.summary, stream, output)
    shown = ChildrenOutput(layout, sys.stdout.buffer, _color(sys.stdout))
    run = ParentRun.of(loaded, layout, shown.say, compute, name)
    record = run.run(on_recorded=lambda: shown.start(run.name))
    try:
        shown.wait()
    except KeyboardInterrupt:
        pass  # the parent has ended: a Ctrl-C now stops only the showing of its children's last lines
    echo(run.policy.summary(record))
    sys.exit(_exit_code(record.status))


def _say_on_stdout(text: str) -> None:
    """A supervisor's line for the user. A reader that went away (`| head`) ends the printing,
    never the supervision: the steps or trials go on and the record stays true."""
    from distrun.agent.terminal_output import say

    sys.stdout.flush()
    say(sys.stdout.buffer, text)


def _run_parent(run: Any, detach: Any, summary: Any, stream: bool, output: str) -> NoReturn:
    """Run a pipeline or sweep here (attached), or `detach()` it to a background supervisor."""
    if not stream:
        record = detach()
        emit(record.to_dict(), output, lambda: views().created_text(record))
        sys.exit(0)
    record = run.run()
    echo(summary(record))
    sys.exit(_exit_code(record.status))


def _exit_code(status: str) -> int:
    return {JobStatus.COMPLETED: 0, JobStatus.CANCELED: EXIT_CANCELED}.get(JobStatus.of(status), EXIT_FAILED)


def views():  # type: ignore[no-untyped-def]
    from distrun.cli import views

    return views


_output_option = output_option(what="the job record (with -d)")


def _run_options(func: Any) -> Any:
    """The options `run` and `job create` share: a job started either way can be started alike."""
    for option in reversed(_RUN_OPTIONS):
        func = option(func)
    return func


_events_only_option = click.option(
    "--events-only",
    is_flag=True,
    help="A pipeline or sweep: only its own lines (steps or trials started, metrics, ended), not their output.",
)

_RUN_OPTIONS = (
    _set_option,
    click.option("--name", "-n", default=None, help="Job name (default: the job's `name`, else generated)."),
    _compute_option,
    _output_option,
    click.option(
        "--max-restarts",
        type=click.IntRange(min=0),
        default=None,
        help="Restart the whole job up to this many times after a failure (limits.max_restarts).",
    ),
    click.option(
        "--hang-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Fail the job, with every process's stack, after this long without output or metrics "
        "(limits.hang_timeout).",
    ),
    click.option(
        "--no-container",
        is_flag=True,
        help="On local compute, run in this Python even when environment.image is set and a container engine is here.",
    ),
    _events_only_option,
)


def _start(
    file: str,
    stream: bool,
    overrides: tuple[str, ...],
    name: str | None,
    compute: str | None,
    output: str,
    max_restarts: int | None,
    hang_timeout: float | None,
    no_container: bool,
    events_only: bool,
) -> NoReturn:
    """`run` and `job create` with their shared options: `--max-restarts`, `--hang-timeout` as
    the --set overrides they stand for, `--no-container` as the setting local compute reads,
    `--events-only` as what a pipeline's or sweep's stream shows."""
    if no_container:
        # Read where local compute decides (also in a launcher started for --detach, which inherits it).
        os.environ["DISTRUN_CONTAINERS"] = "off"
    if max_restarts is not None:
        overrides = (*overrides, f"limits.max_restarts={max_restarts}")
    if hang_timeout is not None:
        overrides = (*overrides, f"limits.hang_timeout={hang_timeout:g}")
    _run(file, overrides, name, compute, stream=stream, output=output, events_only=events_only)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--detach", "-d", is_flag=True, help="Start the job in the background and return.")
@_run_options
def run(file: str, detach: bool, **options: Any) -> None:
    """Run a job and stream its logs until it ends (Ctrl-C cancels it); a pipeline's or sweep's:
    every step's or trial's, prefixed by it, beside its own lines."""
    _start(file, not detach, **options)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_set_option
@_compute_option
@output_option(what="the whole dry run (yaml: a cluster's objects as it submits them)")
def plan(file: str, overrides: tuple[str, ...], compute: str | None, output: str) -> None:
    """Dry run: every process, its command and its environment; nothing starts. A pipeline: its
    graph of steps, and each step's processes."""
    from distrun.runner.job_kinds import row_of_document

    loaded = _load_document(file, overrides, compute)
    row = row_of_document(loaded)
    _echo_planned(row.plan(loaded, _layout(), compute), output, row.plan_text)


def _load_document(file: str, overrides: tuple[str, ...], compute: str | None):  # type: ignore[no-untyped-def]
    """A command job, a pipeline job or a sweep job, as the file says; an unknown compute target
    is reported with the file's other problems."""
    from distrun.runner.checked_documents import load_checked_document

    return load_checked_document(file, overrides, _layout(), compute)


def _echo_planned(planned: dict[str, Any], output: str, as_text: Any) -> None:
    """A plan as JSON, YAML, or `as_text(planned)`."""
    if output == "json":
        echo_json(planned)
    elif output == "yaml":
        _echo_yaml(planned)
    else:
        echo(as_text(planned))


def _echo_yaml(rendered: dict[str, Any]) -> None:
    """A cluster backend's objects as the YAML stream it submits; otherwise the whole dry run."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    documents = rendered["objects"] if rendered.get("objects") else [rendered]
    yaml.dump_all(json.loads(json.dumps(documents, default=str)), sys.stdout)


# ---------------------------------------------------------------- job verbs


@cli.group()
def job() -> None:
    """Azure ML style job verbs: create, validate, show, list, stream, logs, cancel, download."""


@job.command("create")
@click.option("--file", "-f", "file", required=True, type=click.Path(dir_okay=False), help="The job YAML.")
@click.option("--stream", "-s", is_flag=True, help="Stream the logs until the job ends (like `distrun run`).")
@_run_options
def job_create(file: str, stream: bool, **options: Any) -> None:
    """Create (submit) a job; prints its name and how to follow it (-o json: the record), or streams it.
    Takes every option `distrun run -d` takes."""
    _start(file, stream, **options)


@job.command("validate")
@click.option("--file", "-f", "file", required=True, type=click.Path(dir_okay=False), help="The job YAML.")
@_set_option
@_compute_option
@output_option(what="the resolved job")
def job_validate(file: str, overrides: tuple[str, ...], compute: str | None, output: str) -> None:
    """Check a job or pipeline file and its compute targets as `run` would; prints the resolved job
    (a pipeline: each step's job), or every problem."""
    from distrun.cli.tables import fields_table, flat_fields
    from distrun.runner.job_kinds import row_of_document

    loaded = _load_document(file, overrides, compute)
    row = row_of_document(loaded)
    checked = row.validate(loaded, _layout(), compute)
    emit(checked, output, lambda: f"{file}: a valid {row.kind.value} job\n\n" + fields_table(flat_fields(checked)))


def _name_arg(func: Any) -> Any:
    """Every verb about one job takes its NAME as an argument or as -n/--name (as `az ml`), and
    without either, the newest job."""
    func = click.option(
        "--name",
        "-n",
        "name_opt",
        default=None,
        help="The job name (default: the newest job).",
        shell_complete=_complete_job_names,
    )(func)
    return click.argument("name", required=False, shell_complete=_complete_job_names)(func)


def _complete_job_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The shell's completion of a job name (`_DISTRUN_COMPLETE`): the jobs there are, newest first."""
    from distrun.store.index import JobIndex

    try:
        names = JobIndex(_layout().db_path).names()
    except (DistrunError, OSError):
        return []  # no index yet, or unreadable: nothing to offer, never an error in the shell
    return [name for name in names if name.startswith(incomplete)]


def _job_name(name: str | None, name_opt: str | None) -> str:
    chosen = name or name_opt
    if not chosen:
        from distrun.runner.jobs import list_jobs

        latest = list_jobs(_layout(), 1)
        if latest:
            return latest[0].name
        raise DistrunError("there are no jobs yet", "start one with `distrun run job.yml`")
    from distrun.runner.pipelines import resolve_job_name

    return resolve_job_name(_layout(), chosen)  # PIPELINE/STEP: that step's job


@job.command("show")
@_name_arg
@output_option(what="the job record and its last metric values")
def job_show(name: str | None, name_opt: str | None, output: str) -> None:
    """Show a job (the newest without a name): status, root cause, every process, outputs."""
    from distrun.runner.jobs import get_job

    record = get_job(_layout(), _job_name(name, name_opt))
    data = record.to_dict()
    from distrun.metrics.printing import last_metric_values

    data.update(last_metric_values(_layout().job(record.name)))
    metrics = data.get("metrics") or {}
    registered = _registered_models(record.name)
    if registered:
        data["registered_models"] = registered
    from distrun.runner.automl_results import automl_results, results_lines

    automl = automl_results(_layout(), record)  # an AutoML job's leaderboard
    if automl is not None:
        data["automl"] = automl
    if record.kind is JobKind.PARALLEL and record.folder:  # the counts and failures `job show` prints
        from distrun.runner.parallel_view import mini_batches

        data["mini_batches"] = mini_batches(Path(record.folder))
    if record.kind is JobKind.SPARK:  # its application id and UI, as its driver's log names them
        from distrun.runner.spark_app import spark_application

        data["spark"] = spark_application(record.folder)
        if record.spark_application_id:
            data["spark"]["application_id"] = record.spark_application_id

    def text() -> str:
        shown = views().job_show_text(record, _parent_kind(record), metrics)
        if automl is not None:
            shown = "\n".join([shown, *results_lines(automl)])
        return shown + _models_text(registered)

    emit(data, output, text)


def _registered_models(job_name: str) -> list[dict[str, str]]:
    """The model versions registered from this job's outputs or MLflow run (`distrun model create`)."""
    from distrun.data.model_store import adopt_registered
    from distrun.data.model_versions import models_of_job

    adopt_registered(_layout().home)
    return [{"id": m.id, "source": m.source} for m in models_of_job(_layout().home, job_name)]


def _models_text(registered: list[dict[str, str]]) -> str:
    if not registered:
        return ""
    return "\n\nRegistered as models:\n" + "\n".join(f"  {m['id']} from {m['source']}" for m in registered)


def _parent_kind(record: Any) -> Any:
    """The kind of a step's or trial's parent, from the parent's own record (None if it is gone)."""
    if not record.parent:
        return None
    from distrun.runner.jobs import get_job

    try:
        return get_job(_layout(), record.parent).kind
    except DistrunError:
        return None


@job.command("list")
@click.option("--max-results", "-r", default=50, show_default=True, help="Show at most this many jobs.")
@click.option(
    "--status",
    type=click.Choice([s.value for s in JobStatus], case_sensitive=False),
    default=None,
    help="Only jobs in this state.",
)
@click.option("--parent-job-name", "-p", default=None, help="Only this pipeline's steps or sweep's trials.")
@click.option("--experiment-name", default=None, help="Only the jobs of this experiment.")
@click.option(
    "--include-children", is_flag=True, help="Steps and trials too (without it they are folded under their parent)."
)
@click.option("--include-archived", is_flag=True, help="Archived jobs too (`distrun job archive`).")
@output_option(what="the job records")
def job_list(
    max_results: int,
    status: str | None,
    parent_job_name: str | None,
    experiment_name: str | None,
    include_children: bool,
    include_archived: bool,
    output: str,
) -> None:
    """List jobs, newest first; a pipeline's steps and a sweep's trials only with --include-children
    or --parent-job-name."""
    from distrun.runner.jobs import list_jobs
    from distrun.store.index import JobFilter

    status = None if status is None else JobStatus.of(status).value
    where = JobFilter(status, parent_job_name, experiment_name, children=include_children, archived=include_archived)
    records = list_jobs(_layout(), max_results, where)
    emit([r.to_dict() for r in records], output, lambda: views().job_list_text(records))


@job.command("stream")
@_name_arg
@_events_only_option
def job_stream(name: str | None, name_opt: str | None, events_only: bool) -> None:
    """Stream a job's logs (the newest job without a name) until it ends; exits non-zero if it failed."""
    from distrun.runner.job_kinds import row_of
    from distrun.runner.jobs import get_job, stream_job

    chosen = _job_name(name, name_opt)
    with _still_running_on_interrupt(chosen):
        record = get_job(_layout(), chosen)
        if row_of(record).has_children:
            final = _stream_pipeline(record, events_only)
        else:
            final = stream_job(_layout(), chosen, sys.stdout.buffer, click.echo, color=_color(sys.stdout))
    sys.exit(_exit_code(final.status))


def _stream_pipeline(record: Any, events_only: bool = False) -> Any:
    """A pipeline's (or sweep's) stream: its own event lines (a detached parent's, from its
    launcher.txt) and every step's (trial's) logs as they come, prefixed by step (not with
    `events_only`), then its summary (a sweep's: its trials ranked and the best)."""
    import threading

    from distrun.cli.parent_events import ParentEvents
    from distrun.cli.pipeline_logs import show_pipeline_logs
    from distrun.runner.job_kinds import row_of
    from distrun.runner.jobs import get_job

    layout, row, out, lock = _layout(), row_of(record), sys.stdout.buffer, threading.Lock()
    echo(f"RunId: {record.name}" + ("" if events_only else f"\nStreaming the logs of its {row.children}' jobs"))
    sys.stdout.flush()
    events = ParentEvents(layout.job(record.name), record.name, out, lock)

    def ended() -> bool:
        return get_job(layout, record.name).terminal

    if events_only:
        events.follow(ended)
    else:
        thread = threading.Thread(target=events.follow, args=(ended,), name="parent-events", daemon=True)
        thread.start()
        show_pipeline_logs(layout, record, out, follow=True, tail=None, color=_color(sys.stdout), lock=lock)
        while thread.is_alive():
            thread.join(0.2)  # a bounded join: Ctrl-C is still taken
    if events.unread:  # the reader went away (`| head`): distrun.cli.stdout_reader
        raise BrokenPipeError(errno.EPIPE, "the reader of the stream went away")
    final = get_job(layout, record.name)
    echo(row.summary(final))
    return final


cli.add_command(job_stream, "stream")  # `distrun stream NAME`, as `distrun logs` is also `job logs`


@contextlib.contextmanager
def _still_running_on_interrupt(name: str) -> Iterator[None]:
    """Ctrl-C while following a job stops the following, not the job: say so."""
    try:
        yield
    except KeyboardInterrupt:
        echo(
            f"\ndistrun: stopped following {name}; the job keeps running (distrun job cancel {name} stops it)",
            err=True,
        )
        sys.exit(EXIT_CANCELED)


@job.command("cancel")
@_name_arg
def job_cancel(name: str | None, name_opt: str | None) -> None:
    """Cancel a job (the newest without a name): its processes get SIGTERM, then SIGKILL after the grace period."""
    from distrun.runner.jobs import cancel_job, get_job

    chosen = _job_name(name, name_opt)
    try:
        before = get_job(_layout(), chosen)
    except DistrunError:
        before = None  # no readable record: cancel_job finds the job by its processes
    if before is not None and before.terminal:
        raise JobAlreadyEndedError(before.name, before.status, before.reason)
    record = cancel_job(_layout(), chosen)
    echo(f"{record.name}: {record.status}" + (f" ({record.reason})" if record.reason else ""))


@job.command("stacks")
@_name_arg
@click.option("--native", is_flag=True, help="Native (C/C++) frames too, where py-spy can unwind them.")
@output_option(what="every thread of every process")
def job_stacks(name: str | None, name_opt: str | None, native: bool, output: str) -> None:
    """Every process's current Python stack (py-spy; the newest job's without a name), alike ones
    folded so the odd one out stands out."""
    from distrun.agent.stack_groups import group_stacks, grouped_text
    from distrun.runner.job_stacks import job_stacks as read_job_stacks

    chosen = _job_name(name, name_opt)
    answer = read_job_stacks(_layout(), chosen, native=native)
    if output != "table":
        shown = {
            "job": chosen,
            "processes": [p.to_dict() for p in answer.processes],
            "missing_nodes": answer.missing_nodes,
        }
        emit(shown, output, str)
    else:
        echo(grouped_text(group_stacks(answer.processes)).rstrip("\n"))
        for node in answer.missing_nodes:
            echo(f"node {node}: its node agent did not answer in time")
    if answer.missing_nodes:
        sys.exit(EXIT_FAILED)


@job.command("archive")
@_name_arg
@click.option("--restore", is_flag=True, help="List it again: undo an archive.")
def job_archive(name: str | None, name_opt: str | None, restore: bool) -> None:
    """Archive a job (the newest without a name, as the other job verbs: an archive is undone with
    --restore): `job list` leaves it out unless --include-archived; it stays whole, every verb still
    reaches it by name (as Azure ML's archive). --restore takes the job's name."""
    from distrun.store.index import JobIndex

    if restore and not (name or name_opt):
        raise DistrunError(
            "give the archived job to restore: NAME or -n NAME",
            "`distrun job list --include-archived` shows the archived jobs",
        )
    chosen = _job_name(name, name_opt)
    if not JobIndex(_layout().db_path).archive(chosen, archived=not restore):
        raise DistrunError(f"no job named {chosen!r}", "`distrun job list --include-archived` shows the jobs there are")
    echo(f"{chosen}: {'restored' if restore else 'archived'}")


@job.command("delete")
@click.argument("names", nargs=-1, shell_complete=_complete_job_names)
@click.option(
    "--name",
    "-n",
    "name_opts",
    multiple=True,
    help="A job to delete (as NAME; may be given again). Never the newest by default.",
    shell_complete=_complete_job_names,
)
@click.option(
    "--older-than",
    type=click.FloatRange(min=0),
    default=None,
    metavar="DAYS",
    help="Every ended job created more than DAYS days ago (archived ones too).",
)
def job_delete(names: tuple[str, ...], name_opts: tuple[str, ...], older_than: float | None) -> None:
    """Delete ended jobs, each one's record and folder (a pipeline's or sweep's: its steps' or
    trials' jobs too), to reclaim their space; a job that has not ended is refused. Give the
    names (NAME... or -n NAME), or --older-than DAYS. Unlike the other job verbs, delete never
    picks the newest job by itself: what it removes cannot be brought back (`job archive`, which
    can be undone, does)."""
    from distrun.runner.jobs import get_job, list_jobs
    from distrun.store.index import JobFilter
    from distrun.store.job_removal import delete_job

    names = (*names, *name_opts)
    if not names and older_than is None:
        raise DistrunError(
            "job delete needs the jobs' names: it removes their records and files for good, so it never "
            "picks the newest job by itself as the other job verbs do",
            "distrun job delete NAME... (or -n NAME; `distrun job list` shows the names), or --older-than DAYS; "
            "`distrun job archive` hides a job and can be undone",
        )
    layout = _layout()
    if older_than is None:
        records = [get_job(layout, _job_name(name, None)) for name in names]
    else:
        cutoff = time.time() - older_than * 86400
        records = [r for r in list_jobs(layout, -1, JobFilter(children=False, older_than=cutoff)) if r.terminal]
    freed = 0
    for record in records:
        for gone in delete_job(layout, record):
            freed += gone.freed_bytes
            echo(f"deleted {gone.name}")
    echo(f"{len(records)} job{'s' if len(records) != 1 else ''} deleted, {freed / 1e6:.1f} MB freed")


@job.command("download")
@_name_arg
@click.option(
    "--download-path", "-p", default=".", type=click.Path(file_okay=False), help="The folder to download into."
)
@click.option("--output-name", default=None, help="Download only this named output.")
@click.option("--all", "all_", is_flag=True, help="Artifacts and every named output.")
def job_download(
    name: str | None, name_opt: str | None, download_path: str, output_name: str | None, all_: bool
) -> None:
    """Download a finished job's artifacts and named outputs (the newest job's without a name; a pipeline's:
    each step's, in a folder per step)."""
    from distrun.runner.job_kinds import row_of
    from distrun.runner.jobs import get_job

    chosen = _job_name(name, name_opt)
    download = row_of(get_job(_layout(), chosen)).download
    written = download(_layout(), chosen, Path(download_path), output_name, all_)
    for path in written:
        echo(f"Downloaded {path}")


# ---------------------------------------------------------------- logs


@cli.command()
@_name_arg
@click.option("--rank", type=int, default=None, help="Only this rank's log.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option("--tail", type=int, default=None, help="Only the last N lines of each log.")
def logs(name: str | None, name_opt: str | None, rank: int | None, follow: bool, tail: int | None) -> None:
    """Print a job's per-process logs (the newest job without a name), each line prefixed with its process.
    A pipeline's: every step's, each line prefixed with its step too; PIPELINE/STEP: one step's."""
    from distrun.cli.logs_view import show_logs
    from distrun.runner.job_kinds import row_of
    from distrun.runner.jobs import get_job

    chosen = _job_name(name, name_opt)
    with _still_running_on_interrupt(chosen):
        record = get_job(_layout(), chosen)
        if row_of(record).has_children:
            if rank is not None:
                raise DistrunError(
                    f"{chosen} is a pipeline: --rank is a rank of one step's job",
                    f"e.g. distrun logs {chosen}/STEP --rank {rank}",
                )
            from distrun.cli.pipeline_logs import show_pipeline_logs

            show_pipeline_logs(_layout(), record, sys.stdout.buffer, follow=follow, tail=tail, color=_color(sys.stdout))
            return
        show_logs(_layout(), chosen, rank=rank, follow=follow, tail=tail, color=_color(sys.stdout))


job.add_command(logs, "logs")  # `distrun job logs NAME`, as `distrun job stream` is also `distrun stream`


# ---------------------------------------------------------------- metrics and the web UI


@cli.command()
@_name_arg
@click.option("--follow", "-f", is_flag=True, help="Keep printing new points until the job ends.")
@output_option(what="every point: metric, step, timestamp, value")
def metrics(name: str | None, name_opt: str | None, follow: bool, output: str) -> None:
    """Print a job's metrics (the newest job's without a name; logged with mlflow.log_metric or
    Run.log), one point a line."""
    from distrun.cli.metrics_view import print_metrics

    print_metrics(_layout(), _job_name(name, name_opt), follow=follow, output=output)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", "-p", default=0, show_default=True, help="Port (0: a free one).")
@click.option("--expose", is_flag=True, help="Allow a non-loopback --host: anyone reaching it sees and cancels jobs.")
@click.option("--allow-host", multiple=True, metavar="NAME", help="Also answer to this Host name (repeatable).")
def ui(host: str, port: int, expose: bool, allow_host: tuple[str, ...]) -> None:
    """A web page of jobs: list, status, per-rank table, live logs, metrics, outputs, cancel."""
    from distrun.ui.server import serve

    serve(_layout(), host, port, expose, allow_host)


# ---------------------------------------------------------------- compute


@cli.group()
def compute() -> None:
    """Compute targets (local is built in; others live in $DISTRUN_HOME/config.yaml)."""


@compute.command("create")
@resource_file_option("A compute YAML: name, type and the target's settings (--set changes its keys).")
@click.option("--name", "-n", default=None, help="The target's name, which jobs give as `compute:`.")
@click.option("--type", "kind", default=None, type=click.Choice(USER_KINDS), help="The engine that runs its jobs.")
@_set_option
@output_option(what="the target")
def compute_create(
    file: str | None, name: str | None, kind: str | None, overrides: tuple[str, ...], output: str
) -> None:
    """Define a compute target, e.g. --name hpc --type slurm --set partition=debug, or --file compute.yml."""
    from distrun.prepare.compute import add_target

    settings: dict[str, Any] = {}
    if file is not None:
        from distrun.spec.resource_files import AZURE_CLUSTER_TYPE, read_compute_file

        found = read_compute_file(Path(file), list(overrides))
        for note in found.notes:
            click.echo(f"distrun: {note}", err=True)
        name = name or found.values["name"]
        kind = kind or found.values["type"] or None
        settings = dict(found.values["settings"])
        if kind == AZURE_CLUSTER_TYPE:
            _name_local_cluster(name, output)
            return
    else:
        from distrun.spec.overrides import parse_override

        for text in overrides:
            path, value = parse_override(text)
            settings[".".join(map(str, path))] = value
    if not name or not kind:
        raise DistrunError(
            "a compute target needs a name and a type",
            f"give --name NAME --type {{{','.join(USER_KINDS)}}} (or name: and type: in --file)",
        )
    if kind not in USER_KINDS:
        raise DistrunError(f"unknown compute type {kind!r}", "use " + ", ".join(USER_KINDS))
    from distrun.backends.registry import backend_for

    # An engine this install cannot run, or a misspelled setting, is caught now, not at the first job.
    backend_for(kind).validate_settings(name, settings)
    target = add_target(_layout().config_path, name, kind, settings)
    shown = {"name": target.name, "type": target.type, **target.settings}
    emit(shown, output, lambda: views().compute_table([shown]))


def _name_local_cluster(name: str, output: str) -> None:
    """An Azure ML cluster file (`type: amlcompute`): its name becomes a local target, as the SDK's AmlCompute."""
    from distrun.prepare.compute import name_local_target

    config = _layout().config_path
    target, added = name_local_target(config, name)
    if added:
        echo(
            f"distrun: compute {name} (type: amlcompute) is a local target: its jobs run on this machine, "
            f"each node simulated; added to {config}",
            err=True,
        )
    else:
        echo(f"distrun: compute {name} is already the {target.type} target in {config}; used as it is", err=True)
    shown = {"name": target.name, "type": target.type, **target.settings}
    emit(shown, output, lambda: views().compute_table([shown]))


@compute.command("list")
@output_option(what="the targets")
def compute_list(output: str) -> None:
    """List compute targets."""
    from distrun.prepare.compute import read_targets

    targets = read_targets(_layout().config_path)
    shown = [{"name": "local", "type": "local"}] + [
        {"name": t.name, "type": t.type, **t.settings} for t in targets.values()
    ]
    emit(shown, output, lambda: views().compute_table(shown))


def _target_name(func: Any) -> Any:
    func = click.option("--name", "-n", "name_opt", default=None, help="The target's name.")(func)
    return click.argument("name", required=False)(func)


def _chosen_target(name: str | None, name_opt: str | None) -> str:
    chosen = name or name_opt
    if not chosen:
        raise DistrunError(
            "give the compute target's name", "e.g. distrun compute show NAME (see `distrun compute list`)"
        )
    return chosen


@compute.command("show")
@_target_name
@output_option(what="the target and its settings")
def compute_show(name: str | None, name_opt: str | None, output: str) -> None:
    """One compute target: its type and settings."""
    from distrun.prepare.compute import resolve_target

    target = resolve_target(_chosen_target(name, name_opt), _layout().config_path)
    shown = {"name": target.name, "type": target.type, **target.settings}
    emit(shown, output, lambda: views().compute_table([shown]))


@compute.command("delete")
@_target_name
def compute_delete(name: str | None, name_opt: str | None) -> None:
    """Remove a compute target from config.yaml; jobs already sent to it keep the target they recorded."""
    from distrun.prepare.compute import remove_target

    chosen = _chosen_target(name, name_opt)
    remove_target(_layout().config_path, chosen)
    echo(f"compute {chosen}: deleted")


# ---------------------------------------------------------------- entry point


def main() -> None:
    started = time.monotonic()
    try:
        # One variable for shell completion however distrun was started (`python -m distrun` too).
        cli.main(standalone_mode=False, complete_var="_DISTRUN_COMPLETE")
    except DistrunError as exc:
        echo(f"distrun: error: {exc.render()}", err=True)
        sys.exit(exc.exit_code)
    except UnsafeFileError as exc:
        # A file that distrun reads only when it is a regular file (one a job can replace) is
        # not one: whichever reader met it, the user gets this, never a traceback.
        unsafe = DistrunError(str(exc), "a job's processes may have replaced it; distrun reads only regular files")
        echo(f"distrun: error: {unsafe.render()}", err=True)
        sys.exit(unsafe.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        echo("distrun: aborted", err=True)
        sys.exit(EXIT_CANCELED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    del started


def _register_envdata() -> None:
    from distrun.cli.components import component_group
    from distrun.cli.envdata import data_group, env_group
    from distrun.cli.models import model_group

    cli.add_command(env_group)
    # `az ml environment ...` spelled as Azure ML does: the same verbs, not listed twice in --help.
    cli.add_command(click.Group("environment", commands=env_group.commands, help=env_group.help, hidden=True))
    cli.add_command(data_group)
    cli.add_command(component_group)
    cli.add_command(model_group)


_register_envdata()
