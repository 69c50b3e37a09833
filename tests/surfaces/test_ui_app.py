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


# Two no-op trials (about a second, untracked): one Completed with a hostile choice value, one
# Failed; untracked, no trial is ranked, so the sweep is Failed. Their metrics come in
# test_a_running_sweeps_page_follows_its_trials.
HOSTILE = "<img src=x onerror=alert(1)>"
SWEEP = f"""\
type: sweep
trial:
  command: test ${{{{search_space.opt}}}} != fail
search_space:
  opt: {{type: choice, values: ["{HOSTILE}", fail]}}
  lr: {{type: choice, values: [0.5]}}
sampling_algorithm: grid
objective: {{goal: minimize, primary_metric: loss}}
limits: {{max_total_trials: 4, trial_timeout: 60}}
"""


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
    (base / "sweep.yml").write_text(SWEEP)
    run_cli_quietly(home, base / "sweep.yml", "tune")
    index = JobIndex(home / "jobs.db")
    assert index.get("good_job").status == "Completed"
    assert index.get("bad_job").status == "Failed"
    assert index.get("flow").status == "Completed"
    assert index.get("tune").status == "Failed"  # no trial could be ranked
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


def _running_parent(layout: Layout, name: str, **fields: object) -> JobIndex:
    """A running pipeline's or sweep's record in a new DISTRUN_HOME, its supervisor this live
    process (so no reader calls it lost)."""
    import os
    import socket

    from distrun.store.index import JobRecord, process_start_time

    layout.home.mkdir()
    index = JobIndex(layout.db_path)
    pid = os.getpid()
    record = JobRecord(
        name=name,
        status="Running",
        folder=str(layout.job(name).root),
        created_at=1.0,
        started_at=1.0,
        launcher_pid=pid,
        launcher_host=socket.gethostname(),
        launcher_started=process_start_time(pid),
        **fields,  # type: ignore[arg-type]
    )
    index.insert(record)
    return index


def test_a_running_pipelines_page_follows_its_steps(tmp_path: Path) -> None:
    steps = {
        "a": {"job": "live.a", "status": "Completed", "depends_on": [], "started_at": 1.0, "ended_at": 2.0},
        "b": {"job": "live.b", "status": "Running", "depends_on": ["a"], "started_at": 2.0},
    }
    layout = Layout(tmp_path / "home")
    index = _running_parent(layout, "live", compute="pipeline", steps=steps)
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


def test_sweep_page_lists_its_trials_links_them_and_escapes_their_parameters(client: TestClient) -> None:
    page = client.get("/jobs/tune").text
    assert re.search(r"Objective</th><td>minimize <b>loss</b>", page) and "Sampling</th><td>grid</td>" in page
    assert "max_total_trials 4 · trial_timeout 60 s · at once 2" in page
    rows = re.findall(r'<tr class="trial-row state-(\w+)" data-trial="(\w+)">(.*?)</tr>', page, re.S)
    assert [(state, key) for state, key, _ in rows] == [("completed", "trial_0"), ("failed", "trial_1")]
    completed, failed = rows[0][2], rows[1][2]
    assert '<a href="/jobs/tune.trial_0">tune.trial_0</a>' in completed
    assert '<td class="param">&lt;img src=x onerror=alert(1)&gt;</td><td class="param">0.5</td>' in completed
    assert HOSTILE not in page  # the choice value, escaped wherever it lands
    assert '<a href="/jobs/tune.trial_1">' in failed and "exited with code 1" in failed
    assert "Best trial: none (no completed trial logged loss)" in page and "No trial has logged loss yet" in page
    assert "every 2s" not in page and "Cancel sweep" not in page  # it ended
    listed = client.get("/fragments/jobs").text
    assert re.search(r'data-name="tune" data-status="Failed">.*?sweep, 2 trials: 1 Completed, 1 Failed', listed, re.S)
    assert 'trial of <a href="/jobs/tune">tune</a>' in listed
    trial = client.get("/jobs/tune.trial_0").text
    assert 'Trial <b>trial_0</b> of sweep <a href="/jobs/tune">tune</a>' in trial


def _points(svg: str) -> list[tuple[str, str, float, float, float]]:
    """(trial, x value, metric, cx, cy) of each point of a chart."""
    found = re.findall(
        r'<circle class="point [^"]*" cx="([\d.]+)" cy="([\d.]+)" r="[\d.]+" data-trial="(\w+)" '
        r'data-x="([^"]*)" data-value="([^"]*)">',
        svg,
    )
    return [(trial, x, float(value), float(cx), float(cy)) for cx, cy, trial, x, value in found]


