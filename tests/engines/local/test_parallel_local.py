"""Parallel steps on local compute: 2 simulated nodes x 2 processes pulling mini-batches of a
folder of files and of an MLTable from one queue, appending what one process appends over the
same input (order aside); and their failures: an init() that fails stops the step at once, a
mini-batch that fails every try fails it past its threshold naming the mini-batch, the process
and the traceback, and a process that dies is replaced and its mini-batch tried again (that
step names a parallel component registered with `distrun component create`)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from starlette.testclient import TestClient  # the ui extra, installed by scripts/deps/60-ui.sh

from distrun.store.layout import Layout
from distrun.ui.app import UiSettings, create_app
from support.jobs import record
from support.parallel_jobs import appended, one_process_rows, parallel_step, pipeline, write_inputs


def test_two_nodes_of_two_processes_append_what_one_process_does(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    result = run_cli("run", str(pipeline(tmp_path)), "--name", "scored")
    assert result.returncode == 0, result.stdout + result.stderr
    expected = one_process_rows(tmp_path)
    for step in ("files", "table"):
        rows = appended(distrun_home, f"scored.{step}")
        assert sorted(rows) == sorted(expected[step]) and len(rows) == len(expected[step]), step
        child = record(distrun_home, f"scored.{step}")
        assert child["status"] == "Completed" and len(child["processes"]) == 4
    assert len(expected["files"]) == 12 and len(expected["table"]) == 40
    # Each process ran init() once (4 per step), took its mini-batches from the one queue, and
    # every mini-batch was run once: 6 of 2 files, and the table's 40 rows split by size.
    files_job = distrun_home / "jobs" / "scored.files"
    logs = [(files_job / "user_logs" / f"std_log_process_{r:02d}.txt").read_text() for r in range(4)]
    assert [log.count(f"init on rank {r}") for r, log in enumerate(logs)] == [1] * 4
    done = [json.loads(line) for line in (files_job / "parallel" / "done.jsonl").read_text().splitlines()]
    assert sorted(record["index"] for record in done) == list(range(6))
    table_done = (distrun_home / "jobs" / "scored.table" / "parallel" / "done.jsonl").read_text().splitlines()
    assert 2 < len(table_done) < 40
    # Azure ML's summary files, and the progress line in the run's output.
    result_text = (files_job / "code" / "logs" / "job_result.txt").read_text()
    assert "mini-batches: 6, succeeded: 6, failed: 0" in result_text
    # Azure ML's per-process logs of the entry script (node<N>/processNNN), beside the rank's own.
    user = files_job / "code" / "logs" / "user"
    for rank in range(4):
        where = f"node{rank // 2}/process{rank % 2:03d}"
        assert (user / "stdout" / f"{where}.stdout.txt").read_text().count(f"init on rank {rank}") == 1, where
        assert f"warming up on rank {rank}" in (user / "stderr" / f"{where}.stderr.txt").read_text(), where
        assert f"warming up on rank {rank}" in logs[rank]
    assert not list((user / "error").glob("*/*"))  # an error log only where a try failed
    with open(files_job / "code" / "logs" / "sys" / "job_report" / "processed_mini-batches.csv") as report:
        rows = list(csv.DictReader(report))
    assert [(int(r["Mini-batch Id"]), r["Total"], r["Succeeded"], r["Status"]) for r in rows] == [
        (n, "2", "2", "DONE") for n in range(6)
    ]
    assert "[files] [0/0] [distrun parallel] mini-batches 6/6, 0 failed," in result.stdout
    shown = run_cli("job", "show", "scored.files").stdout
    assert "Mini-batches: 6/6 ended, 6 succeeded, 0 failed" in shown and "Compute:  local (parallel job)" in shown
    # The record knows its kind, stored at submit: the list, the show and its JSON say it.
    assert child["kind"] == "parallel"
    listed = run_cli("job", "list", "--parent-job-name", "scored").stdout
    assert "scored.files" in listed and "local (parallel job)" in listed
    as_json = json.loads(run_cli("job", "show", "scored.files", "-o", "json").stdout)
    assert as_json["kind"] == "parallel"
    assert as_json["mini_batches"] == {"total": 6, "ended": 6, "succeeded": 6, "failed": 0, "failures": []}
    # The web UI's job page shows the progress process 0 wrote last.
    app = create_app(UiSettings(layout=Layout(distrun_home), token="t0k3n", allowed_hosts=()))
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        assert client.get("/", params={"token": "t0k3n"}).status_code == 200
        page = client.get("/jobs/scored.files").text
        listed_page = client.get("/fragments/jobs").text
    assert "parallel job, " in listed_page
    assert re.search(r'id="parallel-progress"><b>Mini-batches:</b> mini-batches 6/6, 0 failed, [0-9.]+ per s', page)


FAILING = """\
import os
import sys
import time

