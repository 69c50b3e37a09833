"""The web UI against a job that tampers with its folder: no read through a link, no hang, no 500.

One real job runs once; each test takes a copy of its folder and record under a name of its own
(what the job's processes could do to that folder, done here after it ended, so each test starts
from the same files) and tampers with it: files swapped for named pipes, for a pipe a process
holds open, for links to devices; folders swapped for links to an outside folder holding a
secret; a hundred thousand metric names; a huge plan; a log of 40 MB. A real `distrun ui`
serves them on 127.0.0.1, and every request has a time limit, so a hang fails the test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from distrun.store.index import JobIndex
from support.cli import distrun_cli
from support.jobs import python_ranks
from support.reliability import job_file
from support.ui_server import UiServer, running_ui

pytestmark = pytest.mark.xdist_group("ui_hostile")  # one worker: the job and the server start once

SECRET = "SECRET-FROM-OUTSIDE-THE-JOB"
BODY = (
    "os.makedirs('outputs/sub', exist_ok=True); open('outputs/sub/result.txt', 'w').write('42'); "
    "print('line from rank', os.environ['RANK'], flush=True)"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ui-hostile")
    home = base / "home"
    done = distrun_cli(home, "run", str(job_file(base / "job", python_ranks(BODY))), "--name", "base_job")
    assert done.returncode == 0, done.stderr
    return home


@pytest.fixture(scope="module")
def ui(home: Path) -> Iterator[UiServer]:
    with running_ui(home) as server:
        yield server


def copy_of_job(home: Path, name: str) -> Path:
    """A copy of the real job's folder and record under `name`: the folder to tamper with."""
    index = JobIndex(home / "jobs.db")
    folder = home / "jobs" / name
    shutil.copytree(home / "jobs" / "base_job", folder, symlinks=True)
    index.insert(dataclasses.replace(index.get("base_job"), name=name, folder=str(folder)))
    return folder


def outside_folder(base: Path) -> Path:
    """A folder outside every job, shaped like a job folder, every file of it holding SECRET."""
    outside = base / "outside"
    (outside / "user_logs").mkdir(parents=True)
    (outside / "code" / "outputs").mkdir(parents=True)
    (outside / "user_logs" / "std_log_process_00.txt").write_text(f"{SECRET}\n")
    (outside / "code" / "outputs" / "planted.txt").write_text(SECRET)
    (outside / "job.yml").write_text(f"command: echo {SECRET}\n")
    plan = {"command": SECRET, "nodes": [{"node_rank": 0, "processes": [{"name": "rank_0", "env": {"X": SECRET}}]}]}
    (outside / "plan.json").write_text(json.dumps(plan))
    return outside


def every_route(name: str) -> list[str]:
    return [
        f"/jobs/{name}",
        f"/jobs/{name}/fragments/summary",
        f"/jobs/{name}/fragments/metrics",
        f"/jobs/{name}/logs/events",
        f"/jobs/{name}/logs/events?log=std_log_process_00.txt",
        f"/jobs/{name}/logs/std_log_process_00.txt",
        f"/jobs/{name}/logs/std_log_process_01.txt",
        f"/jobs/{name}/files/outputs/sub/result.txt",
        f"/jobs/{name}/stacks",
        "/fragments/jobs",
    ]


def test_files_swapped_for_pipes_and_device_links_answer_at_once_without_500(ui: UiServer, home: Path) -> None:
    folder = copy_of_job(home, "pipes_job")
    for name in ("job.yml", "plan.json", "job.json", "tracking.json", "user_logs/std_log_process_00.txt"):
        (folder / name).unlink(missing_ok=True)
        os.mkfifo(folder / name)
    (folder / "user_logs" / "std_log_process_01.txt").unlink()
    (folder / "user_logs" / "std_log_process_01.txt").symlink_to("/dev/zero")
    (folder / "code" / "outputs" / "sub" / "result.txt").unlink()
    os.mkfifo(folder / "code" / "outputs" / "sub" / "result.txt")
    # A pipe that a process of the job holds open: a reader finds no data and no end.
    held = os.open(folder / "plan.json", os.O_RDWR | os.O_NONBLOCK)
    try:
        answers = {route: ui.get(route) for route in every_route("pipes_job")}
    finally:
        os.close(held)
    for route, answer in answers.items():
        assert answer.status < 500, (route, answer.status, answer.text[:300])
    page = answers["/jobs/pipes_job"].text
    assert "plan.json: not shown" in page and "named pipe" in page and "job.yml: not shown" in page
    assert answers["/jobs/pipes_job/logs/std_log_process_00.txt"].status == 409
    assert "named pipe, not a regular file" in answers["/jobs/pipes_job/logs/std_log_process_00.txt"].text
    assert answers["/jobs/pipes_job/logs/std_log_process_01.txt"].status == 409
    assert "symbolic link" in answers["/jobs/pipes_job/logs/std_log_process_01.txt"].text
    assert answers["/jobs/pipes_job/files/outputs/sub/result.txt"].status == 404
    assert "not served" in answers["/jobs/pipes_job/files/outputs/sub/result.txt"].text
    merged = answers["/jobs/pipes_job/logs/events"].text
    assert "line from rank 3" in merged and "event: end" in merged  # the other ranks' logs still shown


