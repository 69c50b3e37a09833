"""The web application of `distrun ui`: routes, each a thin view over the jobs and their files."""

from __future__ import annotations

import asyncio
import os
import time
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
from distrun.metrics.history import History, last_values, metric_history
from distrun.metrics.tracking import read_tracked_run
from distrun.store.index import JobRecord
from distrun.store.layout import Layout
from distrun.ui import job_view, log_events, outputs_tree
from distrun.ui.charts import line_chart, number
from distrun.ui.guard import host_allowed, new_token, token_matches
from distrun.ui.jobs_source import JobsSource

HERE = Path(__file__).parent
STATUSES = tuple(status.value for status in JobStatus)
LOG_POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 15.0
LOG_FETCH_SECONDS = 2.0  # how often an engine without a shared folder is asked for new log lines


@dataclass
class UiSettings:
    layout: Layout
    token: str = field(default_factory=new_token)
    allowed_hosts: tuple[str, ...] = ()
    log_poll: float = LOG_POLL_SECONDS


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


def create_app(settings: UiSettings) -> ASGIApp:
    source = JobsSource(settings.layout)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(clock=job_view.clock, number=number, quote=quote, statuses=STATUSES)

    def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    shapes: dict[str, str] = {}

    def shape_of(record: JobRecord) -> str:
        # "nodes x processes" from the resolved job, read once per job (it never changes).
        if record.name not in shapes:
            shapes[record.name] = job_view.job_shape(source.folder(record))
        return shapes[record.name]

    def record_or_404(name: str) -> JobRecord:
        try:
            return source.get(name)
        except JobNotFoundError:
            raise _NotFound(name) from None

    async def jobs_page(request: Request) -> Response:
        return page(request, "jobs.html", _filters(request))

    async def jobs_rows(request: Request) -> Response:
        filters = _filters(request)
        records = await run_in_threadpool(source.list, 500)
        rows = [r for r in records if _matches(r, filters["status"], filters["q"])]
        shapes = {r.name: shape_of(r) for r in rows}
        return page(request, "jobs_rows.html", {"rows": rows, "shapes": shapes, "duration": job_view.duration})

    async def job_page(request: Request) -> Response:
        name = request.path_params["name"]
        record = await run_in_threadpool(record_or_404, name)
        folder = source.folder(record)
        plan = await run_in_threadpool(job_view.read_plan, folder)
        chosen = request.query_params.get("log")
        context = {
            "job": record,
            "token": settings.token,
            "yaml": await run_in_threadpool(job_view.read_text, folder.job_yaml),
            "plan": job_view.plan_view(plan),
            "outputs": await run_in_threadpool(outputs_tree.list_outputs, folder),
            "log_choice": chosen if log_events.valid_log_name(chosen) else "",
            **_summary(record, plan),
        }
        return page(request, "job.html", context)

    async def job_summary(request: Request) -> Response:
        record = await run_in_threadpool(record_or_404, request.path_params["name"])
        plan = await run_in_threadpool(job_view.read_plan, source.folder(record))
        return page(request, "job_summary.html", {"job": record, "token": settings.token, **_summary(record, plan)})

    async def job_metrics(request: Request) -> Response:
        record = await run_in_threadpool(record_or_404, request.path_params["name"])
        history = await run_in_threadpool(_history, source, record)
        charts = [(name, line_chart(name, points)) for name, points in history.items() if points]
        return page(
            request,
            "job_metrics.html",
            {"job": record, "charts": charts, "last": last_values(history), "tracked": _tracked(source, record)},
        )

    async def log_stream(request: Request) -> Response:
        record = await run_in_threadpool(record_or_404, request.path_params["name"])
        folder = source.folder(record)
        only = request.query_params.get("log") or None
        if only is not None and not log_events.valid_log_name(only):
            return PlainTextResponse("no such log", status_code=404)
        cursor = request.headers.get("last-event-id") or request.query_params.get("cursor")
        offsets = log_events.decode_cursor(cursor)

        async def events() -> Any:
            nonlocal offsets
            quiet_since = time.monotonic()
            fetched = 0.0
            yield "retry: 1000\n\n"
            while True:
                current = await run_in_threadpool(source.get, record.name)
                ended = current.terminal
                if time.monotonic() - fetched > LOG_FETCH_SECONDS or ended:
                    await run_in_threadpool(source.fetch_logs, current)
                    fetched = time.monotonic()
                batch = await run_in_threadpool(log_events.read_batch, folder, offsets, only, ended)
                if batch.lines:
                    offsets = batch.offsets
                    yield log_events.sse_event(batch)
                    quiet_since = time.monotonic()
                    continue
                if ended:
                    yield f"id: {log_events.encode_cursor(offsets)}\nevent: end\ndata: {record.status}\n\n"
                    return
                if time.monotonic() - quiet_since > HEARTBEAT_SECONDS:
                    yield ": still here\n\n"  # keeps proxies and the browser from timing out
                    quiet_since = time.monotonic()
                await asyncio.sleep(settings.log_poll)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def raw_log(request: Request) -> Response:
        record = await run_in_threadpool(record_or_404, request.path_params["name"])
        log_name = request.path_params["log"]
        if not log_events.valid_log_name(log_name):
            return PlainTextResponse("no such log", status_code=404)
        path = source.folder(record).user_logs / log_name
        text = await run_in_threadpool(job_view.read_text, path, 32 << 20)
        return PlainTextResponse(text)

    async def download(request: Request) -> Response:
        record = await run_in_threadpool(record_or_404, request.path_params["name"])
        area, relative = request.path_params["area"], request.path_params["path"]
        fd = await run_in_threadpool(outputs_tree.open_output, source.folder(record), area, relative)
        if fd is None:
            return PlainTextResponse(f"{area}/{relative}: no such file in this job's outputs", status_code=404)
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
        name = request.path_params["name"]
        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        if not token_matches((form.get("token") or [None])[0], settings.token):
            return PlainTextResponse("cancel refused: this form is not from this distrun ui", status_code=403)
        await run_in_threadpool(record_or_404, name)
        try:
            await run_in_threadpool(source.cancel, name)
        except DistrunError as exc:
            return PlainTextResponse(f"cancel failed: {exc.render()}", status_code=500)
        return RedirectResponse(f"/jobs/{quote(name)}", status_code=303)

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
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ],
        exception_handlers={_NotFound: _not_found},
    )
    return HostCheck(app, settings.allowed_hosts)


class _NotFound(Exception):
    pass


async def _not_found(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"no job named {exc.args[0]!r}", status_code=404)


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
    return {
        "live": not record.terminal,
        "timeline": job_view.timeline(record),
        "duration": job_view.duration(record),
        "failure": job_view.failure(record),
        "ranks": job_view.rank_rows(record, plan),
        "nodes": len(plan.get("nodes") or []) if isinstance(plan.get("nodes"), list) else None,
    }


def _tracked(source: JobsSource, record: JobRecord) -> bool:
    return read_tracked_run(source.folder(record)) is not None


def _history(source: JobsSource, record: JobRecord) -> History:
    run = read_tracked_run(source.folder(record))
    return metric_history(run) if run is not None else {}
