"""The web UI through Starlette's test client, over real jobs run by the CLI (fast: no browser)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient  # the ui extra, installed by scripts/deps/60-ui.sh

from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from distrun.ui.app import UiSettings, create_app
from distrun.ui.charts import line_chart
from distrun.ui.guard import form_token, host_allowed
from distrun.ui.log_events import decode_cursor, encode_cursor
from support.cli import cli_env
from support.jobs import python_ranks, two_step_pipeline

# One worker runs this module, so its module-scoped server and jobs start once (tests/README.md).
pytestmark = pytest.mark.xdist_group("ui_app")

TOKEN = "test-token-123"
# Rank 2 fails only once every rank has printed both lines (a marker per rank in outputs, waited
# for up to 60 s): otherwise a slow start of another rank loses its lines to the gang stop. The
# others then wait to be stopped by distrun: one that ended on its own (a short sleep, on a machine
# slow enough that rank 2 saw the markers late) would not be "stopped by distrun" on the page.
FAILING = "r = int(os.environ['RANK']); print('line one', r, flush=True); print('line two', r, flush=True); " + (
    "os.makedirs('outputs/sub', exist_ok=True); open('outputs/sub/result.txt', 'w').write('42'); "
    "open('outputs/printed_' + str(r), 'w').close(); "
    "r == 2 and [t for t in range(1200) if len([n for n in os.listdir('outputs') if n[:8] == 'printed_']) < 4 "
    "and not time.sleep(0.05)]; "
    "r == 2 and sys.exit('bad batch on rank 2'); time.sleep(120)"
)


def run_cli_quietly(home: Path, file: Path, name: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(file), "--name", name],
        capture_output=True,
        timeout=180,
        env=cli_env(home, {"DISTRUN_MLFLOW": "0"}),
    )


def run_job(home: Path, folder: Path, body: str, name: str) -> None:
    (folder / "src").mkdir(parents=True)
    job = folder / "job.yml"
    job.write_text(textwrap.dedent(python_ranks(body, grace=2)))
    run_cli_quietly(home, job, name)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ui")
    home = base / "home"
    run_job(home, base / "ok", "print('fine', flush=True)", "good_job")
    run_job(home, base / "bad", FAILING, "bad_job")
    (base / "flow.yml").write_text(two_step_pipeline(display_name="<i>flow</i>"))  # the pipeline the pages draw
    run_cli_quietly(home, base / "flow.yml", "flow")
    index = JobIndex(home / "jobs.db")
    assert index.get("good_job").status == "Completed"
    assert index.get("bad_job").status == "Failed"
    assert index.get("flow").status == "Completed"
    return home


@pytest.fixture
def client(home: Path) -> Iterator[TestClient]:
    app = create_app(UiSettings(layout=Layout(home), token=TOKEN, allowed_hosts=("ui.example",)))
    with TestClient(app, base_url="http://127.0.0.1:8000") as test_client:
        # As a browser does with the URL `distrun ui` prints: the token becomes a cookie.
        assert test_client.get("/", params={"token": TOKEN}).status_code == 200
        yield test_client


def test_jobs_list_has_both_jobs_and_filters_by_status(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/htmx-2.0.11.min.js" in page.text
    rows = client.get("/fragments/jobs").text
    assert 'data-name="good_job" data-status="Completed"' in rows
    assert 'data-name="bad_job" data-status="Failed"' in rows
    assert "2 x 2" in rows
    failed_only = client.get("/fragments/jobs", params={"status": "Failed"}).text
    assert "bad_job" in failed_only and "good_job" not in failed_only
    by_name = client.get("/fragments/jobs", params={"q": "GOOD"}).text
    assert "good_job" in by_name and "bad_job" not in by_name


def test_failed_job_page_names_root_cause_with_traceback_and_log_link(client: TestClient) -> None:
    page = client.get("/jobs/bad_job").text
    assert re.search(r'id="root-cause">rank_2<', page)
    assert "bad batch on rank 2" in page
    assert 'href="/jobs/bad_job?log=std_log_process_02.txt#logs"' in page
    assert page.count('class="rank-row') == 4
    assert "stopped by distrun" in page and "exit 1" in page
    assert "RANK" in page and "MASTER_PORT" in page  # the plan, every process's environment
    assert "Cancel job" not in page  # it ended


def test_pipeline_page_draws_its_steps_linked_to_their_jobs_and_steps_link_back(client: TestClient) -> None:
    page = client.get("/jobs/flow").text
    assert "&lt;i&gt;flow&lt;/i&gt;" in page and "<i>flow" not in page  # the display name, escaped
    graph = re.search(r'<svg class="pipeline-graph".*?</svg>', page, re.S)
    assert graph is not None
    assert re.findall(r'data-step="(\w+)" data-state="(\w+)"', graph.group()) == [
        ("write", "Completed"),
        ("read", "Completed"),
    ]
    assert 'data-from="write" data-to="read"' in graph.group()
    assert '<a href="/jobs/flow.write">' in graph.group() and '<a href="/jobs/flow.read">' in graph.group()
    assert "every 2s" not in page and "Cancel pipeline" not in page  # it ended: no polling
    rows = client.get("/fragments/jobs").text
    assert re.search(r'data-name="flow" data-status="Completed".*?pipeline, 2 steps: 2 Completed', rows, re.S)
    step = client.get("/jobs/flow.read").text
    assert 'Step <b>read</b> of pipeline <a href="/jobs/flow">flow</a>' in step
    assert "written" in client.get("/jobs/flow.read/logs/events").text  # it read write's output


def test_a_running_pipelines_page_follows_its_steps(tmp_path: Path) -> None:
    import os
    import socket

    from distrun.store.index import JobRecord, process_start_time

    layout = Layout(tmp_path / "home")
    layout.home.mkdir()
    index = JobIndex(layout.db_path)
    steps = {
        "a": {"job": "live.a", "status": "Completed", "depends_on": [], "started_at": 1.0, "ended_at": 2.0},
        "b": {"job": "live.b", "status": "Running", "depends_on": ["a"], "started_at": 2.0},
    }
    pid = os.getpid()  # a live supervisor: this process, so no reader calls the pipeline lost
    index.insert(
        JobRecord(
            name="live",
            status="Running",
            compute="pipeline",
            folder=str(layout.job("live").root),
            created_at=1.0,
            started_at=1.0,
            launcher_pid=pid,
            launcher_host=socket.gethostname(),
            launcher_started=process_start_time(pid),
            steps=steps,
        )
    )
    app = create_app(UiSettings(layout=layout, token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1:8000") as live:
        live.get("/", params={"token": TOKEN})
        page = live.get("/jobs/live").text
        assert 'hx-get="/jobs/live/fragments/summary" hx-trigger="every 2s"' in page
        assert 'data-step="b" data-state="Running"' in page and "Cancel pipeline" in page
        steps["b"].update(status="Completed", ended_at=4.0)
        index.update("live", steps=steps)
        index.update("live", status="Completed", ended_at=4.0)
        fragment = live.get("/jobs/live/fragments/summary").text
        assert 'data-step="b" data-state="Completed"' in fragment and "Completed · 2.0 s" in fragment
        assert "hx-trigger" not in fragment  # ended: the page stops asking


def test_missing_job_is_404(client: TestClient) -> None:
    assert client.get("/jobs/nope").status_code == 404


def test_log_events_resume_from_last_event_id(client: TestClient) -> None:
    whole = client.get("/jobs/bad_job/logs/events", params={"log": "std_log_process_01.txt"}).text
    assert "data: line one 1" in whole and "data: line two 1" in whole and "event: end" in whole
    first_line = len(b"up 1\n") + len(b"line one 1\n")
    cursor = encode_cursor({"std_log_process_01.txt": first_line})
    resumed = client.get(
        "/jobs/bad_job/logs/events", params={"log": "std_log_process_01.txt"}, headers={"Last-Event-ID": cursor}
    ).text
    assert "line one" not in resumed and "data: line two 1" in resumed


def test_merged_log_has_prefixes(client: TestClient) -> None:
    merged = client.get("/jobs/bad_job/logs/events").text
    assert "data: [1/2] line one 2" in merged and "data: [0/0] line one 0" in merged


def test_outputs_download_and_no_escape(client: TestClient) -> None:
    page = client.get("/jobs/bad_job").text
    assert "outputs/sub/result.txt" in page
    assert client.get("/jobs/bad_job/files/outputs/sub/result.txt").content == b"42"
    for bad in ("outputs/../job.yml", "outputs/%2e%2e/job.yml", "code/job.yml", "outputs/sub"):
        assert client.get(f"/jobs/bad_job/files/{bad}").status_code == 404, bad


def test_link_planted_in_outputs_is_not_served(client: TestClient, home: Path) -> None:
    outputs = Layout(home).job("good_job").code / "outputs"
    outputs.mkdir(exist_ok=True)
    (outputs / "secret").symlink_to("/etc/passwd")
    assert client.get("/jobs/good_job/files/outputs/secret").status_code == 404
    assert "secret" not in client.get("/jobs/good_job").text


def test_foreign_host_header_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 421
    assert client.get("/", headers={"Host": "ui.example:8000"}).status_code == 200
    assert client.get("/", headers={"Host": "localhost:8000"}).status_code == 200


def test_cancel_needs_the_token(client: TestClient) -> None:
    refused = client.post("/jobs/good_job/cancel", data={"token": "wrong"})
    assert refused.status_code == 403
    assert client.post("/jobs/good_job/cancel").status_code == 403
    # The access token is not the form token: the page carries only the latter.
    assert client.post("/jobs/good_job/cancel", data={"token": TOKEN}).status_code == 403
    done = client.post("/jobs/good_job/cancel", data={"token": form_token(TOKEN)}, follow_redirects=False)
    assert done.status_code == 303  # an ended job stays as it was
    assert "Completed" in client.get("/jobs/good_job/fragments/summary").text


def test_host_rules() -> None:
    assert host_allowed("127.0.0.1:80", ())
    assert host_allowed("[::1]:8080", ())
    assert host_allowed("localhost", ())
    assert not host_allowed("rebind.attacker.example:80", ())
    assert not host_allowed(None, ())
    assert host_allowed("box.lan", ("box.lan",))


def test_cursor_round_trip_and_garbage() -> None:
    offsets = {"std_log_process_00.txt": 10, "std_log_node_00_worker.txt": 3}
    assert decode_cursor(encode_cursor(offsets)) == offsets
    assert decode_cursor("../../etc/passwd.txt:5,x:y,") == {}


def test_chart_has_every_point() -> None:
    from distrun.metrics.history import MetricPoint

    svg = line_chart("loss", [MetricPoint(step, 0.0, 1 / (step + 1)) for step in range(5)])
    assert svg.count('class="point"') == 5
    assert 'data-step="4" data-value="0.2"' in svg


def test_duration_of_an_ended_job_is_never_shorter_than_its_first_failure() -> None:
    from distrun.store.index import JobRecord
    from distrun.ui.job_view import duration

    # The record's start is noted once the processes are up; their times count from launch, so a
    # failure can come "after 3 s" of a job whose record says it ran 1 s.
    record = JobRecord(
        name="j",
        status="Failed",
        compute="local",
        folder="/nonexistent",
        created_at=100.0,
        started_at=101.0,
        ended_at=102.0,
        root_cause={"name": "rank_1", "after_ms": 3000.0},
    )
    assert duration(record) == "3.0 s"
    running = JobRecord(name="r", status="Running", compute="local", folder="/x", created_at=100.0, started_at=101.0)
    assert duration(running, now=111.5) == "10.5 s"


def test_ui_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from distrun.core.errors import DistrunError
    from distrun.ui import server

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "uvicorn" else real(name))
    with pytest.raises(DistrunError) as caught:
        server.check_installed()
    assert 'pip install "distrun[ui]"' in caught.value.render() and "uvicorn" in caught.value.render()


def test_non_loopback_address_needs_expose(tmp_path: Path) -> None:
    from distrun.core.errors import DistrunError
    from distrun.ui import server

    with pytest.raises(DistrunError) as caught:
        server.serve(Layout(tmp_path), "0.0.0.0", 0, expose=False, allow_hosts=())
    text = caught.value.render()
    assert "--expose" in text and "environment variables" in text and "cancel jobs" in text


def test_a_read_that_never_ends_is_given_up_and_counted_until_it_does() -> None:
    import threading

    import anyio

    from distrun.ui.offload import Offload, Overloaded, SlowRead

    offload = Offload(seconds=0.2, stuck_limit=2)
    release = threading.Event()
    ran: list[str] = []

    def stuck() -> None:
        release.wait(60)  # a read the kernel never finishes, until the test lets it

    async def scenario() -> None:
        for _ in range(2):
            with pytest.raises(SlowRead):
                await offload(stuck)
        assert offload.stuck == 2
        with pytest.raises(Overloaded):  # refused at once: no third thread for the same fate
            await offload(ran.append, "refused")
        release.set()
        with anyio.fail_after(30):
            while offload.stuck:
                await anyio.sleep(0.01)
        assert await offload(lambda: 42) == 42  # once they end, calls run again

    anyio.run(scenario)
    assert ran == []