@pytest.mark.parametrize("swapped", ["root", "user_logs", "code"])
def test_a_folder_swapped_for_a_link_is_never_read_through(
    ui: UiServer, home: Path, tmp_path: Path, swapped: str
) -> None:
    name = f"linked_{swapped}_job"
    folder = copy_of_job(home, name)
    outside = outside_folder(tmp_path)
    if swapped == "root":  # the job folder itself (its parent is DISTRUN_HOME/jobs, which the job can write)
        shutil.rmtree(folder)
        folder.symlink_to(outside, target_is_directory=True)
    else:
        shutil.rmtree(folder / swapped)
        (folder / swapped).symlink_to(outside / swapped, target_is_directory=True)
    routes = [*every_route(name), f"/jobs/{name}/files/outputs/planted.txt"]
    for route in routes:
        answer = ui.get(route)
        assert answer.status < 500, (route, answer.status, answer.text[:300])
        assert SECRET not in answer.text, route
    assert "planted.txt" not in ui.get(f"/jobs/{name}").text  # not even listed
    assert "symbolic link" in ui.get(f"/jobs/{name}/logs/std_log_process_00.txt").text or swapped == "code"


def test_requests_to_a_hostile_job_do_not_stop_the_other_routes(ui: UiServer, home: Path) -> None:
    folder = copy_of_job(home, "crowd_job")
    for name in ("tracking.json", "plan.json", "job.yml", "user_logs/std_log_process_00.txt"):
        (folder / name).unlink(missing_ok=True)
        os.mkfifo(folder / name)
    # More requests than the server has threads, most to the metrics part (it reads tracking.json).
    routes = ["/jobs/crowd_job/fragments/metrics"] * 60 + every_route("crowd_job")
    crowd = [threading.Thread(target=_ignoring_errors, args=(ui, route)) for route in routes]
    for thread in crowd:
        thread.start()
    try:
        # While those are in flight (or after), the rest of the UI answers, each within the time limit.
        assert ui.get("/fragments/jobs").status == 200
        assert "line from rank 1" in ui.get("/jobs/base_job/logs/std_log_process_01.txt").text
        assert ui.get("/jobs/base_job").status == 200
        assert ui.get("/static/app.css").status == 200
    finally:
        for thread in crowd:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in crowd)


def _ignoring_errors(ui: UiServer, route: str) -> None:
    try:
        ui.get(route, timeout=20)
    except OSError:
        pass  # this request's fate is not the point: the other routes' is


def test_pages_stay_bounded_for_a_job_with_huge_metrics_plan_and_log(ui: UiServer, home: Path) -> None:
    folder = copy_of_job(home, "huge_job")
    # A hundred thousand metric names, in a store the job wrote itself and named in its tracking file.
    store = folder / "metrics.db"
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, step INTEGER, run_uuid TEXT)")
        conn.executemany(
            "INSERT INTO metrics VALUES (?, ?, 0, ?, 'run1')",
            (
                (f"metric_{i:06d}_" + "x" * 300, i / 7, step)
                for i in range(100_000)
                for step in range(1 + (i < 20) * 999)
            ),
        )
    tracking = {"tracking_uri": f"sqlite:///{store}", "experiment_id": "1", "experiment_name": "e", "run_id": "run1"}
    (folder / "tracking.json").write_text(json.dumps(tracking))
    # 3,000 processes sharing an environment of 300 KB (under the 4 MB the page reads of a plan).
    env = {f"VAR_{i}": "v" * 1000 for i in range(300)}
    processes = [
        {"name": f"rank_{i}", "log_name": f"std_log_process_{i:02d}.txt", "label": f"0/{i}"} for i in range(3000)
    ]
    plan = {"command": "python train.py", "shared_env": env, "nodes": [{"node_rank": 0, "processes": processes}]}
    (folder / "plan.json").write_text(json.dumps(plan))
    # A log of 40 MB (sparse: nothing written but its last line).
    log = folder / "user_logs" / "std_log_process_00.txt"
    with log.open("r+b") as handle:
        handle.seek(40 << 20)
        handle.write(b"the last line\n")

    metrics = ui.get("/jobs/huge_job/fragments/metrics")
    assert metrics.status == 200 and len(metrics.body) < 1_500_000, len(metrics.body)
    assert "showing 12 charts and 200 of 100000 metrics" in metrics.text
    page = ui.get("/jobs/huge_job")
    assert page.status == 200 and len(page.body) < 4_000_000, len(page.body)
    assert "showing 1024 of 3000 processes" in page.text
    summary = ui.get("/jobs/huge_job/fragments/summary")
    assert summary.status == 200 and len(summary.body) < 1_000_000, len(summary.body)
    raw = ui.get("/jobs/huge_job/logs/std_log_process_00.txt")
    assert raw.status == 200 and len(raw.body) < 9_000_000, len(raw.body)
    assert "showing the last 8388608 of 41943054 bytes" in raw.text and raw.text.endswith("the last line\n")


