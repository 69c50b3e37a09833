"""Only the user who started `distrun ui` can use it: any other local user reaching its port gets nothing.

A real `distrun ui` on 127.0.0.1 over a real running job. Whoever did not read the URL it printed
(another user of a shared login node: same loopback, no cookie) can neither read a page, a log
or a job's environment, nor cancel the job; with the printed URL the page works as before. No
answer may be framed by another site.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from distrun.ui.guard import form_token
from support.cli import distrun_cli
from support.jobs import four_rank_job, processes_of_job, record, wait_for
from support.reliability import job_file
from support.ui_server import UiServer, running_ui

pytestmark = pytest.mark.xdist_group("ui_access")  # one worker: the job and the server start once

SECRET = "hunter2-in-the-environment"
JOB = four_rank_job("python -c \"import time; print('sleeping', flush=True); time.sleep(300)\"") + (
    f"    environment_variables:\n      API_KEY: {SECRET}\n"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-access") / "home"


@pytest.fixture(scope="module")
def running(home: Path) -> Iterator[str]:
    """A job that runs until canceled, with a secret in its environment."""
    name = f"secret_job_{int(time.time() * 1000)}"  # unique: its processes are found by job name
    created = distrun_cli(home, "job", "create", "--file", str(job_file(home.parent / "job", JOB)), "--name", name)
    assert created.returncode == 0, created.stderr
    wait_for(lambda: record(home, name)["status"] == "Running", timeout=120)
    yield name
    distrun_cli(home, "job", "cancel", name)


@pytest.fixture(scope="module")
def ui(home: Path, running: str) -> Iterator[UiServer]:
    with running_ui(home) as server:
        yield server


def routes(name: str) -> list[tuple[str, str]]:
    return [
        ("GET", "/"),
        ("GET", "/fragments/jobs"),
        ("GET", f"/jobs/{name}"),
        ("GET", f"/jobs/{name}/fragments/summary"),
        ("GET", f"/jobs/{name}/fragments/metrics"),
        ("GET", f"/jobs/{name}/logs/events"),
        ("GET", f"/jobs/{name}/logs/std_log_process_00.txt"),
        ("GET", f"/jobs/{name}/files/outputs/x.txt"),
        ("GET", "/static/app.css"),
        ("POST", f"/jobs/{name}/cancel"),
    ]


def test_printed_url_carries_a_token_that_becomes_an_httponly_strict_cookie(ui: UiServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{32,}", ui.printed), ui.printed
    answer = ui.request("/?token=" + ui.token)
    assert answer.status == 303 and answer.headers["location"] == "/"  # the token leaves the address bar
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"distrun-ui-{ui.port}={ui.token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    kept = ui.request("/jobs/x?log=std_log_process_00.txt&token=" + ui.token)
    assert kept.headers["location"] == "/jobs/x?log=std_log_process_00.txt"


def test_without_the_token_no_route_answers_and_the_job_runs_on(ui: UiServer, home: Path, running: str) -> None:
    wrong = f"distrun-ui-{ui.port}=" + "x" * len(ui.token)
    cancel_form = f"token={form_token(ui.token)}".encode()
    for method, path in routes(running):
        body = cancel_form if method == "POST" else None
        for cookie, status in ((None, 401), (wrong, 403)):
            answer = ui.request(path, method=method, cookie=cookie, body=body)
            assert answer.status == status, (method, path, cookie, answer.status)
            assert "open the URL that `distrun ui` printed" in answer.text
            assert SECRET not in answer.text and "sleeping" not in answer.text
        assert ui.request(path + "?token=" + "y" * len(ui.token), method=method, body=body).status == 403
    assert record(home, running)["status"] == "Running"
    assert processes_of_job(running, home)


def test_with_the_token_the_page_works_and_carries_only_the_form_token(ui: UiServer, running: str) -> None:
    page = ui.get(f"/jobs/{running}")
    assert page.status == 200 and SECRET in page.text and "Cancel job" in page.text
    assert ui.token not in page.text  # the page holds the cancel form's token, not the login
    assert f'value="{form_token(ui.token)}"' in page.text
    assert ui.get("/static/app.css").status == 200
    bearer = ui.request("/fragments/jobs", headers={"Authorization": f"Bearer {ui.token}"})
    assert bearer.status == 200 and running in bearer.text


def test_no_answer_can_be_framed(ui: UiServer, running: str) -> None:
    for cookie in (None, ui.cookie):
        for method, path in routes(running)[:-1]:
            headers = ui.request(path, method=method, cookie=cookie, limit=0).headers  # the log never ends
            assert headers.get("x-frame-options") == "DENY", (path, cookie)
            assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), (path, cookie)
    foreign = ui.request("/", headers={"Host": "attacker.example"})
    assert foreign.status == 421 and foreign.headers.get("x-frame-options") == "DENY"


def test_cancel_needs_the_cookie_and_the_form_token(ui: UiServer, home: Path, running: str) -> None:
    path = f"/jobs/{running}/cancel"
    assert ui.request(path, method="POST", cookie=ui.cookie, body=b"token=" + ui.token.encode()).status == 403
    assert record(home, running)["status"] == "Running"
    done = ui.request(path, method="POST", cookie=ui.cookie, body=f"token={form_token(ui.token)}".encode(), timeout=120)
    assert done.status == 303 and urlsplit(done.headers["location"]).path == f"/jobs/{running}"
    assert record(home, running)["status"] == "Canceled"
    wait_for(lambda: not processes_of_job(running, home), timeout=30)