def init():
    if "--fail-init" in sys.argv:
        raise RuntimeError("no model here")

def run(mini_batch):
    names = [os.path.basename(p) for p in mini_batch]
    if "--die-once" in sys.argv and "f03.txt" in names:
        marker = os.path.join(os.environ["DISTRUN_JOB_DIR"], "died")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(9)
    if "--bad-file" in sys.argv and "f05.txt" in names:
        raise ValueError("cannot score f05.txt")
    if "--short" in sys.argv and "f07.txt" in names:
        return names[:1]
    if "--kill-worker-once" in sys.argv and "f09.txt" in names:
        marker = os.path.join(os.environ["DISTRUN_JOB_DIR"], "killed")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getppid(), 9)  # distrun's worker itself: the gang fails, the job restarts
            time.sleep(30)
    return names
"""


DIES_COMPONENT = """\
type: parallel
name: dies
version: 1
inputs:
  images: {type: uri_folder}
outputs:
  out: {type: uri_file}
input_data: ${{inputs.images}}
mini_batch_size: "2"
max_concurrency_per_instance: 2
mini_batch_error_threshold: 0
retry_settings: {max_retries: 1, timeout: 30}
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: --die-once
  append_row_to: ${{outputs.out}}
"""


def test_init_failure_bad_mini_batch_and_dead_process(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    write_inputs(tmp_path)
    (tmp_path / "src" / "score.py").write_text(FAILING)
    (tmp_path / "src" / "norun.py").write_text("def init():\n    pass\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "table" / "MLTable").write_text("paths:\n  - file: ./part_a.csv\ntransformations:\n  - filter: x\n")

    def step(arguments: str, threshold: int) -> str:
        text = parallel_step("images", "uri_folder", "./files", "2", f"mini_batch_error_threshold: {threshold}\n")
        return text.replace("--factor 3", arguments)

    text = (
        "type: pipeline\nsettings:\n  continue_on_step_failure: true\njobs:\n"
        + "  init:\n"
        + step("--fail-init", 5)
        + "  bad:\n"
        + step("--bad-file", 0)
        + "  dies:\n"  # a registered parallel component, named as azureml:NAME:VERSION
        + "    type: parallel\n    component: azureml:dies:1\n    inputs: {images: ./files}\n"
        + "    resources: {instance_count: 2}\n"
        + "  short:\n"
        + step("--short", 0).replace("mini_batch_error_threshold: 0", "error_threshold: 0")
        + "  restarts:\n"
        + step("--kill-worker-once", 0).replace("resources:", "limits: {max_restarts: 1}\n    resources:")
        + "  norun:\n"
        + step("", 0).replace("entry_script: score.py", "entry_script: norun.py")
        + "  empty:\n"
        + step("", 0).replace("./files", "./empty")
        + "  table:\n"
        + step("", 0).replace("{type: uri_folder, path: ./files}", "{type: mltable, path: ./table}")
    )
    (tmp_path / "pipeline.yml").write_text(text)
    (tmp_path / "dies.yml").write_text(DIES_COMPONENT)
    registered = run_cli("component", "create", "-f", str(tmp_path / "dies.yml"))
    assert registered.returncode == 0, registered.stdout + registered.stderr
    result = run_cli("run", str(tmp_path / "pipeline.yml"), "--name", "broken")
    assert result.returncode != 0
    steps = record(distrun_home, "broken")["steps"]
    statuses = {name: s["status"] for name, s in steps.items()}
    assert statuses == {
        **{name: "Failed" for name in ("init", "bad", "short", "norun", "empty", "table")},
        "dies": "Completed",
        "restarts": "Completed",
    }
    init_logs = "".join(p.read_text() for p in (distrun_home / "jobs" / "broken.init" / "user_logs").glob("std_log*"))
    assert "init() of the entry script failed in node" in init_logs
    assert "RuntimeError: no model here" in init_logs
    assert (distrun_home / "jobs" / "broken.init" / "parallel" / "done.jsonl").read_text() == ""  # none was tried
    bad = distrun_home / "jobs" / "broken.bad"
    summary = "".join(p.read_text() for p in (bad / "user_logs").glob("std_log*"))
    assert "1 mini-batches failed, more than mini_batch_error_threshold (0)" in summary
    assert "mini-batch 2 (" in summary and "f05.txt" in summary and "failed 2 tries in node" in summary
    assert "ValueError: cannot score f05.txt" in summary
    # Azure ML's error summary, and each failed try's traceback in its process's error log.
    assert "ValueError: cannot score f05.txt" in (bad / "code" / "logs" / "user" / "error.txt").read_text()
    tries = "".join(p.read_text() for p in (bad / "code" / "logs" / "user" / "error").glob("node*/process*.txt"))
    assert tries.count("mini-batch 2, try ") == 2 and "ValueError: cannot score f05.txt" in tries
    with open(bad / "code" / "logs" / "sys" / "job_report" / "processed_mini-batches.csv") as report:
        statuses = {int(r["Mini-batch Id"]): r["Status"] for r in csv.DictReader(report)}
    assert statuses[2] == "FAILED" and "DONE" in statuses.values()
    init_errors = "".join(
        p.read_text() for p in (distrun_home / "jobs" / "broken.init" / "code" / "logs" / "user" / "error").glob("*/*")
    )
    assert "init() failed:" in init_errors and "RuntimeError: no model here" in init_errors
    shown = run_cli("job", "show", "broken.bad").stdout
    assert "Mini-batches: " in shown and "mini-batch 2 in node" in shown
    assert "2 tries: ValueError: cannot score f05.txt" in shown
    failures = json.loads(run_cli("job", "show", "broken.bad", "-o", "json").stdout)["mini_batches"]["failures"]
    assert [(f["mini_batch"], f["tries"]) for f in failures] == [(2, 2)]
    assert "cannot score f05.txt" in failures[0]["error"]
    # The dead process was replaced; its mini-batch ran again and every file is in the output.
    assert sorted(appended(distrun_home, "broken.dies")) == [f"f{n:02d}.txt" for n in range(12)]
    dies_logs = "".join(p.read_text() for p in (distrun_home / "jobs" / "broken.dies" / "user_logs").glob("std_log*"))
    assert "the entry script's process ended (exit code 9)" in dies_logs
    # A run that returns fewer rows than it got items: those items failed, past error_threshold 0.
    short_logs = "".join(p.read_text() for p in (distrun_home / "jobs" / "broken.short" / "user_logs").glob("std_log*"))
    assert "parallel step failed: 1 items failed, more than error_threshold (0)" in short_logs
    # Bad input: an entry script without run(), an empty folder, an MLTable that does not parse.
    for step_name, said in (
        ("norun", "the entry script /"),
        ("empty", "holds nothing to run: no file, no row"),
        ("table", "MLTable:4: transformations[0]: transformation 'filter' is not read by distrun"),
    ):
        logs = "".join(
            p.read_text() for p in (distrun_home / "jobs" / f"broken.{step_name}" / "user_logs").glob("std*")
        )
        assert said in logs, (step_name, logs[-2000:])
    # Said by the process that loaded the script first (the step then stops the others), whichever it was.
    norun_logs = "".join(p.read_text() for p in (distrun_home / "jobs" / "broken.norun" / "user_logs").glob("std_log*"))
    assert "norun.py defines no run(mini_batch) function" in norun_logs
    # A worker killed: the job's next attempt (max_restarts) runs only the mini-batches that had not ended.
    restarted = distrun_home / "jobs" / "broken.restarts"
    assert [a["status"] for a in record(distrun_home, "broken.restarts")["attempts"]] == ["Failed", "Completed"]
    done = [json.loads(line)["index"] for line in (restarted / "parallel" / "done.jsonl").read_text().splitlines()]
    assert sorted(done) == list(range(6))  # each mini-batch ran to its end once, over the two attempts
    assert sorted(appended(distrun_home, "broken.restarts")) == [f"f{n:02d}.txt" for n in range(12)]