def test_a_running_sweeps_page_follows_its_trials_and_plots_their_metric(home: Path, tmp_path: Path) -> None:
    """The record of the sweep that ran, back to Running under a live supervisor (this process),
    its trials' states changed as the sweep's supervisor changes them: started, each value of the
    primary metric logged, ended."""
    ran = JobIndex(home / "jobs.db").get("tune")
    first, second = ran.steps["trial_0"], ran.steps["trial_1"]
    trials = {"trial_0": {**first, "status": "Running", "ended_at": None}}
    layout = Layout(tmp_path / "home")
    index = _running_parent(layout, "tune", compute="sweep", steps=trials, sweep={**ran.sweep, "best": None})
    app = create_app(UiSettings(layout=layout, token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1:8000") as live:
        live.get("/", params={"token": TOKEN})
        page = live.get("/jobs/tune").text
        assert 'hx-get="/jobs/tune/fragments/summary" hx-trigger="every 2s"' in page and "Cancel sweep" in page
        assert "Best trial: none yet" in page and "No trial has logged loss yet" in page

        trials["trial_0"].update(metric=0.7, intervals=1)  # its first value
        index.update("tune", steps=trials)
        fragment = live.get("/jobs/tune/fragments/summary").text
        by_trial = re.search(r'<svg class="chart sweep-chart" data-chart="trial".*?</svg>', fragment, re.S)
        assert by_trial and [p[:3] for p in _points(by_trial.group())] == [("trial_0", "0", 0.7)]
        assert "Best trial: none yet" in fragment  # a running trial is not the best yet

        trials["trial_0"].update(status="Completed", metric=0.5, intervals=2, ended_at=first["started_at"] + 2)
        trials["trial_1"] = {**second, "status": "Running", "reason": None, "ended_at": None, "metric": 0.9}
        trials["trial_2"] = {**first, "job": "tune.trial_2", "number": 2, "metric": 0.3, "intervals": 2}
        trials["trial_2"]["parameters"] = {"opt": "fail", "lr": 0.5}
        index.update("tune", steps=trials)
        fragment = live.get("/jobs/tune/fragments/summary").text
        order = re.findall(r'<tr class="trial-row [^"]*" data-trial="(\w+)">', fragment)
        assert order == ["trial_2", "trial_0", "trial_1"]  # minimize loss: best first
        assert re.search(r'Best so far:</b>\s*<a id="best-link" href="/jobs/tune.trial_2">trial_2</a>', fragment)
        assert '<span id="best-metric">0.3</span>' in fragment and "opt=fail lr=0.5" in fragment
        charts = {
            m.group(1): m.group()
            for m in re.finditer(r'<svg class="chart sweep-chart" data-chart="([^"]+)".*?</svg>', fragment, re.S)
        }
        assert sorted(charts) == ["lr", "opt", "trial"]
        points = _points(charts["trial"])
        assert sorted(p[:3] for p in points) == [("trial_0", "0", 0.5), ("trial_1", "1", 0.9), ("trial_2", "2", 0.3)]
        height = {p[0]: p[4] for p in points}
        assert height["trial_1"] < height["trial_0"] < height["trial_2"]  # a higher loss is drawn higher
        assert 'class="point state-completed best"' in charts["trial"]
        opt = _points(charts["opt"])  # a choice: one column per value, in the search space's order
        assert sorted(p[:3] for p in opt) == [
            ("trial_0", "&lt;img src=x onerror=alert(1)&gt;", 0.5),
            ("trial_1", "fail", 0.9),
            ("trial_2", "fail", 0.3),
        ]
        column = {p[0]: p[3] for p in opt}
        assert column["trial_0"] < column["trial_1"] == column["trial_2"]
        assert HOSTILE not in fragment

        best = {"trial": "trial_2", "job": "tune.trial_2", "parameters": {"opt": "fail", "lr": 0.5}, "metric": 0.3}
        index.update("tune", status="Completed", ended_at=9.0, sweep={**ran.sweep, "best": best})
        fragment = live.get("/jobs/tune/fragments/summary").text
        assert "Best trial:</b>" in fragment and "hx-trigger" not in fragment  # ended: the page stops asking


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