HOSTILE_FUNCTION = "<script>alert(1)</script>"


def hung_copy(home: Path, name: str, processes: list[dict[str, object]]) -> Path:
    """A copy of the real job recorded as ended hung, with `processes` as its hang/stacks.json."""
    index = JobIndex(home / "jobs.db")
    folder = home / "jobs" / name
    shutil.copytree(home / "jobs" / "base_job", folder, symlinks=True)
    root = {
        "name": "rank_3",
        "node_rank": 1,
        "rank": 3,
        "host": "127.0.0.1",
        "after_ms": 5000.0,
        "reason": "hung: no progress for 5 s: rank 3 on node 1 is at stall at train.py:22",
        "traceback": 'Stack of rank 3 (pid 9, most recent call last):\n  File "train.py", line 22, in stall',
        "hang": "hang/stacks.json",
    }
    record = dataclasses.replace(
        index.get("base_job"), name=name, folder=str(folder), status="Failed", reason=root["reason"], root_cause=root
    )
    index.insert(record)
    (folder / "hang").mkdir()
    (folder / "hang" / "stacks.json").write_text(json.dumps({"reason": root["reason"], "processes": processes}))
    return folder


def stacks_of(rank: int, function: str, line: int) -> dict[str, object]:
    frames = [{"function": function, "file": "/x/train.py", "short_file": "train.py", "line": line}]
    thread = {"name": "MainThread", "os_thread_id": 100 + rank, "active": False, "frames": frames}
    return {
        "name": f"rank_{rank}",
        "who": f"rank {rank}",
        "node_rank": rank // 2,
        "pid": 100 + rank,
        "threads": [thread],
    }


def test_a_hung_job_shows_its_stacks_escaped_with_the_odd_rank_out(ui: UiServer, home: Path) -> None:
    processes = [stacks_of(r, HOSTILE_FUNCTION, 41) for r in range(3)] + [stacks_of(3, "stall", 22)]
    processes.append({"name": "rank_9", "who": "rank 9"})  # not what distrun writes: skipped
    hung_copy(home, "hung_job", processes)
    page = ui.get("/jobs/hung_job").text
    assert 'id="hang-stacks"' in page and "Stacks when it hung" in page
    assert "rank 3: stall at train.py:22" in page
    assert "3 processes (rank 0, 1, 2): &lt;script&gt;alert(1)&lt;/script&gt; at train.py:41" in page
    assert HOSTILE_FUNCTION not in page
    assert "rank 3 on node 1 is at stall at train.py:22" in page  # the reason, with the traceback
    # A job that is not running has no stacks to read now: the page says why, the job's stay on its page.
    asked = ui.get("/jobs/hung_job/stacks")
    assert (
        asked.status == 200 and "job hung_job is Failed: only a running job&#39;s processes have stacks" in asked.text
    )
    assert "hang/stacks.txt" in asked.text


def test_hang_stacks_swapped_for_a_link_are_not_read(ui: UiServer, home: Path, tmp_path: Path) -> None:
    folder = hung_copy(home, "hung_linked_job", [])
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"processes": [stacks_of(0, SECRET, 1)]}))
    (folder / "hang" / "stacks.json").unlink()
    (folder / "hang" / "stacks.json").symlink_to(secret)
    page = ui.get("/jobs/hung_linked_job")
    assert page.status == 200 and SECRET not in page.text
    assert "symbolic link" in page.text
