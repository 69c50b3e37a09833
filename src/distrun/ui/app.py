"""The web application of `distrun ui`: routes, each a thin view over the jobs and their files."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from distrun.core.errors import DistrunError, JobNotFoundError
from distrun.core.job_status import JobStatus
from distrun.core.safe_files import UnsafeFileError
from distrun.metrics.history import History, metric_history
from distrun.runner.automl_results import automl_results
from distrun.runner.job_kinds import row_of
from distrun.runner.job_stacks import job_stacks as job_stacks_of
from distrun.runner.parallel_view import progress_line
from distrun.runner.sweep_run import is_trial_name
from distrun.store.index import JobRecord
from distrun.store.layout import JobFolder, Layout
from distrun.store.log_labels import labels_from_plan
from distrun.ui import (
    job_files,
    job_view,
    log_events,
    metrics_view,
    outputs_tree,
    pipeline_view,
    stacks_view,
    sweep_charts,
    sweep_view,
)
from distrun.ui.access import SecurityHeaders, TokenCheck
from distrun.ui.charts import number
from distrun.ui.guard import form_token, host_allowed, new_token, token_matches
from distrun.ui.jobs_source import JobsSource
from distrun.ui.models_view import models_page
from distrun.ui.offload import Offload, Overloaded, SlowRead

HERE = Path(__file__).parent
STATUSES = tuple(status.value for status in JobStatus)
LOG_POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 15.0
LOG_FETCH_SECONDS = 2.0  # how often an engine without a shared folder is asked for new log lines
READ_SECONDS = 10.0  # the most one read of the index or of a job's files may take before the request gives up
FETCH_SECONDS = 60.0  # the same for bringing an engine job's logs over
RAW_LOG_BYTES = 8 << 20  # the raw log shows at most its last this many bytes
MAX_RANK_ROWS = 1024  # process rows on a job page (a plan the job rewrote can name many more)


@dataclass
class UiSettings:
    layout: Layout
    token: str = field(default_factory=new_token)
    allowed_hosts: tuple[str, ...] = ()
    log_poll: float = LOG_POLL_SECONDS
    read_seconds: float = READ_SECONDS


class HostCheck:
    """Refuses any request whose Host header is not this server's (see distrun.ui.guard)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.allowed):
                response = PlainTextResponse(f"distrun ui does not answer for host {host!r}", status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@dataclass
class _Ui:
    """What every route reads: the jobs, the bounded reader, the cancel form's token, the pages."""

    settings: UiSettings
    source: JobsSource
    offload: Offload
    cancel_token: str
    templates: Jinja2Templates
    # "nodes x processes" of each job, from its resolved job: read once per job (it never changes).
    shapes: dict[str, str] = field(default_factory=dict)

    def page(self, request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    def shapes_of(self, records: list[JobRecord]) -> dict[str, str]:
        # A job's shape from its folder, once; a pipeline's steps or a sweep's trials and their
        # states from its record, each time (they change as it runs).
        for record in records:
            if not row_of(record).has_children and record.name not in self.shapes:
                self.shapes[record.name] = job_view.job_shape(self.source.folder(record))
        return {record.name: _shape(record, self.shapes) for record in records}

    def record_or_404(self, name: str) -> JobRecord:
        try:
            return self.source.get(name)
        except JobNotFoundError:
            raise _NotFound(name) from None


def _ui(request: Request) -> _Ui:
    return request.app.state.ui  # type: ignore[no-any-return]


def create_app(settings: UiSettings) -> ASGIApp:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(
        clock=job_view.clock,
        number=number,
        quote=quote,
        statuses=STATUSES,
        shown=sweep_view.shown_value,
        is_trial=is_trial_name,
    )
    app = Starlette(
        routes=[
            Route("/", jobs_page),
            Route("/fragments/jobs", jobs_rows),
            Route("/jobs/{name}", job_page),
            Route("/jobs/{name}/fragments/summary", job_summary),
            Route("/jobs/{name}/fragments/metrics", job_metrics),
            Route("/jobs/{name}/logs/events", log_stream),
            Route("/jobs/{name}/logs/{log}", raw_log),
            Route("/jobs/{name}/files/{area}/{path:path}", download),
            Route("/jobs/{name}/cancel", cancel, methods=["POST"]),
            Route("/jobs/{name}/stacks", job_stacks),
            Route("/models", models_page),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ],
        exception_handlers={
            _NotFound: _not_found,
            SlowRead: _unavailable,
            Overloaded: _unavailable,
            UnsafeFileError: _unsafe,
            DistrunError: _distrun_error,
        },
    )
    source, offload = JobsSource(settings.layout), Offload(settings.read_seconds)
    app.state.ui = _Ui(settings, source, offload, form_token(settings.token), templates)
    return SecurityHeaders(HostCheck(TokenCheck(app, settings.token), settings.allowed_hosts))


# ---------------------------------------------------------------- the routes


async def jobs_page(request: Request) -> Response:
    return _ui(request).page(request, "jobs.html", _filters(request))


async def jobs_rows(request: Request) -> Response:
    ui = _ui(request)
    filters = _filters(request)
    records = await ui.offload(ui.source.list, 500)
    rows = [r for r in records if _matches(r, filters["status"], filters["q"])]
    shown = await ui.offload(ui.shapes_of, rows)
    return ui.page(request, "jobs_rows.html", {"rows": rows, "shapes": shown, "duration": job_view.duration})


async def job_page(request: Request) -> Response:
    ui = _ui(request)
    name = request.path_params["name"]
    record = await ui.offload(ui.record_or_404, name)
    parent = _PARENT_PAGES.get(row_of(record).view)
    if parent is not None:  # all from its record: no file of a job folder is read
        context = {"job": record, "token": ui.cancel_token, **parent.context(record)}
        return ui.page(request, f"{parent.template}.html", context)
    folder = ui.source.folder(record)
    plan, plan_problem = await ui.offload(job_view.read_plan, folder)
    yaml = await ui.offload(job_view.job_yaml, folder)
    listing = await ui.offload(outputs_tree.list_outputs, folder)
    chosen = request.query_params.get("log")
    context = {
        "job": record,
        "token": ui.cancel_token,
        "yaml": yaml,
        "plan": job_view.plan_view(plan),
        "plan_problem": plan_problem,
        "outputs": listing,
        "log_choice": chosen if log_events.valid_log_name(chosen) else "",
        "step_of": pipeline_view.step_of(record),
        "parent_kind": "sweep" if record.parent and is_trial_name(record.name, record.parent) else "pipeline",
        "hang": await ui.offload(stacks_view.hang_view, record, folder),
        "parallel_progress": await ui.offload(progress_line, folder.root),
        "automl": await ui.offload(automl_results, ui.source.layout, record),  # an AutoML job's leaderboard
        **_summary(record, plan),
    }
    return ui.page(request, "job.html", context)


async def job_summary(request: Request) -> Response:
    ui = _ui(request)
    record = await ui.offload(ui.record_or_404, request.path_params["name"])
    parent = _PARENT_PAGES.get(row_of(record).view)
    if parent is not None:
        context = {"job": record, "token": ui.cancel_token, **parent.context(record)}
        return ui.page(request, f"{parent.template}_summary.html", context)
    plan, _ = await ui.offload(job_view.read_plan, ui.source.folder(record))
    hang = await ui.offload(stacks_view.hang_view, record, ui.source.folder(record))
    progress = await ui.offload(progress_line, ui.source.folder(record).root)  # a parallel step's
    context = {"job": record, "token": ui.cancel_token, "hang": hang, "parallel_progress": progress}
    context.update(_summary(record, plan))
    return ui.page(request, "job_summary.html", context)


async def job_stacks(request: Request) -> Response:
    """A running job's stacks, read now: the one page that acts (it asks the node agents, as
    `distrun job stacks` does); the read is bounded by the agents' own timeouts."""
    ui = _ui(request)
    name = request.path_params["name"]
    await ui.offload(ui.record_or_404, name)
    problem, view, missing = "", None, []
    try:
        answer = await run_in_threadpool(job_stacks_of, ui.settings.layout, name)
        view, missing = stacks_view.groups_view(answer.processes), answer.missing_nodes
    except DistrunError as exc:
        problem = exc.render()
    context = {"name": name, "view": view, "problem": problem, "missing": missing}
    return ui.page(request, "job_stacks.html", context)


async def job_metrics(request: Request) -> Response:
    ui = _ui(request)
    record = await ui.offload(ui.record_or_404, request.path_params["name"])
    tracked, history = await ui.offload(_history, ui.source.folder(record))
    shown = metrics_view.bounded(history)
    return ui.page(request, "job_metrics.html", {"job": record, "metrics": shown, "tracked": tracked})


async def _labels(ui: _Ui, folder: JobFolder) -> dict[str, tuple[str, int]]:
    plan, _ = await ui.offload(job_view.read_plan, folder)
    return labels_from_plan(plan)


async def _log_events_of(
    ui: _Ui, record: JobRecord, folder: JobFolder, only: str | None, offsets: dict[str, int]
) -> Any:
    """The events of the live log, from `offsets` until the job has ended and all is sent."""
    quiet_since = time.monotonic()
    fetched = 0.0
    names = await _labels(ui, folder) if only is None else {}
    while True:
        current = await ui.offload(ui.source.get, record.name)
        ended = current.terminal
        if time.monotonic() - fetched > LOG_FETCH_SECONDS or ended:
            fetched = time.monotonic()
            await ui.offload(ui.source.fetch_logs, current, seconds=FETCH_SECONDS)
        if only is None and not names:
            # The plan is written once the job starts: look again before each read until it is
            # there, so no line is sent under its file's name when its label was a moment away.
            names = await _labels(ui, folder)
        batch = await ui.offload(log_events.read_batch, folder, offsets, only, ended, names)
        if batch.lines:
            offsets = batch.offsets
            yield log_events.sse_event(batch)
            quiet_since = time.monotonic()
            continue
        if ended:
            yield f"id: {log_events.encode_cursor(offsets)}\nevent: end\ndata: {current.status}\n\n"
            return
        if time.monotonic() - quiet_since > HEARTBEAT_SECONDS:
            yield ": still here\n\n"  # keeps proxies and the browser from timing out
            quiet_since = time.monotonic()
        await asyncio.sleep(ui.settings.log_poll)


async def log_stream(request: Request) -> Response:
    ui = _ui(request)
    record = await ui.offload(ui.record_or_404, request.path_params["name"])
    folder = ui.source.folder(record)
    only = request.query_params.get("log") or None
    if only is not None and not log_events.valid_log_name(only):
        return PlainTextResponse("no such log", status_code=404)
    cursor = request.headers.get("last-event-id") or request.query_params.get("cursor")
    offsets = log_events.decode_cursor(cursor)

    async def events() -> Any:
        yield "retry: 1000\n\n"
        try:
            async for event in _log_events_of(ui, record, folder, only, offsets):
                yield event
        except (SlowRead, Overloaded, DistrunError) as exc:
            yield f"event: problem\ndata: {_one_line(exc)}\n\n"  # the browser reconnects and resumes

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def raw_log(request: Request) -> Response:
    ui = _ui(request)
    record = await ui.offload(ui.record_or_404, request.path_params["name"])
    log_name = request.path_params["log"]
    if not log_events.valid_log_name(log_name):
        return PlainTextResponse("no such log", status_code=404)
    folder = ui.source.folder(record)
    try:
        data, size = await ui.offload(job_files.read_tail, folder, folder.user_logs / log_name, RAW_LOG_BYTES)
    except FileNotFoundError:
        return PlainTextResponse(f"{log_name}: no such log in this job", status_code=404)
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text = f"[distrun ui: showing the last {len(data)} of {size} bytes: `distrun logs` shows all]\n" + text
    return PlainTextResponse(text)


async def download(request: Request) -> Response:
    ui = _ui(request)
    record = await ui.offload(ui.record_or_404, request.path_params["name"])
    area, relative = request.path_params["area"], request.path_params["path"]
    try:
        fd = await ui.offload(outputs_tree.open_output, ui.source.folder(record), area, relative)
    except FileNotFoundError:
        return PlainTextResponse(f"{area}/{relative}: no such file in this job's outputs", status_code=404)
    except UnsafeFileError as exc:
        return PlainTextResponse(f"{area}/{relative}: not served: {exc}", status_code=404)
    handle = os.fdopen(fd, "rb")

    def chunks() -> Any:
        with handle:
            while data := handle.read(1 << 16):
                yield data

    filename = quote(relative.rsplit("/", 1)[-1])
    return StreamingResponse(
        chunks(),
        media_type="application/octet-stream",
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
    )


async def cancel(request: Request) -> Response:
    ui = _ui(request)
    name = request.path_params["name"]
    form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
    if not token_matches((form.get("token") or [None])[0], ui.cancel_token):
        return PlainTextResponse("cancel refused: this form is not from this distrun ui", status_code=403)
    await ui.offload(ui.record_or_404, name)
    try:
        # Not under the read limit: a cancel waits for the job's grace period.
        await run_in_threadpool(ui.source.cancel, name)
    except DistrunError as exc:
        return PlainTextResponse(f"cancel failed: {exc.render()}", status_code=500)
    return RedirectResponse(f"/jobs/{quote(name)}", status_code=303)


# ---------------------------------------------------------------- answers and pieces


class _NotFound(Exception):
    pass


async def _not_found(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"no job named {exc.args[0]!r}", status_code=404)


async def _unavailable(request: Request, exc: Exception) -> Response:
    # The job's files or the index did not answer in time (a stalled file system, a locked index).
    return PlainTextResponse(f"distrun ui: {exc}; try again in a moment", status_code=503)


async def _unsafe(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"distrun ui: not shown: {exc}", status_code=409)


async def _distrun_error(request: Request, exc: Exception) -> Response:
    text = exc.render() if isinstance(exc, DistrunError) else str(exc)
    return PlainTextResponse(f"distrun ui: {text}", status_code=500)


def _one_line(exc: Exception) -> str:
    text = exc.render() if isinstance(exc, DistrunError) else str(exc)
    return " ".join(text.split())


def _filters(request: Request) -> dict[str, str]:
    status = request.query_params.get("status", "")
    return {"status": status if status in STATUSES else "", "q": request.query_params.get("q", "")[:200]}


def _matches(record: JobRecord, status: str, text: str) -> bool:
    if status and record.status != status:
        return False
    if text:
        haystack = " ".join(filter(None, (record.name, record.display_name, record.experiment_name))).lower()
        return text.lower() in haystack
    return True


def _summary(record: JobRecord, plan: dict[str, Any]) -> dict[str, Any]:
    ranks = job_view.rank_rows(record, plan)
    return {
        "live": not record.terminal,
        "timeline": job_view.timeline(record),
        "duration": job_view.duration(record),
        "failure": job_view.failure(record),
        "ranks": ranks[:MAX_RANK_ROWS],
        "ranks_total": len(ranks),
        "nodes": len(plan.get("nodes") or []) if isinstance(plan.get("nodes"), list) else None,
    }


def _state(record: JobRecord) -> dict[str, Any]:
    """Whether the page keeps asking, and the timeline and duration its status line shows."""
    return {"live": not record.terminal, "timeline": job_view.timeline(record), "duration": job_view.duration(record)}


def _pipeline_summary(record: JobRecord) -> dict[str, Any]:
    """A pipeline's page, all from its record: no file of a job folder is read."""
    steps = pipeline_view.step_views(record)
    return {
        **_state(record),
        "failure": pipeline_view.failed_step(record),
        "steps": steps,
        "graph": pipeline_view.graph_svg(steps),
        "graph_limit": pipeline_view.MAX_DRAWN,
    }


def _sweep_summary(record: JobRecord) -> dict[str, Any]:
    """A sweep's page, all from its record: no file of a job folder is read."""
    view = sweep_view.sweep_view(record)
    return {
        **_state(record),
        "sweep": view,
        "charts": sweep_charts.charts(view),
        "scored": sum(1 for trial in view.trials if trial.metric is not None),
        "point_limit": sweep_charts.MAX_POINTS,
        "row_limit": sweep_view.MAX_ROWS,
    }


@dataclass(frozen=True)
class _ParentPage:
    """How a view of jobs with children (`KindRow.view`) is shown: all from the parent's record."""

    template: str  # its page is TEMPLATE.html, the part that refreshes TEMPLATE_summary.html
    context: Callable[[JobRecord], dict[str, Any]]
    cell: Callable[[JobRecord], str]  # the jobs list's cell: its children and their states


_PARENT_PAGES = {
    "pipeline": _ParentPage("pipeline", _pipeline_summary, pipeline_view.counts),
    "sweep": _ParentPage("sweep", _sweep_summary, sweep_view.counts),
}


def _shape(record: JobRecord, shapes: dict[str, str]) -> str:
    """The jobs list's "nodes x processes / steps" cell: a job's shape, a pipeline's steps, a sweep's trials."""
    parent = _PARENT_PAGES.get(row_of(record).view)
    return shapes[record.name] if parent is None else parent.cell(record)


def _history(folder: JobFolder) -> tuple[bool, History]:
    """Whether the job is tracked, and its metrics ({} when it is not)."""
    run = job_files.tracked_run(folder)
    return run is not None, (metric_history(run) if run is not None else {})
