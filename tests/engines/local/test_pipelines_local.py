"""Pipeline jobs on local compute: each step a real distrun job, outputs passed by path, a failure
stopping what depends on it and naming the first failing step with its traceback."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

from distrun.core import procfs
from distrun.store.index import JobIndex
from support.cli import REPO
from support.jobs import processes_of_job, two_step_pipeline, wait_for

CHAIN = REPO / "tests" / "data" / "pipelines" / "chain" / "pipeline.yml"
NESTED = REPO / "tests" / "data" / "pipelines" / "nested" / "pipeline.yml"


def _records(home: Path) -> dict[str, dict]:
    return {record.name: record.to_dict() for record in JobIndex(home / "jobs.db").list(100)}


def test_chain_runs_each_step_as_a_job_and_passes_outputs_by_path(run_cli, distrun_home: Path) -> None:
    result = run_cli("run", str(CHAIN), "--name", "nightly")
    assert result.returncode == 0, result.stdout + result.stderr
    records = _records(distrun_home)
    assert set(records) == {"nightly", "nightly.prepare", "nightly.train", "nightly.score"}
    pipeline = records["nightly"]
    assert pipeline["status"] == "Completed" and pipeline["compute"] == "pipeline"
    assert list(pipeline["steps"]) == ["prepare", "train", "score"]
    assert [s["status"] for s in pipeline["steps"].values()] == ["Completed"] * 3
    assert pipeline["steps"]["train"]["depends_on"] == ["prepare"]
    for step in ("prepare", "train", "score"):
        child = records[f"nightly.{step}"]
        assert (child["status"], child["parent"], child["compute"]) == ("Completed", "nightly", "local")
    assert len(records["nightly.train"]["processes"]) == 4  # 2 nodes x 2 processes
    jobs = distrun_home / "jobs"
    # train read prepare's output, score read train's: by path, in the order of the graph.
    report = (jobs / "nightly.score" / "named-outputs" / "report" / "report.txt").read_text()
    assert report == "scored epochs=3 lr=0.5 data=a,b\n"
    assert "[prepare] started as job nightly.prepare on local, 1 process" in result.stdout
    assert "[train] started as job nightly.train on local, 4 processes" in result.stdout
    assert result.stdout.index("[prepare] Completed") < result.stdout.index("[train] started")
    assert "Status: Completed" in result.stdout
    # The pipeline's faces: its steps in show and list; logs are its steps' jobs'.
    shown = run_cli("job", "show", "nightly").stdout
    rows = {line.split()[0]: line.split()[1:4] for line in shown.splitlines() if line.startswith(("prepare", "train"))}
    assert rows == {
        "prepare": ["Completed", "nightly.prepare", "local"],
        "train": ["Completed", "nightly.train", "local"],
    }
    assert "pipeline (3 steps)" in run_cli("job", "list").stdout
    # A pipeline's logs are its steps', each line prefixed by step; PIPELINE/STEP is one step's job.
    logs = run_cli("logs", "nightly").stdout
    assert "[prepare] [0/0] prepared 10 rows" in logs and "[train] [1/3] trained on rank 3" in logs
    assert logs.index("[prepare]") < logs.index("[train]") < logs.index("[score]")
    one = run_cli("logs", "nightly/train", "--rank", "3").stdout
    assert one == "trained on rank 3\n"
    assert "Pipeline: nightly" in run_cli("job", "show", "nightly/score").stdout
    missing = run_cli("logs", "nightly/trian")
    assert missing.returncode == 2 and "pipeline nightly has no step 'trian'" in missing.stderr
    # Its download: a folder per step, as `job download` of that step's job.
    fetched = run_cli("job", "download", "nightly", "-p", str(distrun_home / "got"), "--all")
    assert fetched.returncode == 0, fetched.stderr
    assert (distrun_home / "got" / "score" / "named-outputs" / "report" / "report.txt").read_text() == report
    assert (distrun_home / "got" / "train" / "artifacts" / "user_logs" / "std_log_process_03.txt").is_file()


def test_a_pipeline_component_runs_its_steps_in_its_place(run_cli, distrun_home: Path) -> None:
    result = run_cli("run", str(NESTED), "--name", "staged")
    assert result.returncode == 0, result.stdout + result.stderr
    records = _records(distrun_home)
    assert set(records) == {"staged", "staged.stage.prepare", "staged.stage.train", "staged.score"}
    assert list(records["staged"]["steps"]) == ["stage.prepare", "stage.train", "score"]
    report = (distrun_home / "jobs" / "staged.score" / "named-outputs" / "report" / "report.txt").read_text()
    assert report == "scored epochs=4 lr=0.01 data=a,b\n"


def _failing_pipeline(folder: Path, continue_on_failure: bool) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "fail.py").write_text("def go():\n    raise ValueError('bad rows in step a')\n")
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(
        textwrap.dedent(
            f"""\
            type: pipeline
            settings:
              continue_on_step_failure: {str(continue_on_failure).lower()}
            jobs:
              a:
                command: python -c "import fail; fail.go()"
                code: ./src
                outputs:
                  out: {{type: uri_folder}}
              b:
                command: python -c "import time; time.sleep({2 if continue_on_failure else 60})"
                limits: {{grace_period: 1}}
              c:
                command: ls ${{{{inputs.x}}}}
                inputs:
                  x: ${{{{parent.jobs.a.outputs.out}}}}
            """
        )
    )
    return pipeline


def test_a_failed_step_stops_the_pipeline_and_is_named_with_its_traceback(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    result = run_cli("run", str(_failing_pipeline(tmp_path, False)), "--name", "broken")
    assert result.returncode == 1, result.stdout + result.stderr
    records = _records(distrun_home)
    pipeline = records["broken"]
    assert pipeline["status"] == "Failed"
    assert pipeline["reason"].startswith("step a failed: ")
    assert pipeline["root_cause"]["step"] == "a" and pipeline["root_cause"]["job"] == "broken.a"
    assert "ValueError: bad rows in step a" in pipeline["root_cause"]["traceback"]
    steps = pipeline["steps"]
    assert steps["a"]["status"] == "Failed"
    assert steps["b"]["status"] == "Canceled"  # running beside a: canceled, not left to sleep 60 s
    assert steps["c"]["status"] == "Canceled" and steps["c"]["reason"].startswith("not started")
    assert "broken.c" not in records  # never submitted
    assert records["broken.b"]["status"] == "Canceled"
    assert processes_of_job("broken.b") == []
    assert "Failed first: step a (job broken.a)" in result.stdout
    assert "ValueError: bad rows in step a" in result.stdout


def test_continue_on_step_failure_lets_independent_steps_finish(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    result = run_cli("run", str(_failing_pipeline(tmp_path, True)), "--name", "partial")
    assert result.returncode == 1, result.stdout + result.stderr
    steps = _records(distrun_home)["partial"]["steps"]
    assert [steps[s]["status"] for s in "abc"] == ["Failed", "Completed", "Canceled"]
    assert steps["c"]["reason"] == "not started: step a did not complete"


def _start_long_pipeline(
    start_cli: Callable[..., subprocess.Popen[str]], distrun_home: Path, folder: Path, name: str
) -> subprocess.Popen[str]:
    """`distrun run` of a pipeline whose first step sleeps a minute and a second that reads it,
    returned once the first step's job is Running."""
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(
        textwrap.dedent(
            """\
            type: pipeline
            jobs:
              slow:
                command: python -c "import time; print('up', flush=True); time.sleep(60)"
                limits: {grace_period: 1}
                outputs:
                  out: {type: uri_folder}
              after:
                command: ls ${{inputs.x}}
                inputs:
                  x: ${{parent.jobs.slow.outputs.out}}
            """
        )
    )
    proc = start_cli("run", str(pipeline), "--name", name)
    wait_for(lambda: _records(distrun_home).get(f"{name}.slow", {}).get("status") == "Running", timeout=60)
    return proc


def test_job_cancel_of_a_pipeline_cancels_its_running_steps(
    start_cli, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    proc = _start_long_pipeline(start_cli, distrun_home, tmp_path, "long")
    result = run_cli("job", "cancel", "long")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "long: Canceled" in result.stdout
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    records = _records(distrun_home)
    assert records["long"]["status"] == "Canceled"
    assert records["long.slow"]["status"] == "Canceled"
    assert records["long"]["steps"]["after"]["status"] == "Canceled"
    assert "long.after" not in records
    assert processes_of_job("long.slow") == []


def _launcher_servers(home: Path) -> list[int]:
    """Live processes of this test's DISTRUN_HOME running distrun.backends.launcher_server: the
    server, and the supervisors (with their watchdogs) it forked, which keep its command line."""
    mine = f"DISTRUN_HOME={home}".encode()
    return [
        pid
        for pid, environ in procfs.environments()
        if mine in environ and b"distrun.backends.launcher_server" in procfs.command_line(pid) and procfs.is_alive(pid)
    ]


def test_steps_supervisors_are_forked_by_a_server_that_a_killed_pipeline_does_not_leave_behind(
    start_cli, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    proc = _start_long_pipeline(start_cli, distrun_home, tmp_path, "served")
    supervisor = _records(distrun_home)["served.slow"]["launcher_pid"]
    assert supervisor in _launcher_servers(distrun_home)
    [server] = [pid for pid in _launcher_servers(distrun_home) if procfs.parent_of(pid) == proc.pid]
    # Forked twice: neither the server's child nor the pipeline's, in a session of its own.
    assert procfs.parent_of(supervisor) not in (server, proc.pid)
    assert os.getsid(supervisor) not in (os.getsid(proc.pid), os.getsid(server))
    assert "up" in run_cli("logs", "served.slow").stdout
    proc.kill()  # distrun itself killed: the server goes with it, the step's job is its supervisor's
    proc.wait(timeout=10)
    wait_for(lambda: not procfs.is_alive(server), timeout=10)
    assert _records(distrun_home)["served.slow"]["status"] == "Running"
    result = run_cli("job", "cancel", "served.slow")
    assert result.returncode == 0 and "served.slow: Canceled" in result.stdout, result.stdout + result.stderr
    assert processes_of_job("served.slow") == []


def test_run_detached_supervises_the_pipeline_in_the_background(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(two_step_pipeline())
    result = run_cli("run", "-d", str(pipeline), "--name", "background")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Created pipeline background with 2 steps (Queued)" in result.stdout
    # Followed from any shell while it runs: each step's lines as its job writes them, then the summary.
    streamed = run_cli("stream", "background")
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    assert "[read] [0/0] written" in streamed.stdout and "Status: Completed" in streamed.stdout
    records = _records(distrun_home)
    assert records["background"]["status"] == "Completed", records["background"]
    assert [s["status"] for s in records["background"]["steps"].values()] == ["Completed"] * 2
    assert records["background.read"]["parent"] == "background"
    assert "written" in run_cli("logs", "background.read").stdout
    log = (distrun_home / "jobs" / "background" / "system_logs" / "launcher.txt").read_text()
    assert "[read] started as job background.read" in log and "Status: Completed" in log


def test_a_reader_that_goes_away_ends_the_printing_not_the_pipeline(
    start_cli, distrun_home: Path, tmp_path: Path
) -> None:
    # `distrun run pipeline.yml | head -1`: the pipe closes after the first line. The supervisor
    # used to die on its next line, leaving the record "launcher lost" and the second step unstarted.
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(two_step_pipeline())
    proc = start_cli("run", str(pipeline), "--name", "headed")
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("RunId: headed")
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    records = _records(distrun_home)
    assert records["headed"]["status"] == "Completed", records["headed"]
    assert [s["status"] for s in records["headed"]["steps"].values()] == ["Completed"] * 2
    assert records["headed.read"]["status"] == "Completed"


def _reuse_pipeline(folder: Path) -> Path:
    """upper reads a file; count reads upper's output."""
    (folder / "words.txt").write_text("one two\n")
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(
        textwrap.dedent(
            """\
            type: pipeline
            inputs:
              words: {type: uri_file, path: ./words.txt}
            jobs:
              upper:
                command: tr a-z A-Z < ${{inputs.words}} > ${{outputs.shout}}/words.txt
                inputs:
                  words: ${{parent.inputs.words}}
                outputs:
                  shout: {type: uri_folder}
              count:
                command: wc -w < ${{inputs.text}}/words.txt > ${{outputs.counted}}/count.txt
                inputs:
                  text: ${{parent.jobs.upper.outputs.shout}}
                outputs:
                  counted: {type: uri_folder}
            """
        )
    )
    return pipeline


def test_a_second_run_reuses_unchanged_steps_and_reruns_what_changed(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    pipeline = _reuse_pipeline(tmp_path)
    jobs = distrun_home / "jobs"

    def run(name: str) -> dict:
        result = run_cli("run", str(pipeline), "--name", name)
        assert result.returncode == 0, result.stdout + result.stderr
        return _records(distrun_home)[name]["steps"]

    first = run("first")
    assert [(s["job"], s["reused"]) for s in first.values()] == [("first.upper", False), ("first.count", False)]
    # Unchanged: both steps reused, pointed at the first run's jobs; no job of their own.
    second = run("second")
    assert [(s["status"], s["job"], s["reused"]) for s in second.values()] == [
        ("Completed", "first.upper", True),
        ("Completed", "first.count", True),
    ]
    assert {"second.upper", "second.count"}.isdisjoint(_records(distrun_home))
    shown = run_cli("job", "show", "second").stdout
    rows = {line.split()[0]: line.split()[1:3] for line in shown.splitlines() if line.startswith(("upper", "count"))}
    assert rows == {"upper": ["Reused", "first.upper"], "count": ["Reused", "first.count"]}
    # A changed input file: the step reading it runs again, and so does the step after it.
    (tmp_path / "words.txt").write_text("one two three\n")
    third = run("third")
    assert [(s["job"], s["reused"]) for s in third.values()] == [("third.upper", False), ("third.count", False)]
    assert (jobs / "third.count" / "named-outputs" / "counted" / "count.txt").read_text().strip() == "3"
    # An output changed after its job completed (job folders are job-writable) is never reused:
    # upper is reused from the third run, count runs again.
    (jobs / "third.count" / "named-outputs" / "counted" / "count.txt").write_text("999\n")
    result = run_cli("run", str(pipeline), "--name", "fourth")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[count] not reused: the earlier run third.count cannot be reused: its output counted changed" in (
        result.stdout
    )
    fourth = _records(distrun_home)["fourth"]["steps"]
    assert [(s["job"], s["reused"]) for s in fourth.values()] == [("third.upper", True), ("fourth.count", False)]
    assert (jobs / "fourth.count" / "named-outputs" / "counted" / "count.txt").read_text().strip() == "3"


def test_local_steps_asking_for_gpus_are_given_gpus_no_running_step_holds(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    # Two GPUs as distrun's local backend sees them (CUDA_VISIBLE_DEVICES of the shell; nothing
    # here touches a GPU): g1 and g2 ask one each and run side by side, g3 asks both and waits.
    pipeline = tmp_path / "pipeline.yml"
    steps = "".join(
        f"  {name}:\n    command: echo {name} sees $CUDA_VISIBLE_DEVICES\n"
        f"    resources: {{properties: {{gpus_per_node: {count}}}}}\n"
        for name, count in (("g1", 1), ("g2", 1), ("g3", 2))
    )
    pipeline.write_text("type: pipeline\njobs:\n" + steps)
    result = run_cli("run", str(pipeline), "--name", "gpus", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert result.returncode == 0, result.stdout + result.stderr
    logs = run_cli("logs", "gpus").stdout
    assert {"[g1] [0/0] g1 sees 0", "[g2] [0/0] g2 sees 1", "[g3] [0/0] g3 sees 0,1"} <= set(logs.splitlines())
    state = _records(distrun_home)["gpus"]["steps"]
    assert state["g3"]["started_at"] >= max(state["g1"]["ended_at"], state["g2"]["ended_at"])


EPOCHS = """\
import os, sys, time
print("epoch 0", flush=True)
for _ in range(1200):  # until the test has seen epoch 0 (at most 2 minutes)
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.1)
print("epoch 1 \\x1b[2Jcleared", flush=True)
"""


def _epochs_pipeline(tmp_path: Path) -> tuple[Path, Path]:
    """A pipeline whose one step `slow` prints epoch 0, then epoch 1 once the file `go` exists;
    the pipeline's file and `go`."""
    go = tmp_path / "go"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "epochs.py").write_text(EPOCHS)
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(f"type: pipeline\njobs:\n  slow:\n    command: python epochs.py {go}\n    code: src\n")
    return pipeline, go


def test_run_shows_each_steps_output_live_beside_its_lines_and_events_only_keeps_the_lines(
    start_cli, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    pipeline, go = _epochs_pipeline(tmp_path)
    proc = start_cli("run", str(pipeline), "--name", "live")
    assert proc.stdout is not None
    seen: list[str] = []
    while not seen or (seen[-1] and "epoch 0" not in seen[-1]):
        seen.append(proc.stdout.readline())
    # Shown while the step still runs: it waits for this test to have seen it.
    assert seen[-1] == "[slow] [0/0] epoch 0\n", seen
    assert _records(distrun_home)["live.slow"]["status"] == "Running"
    go.touch()
    rest, _ = proc.communicate(timeout=120)
    out = "".join(seen) + rest
    assert proc.returncode == 0, out
    assert out.index("[slow] started as job live.slow") < out.index("[slow] [0/0] epoch 0")
    assert out.index("[slow] [0/0] epoch 1") < out.index("Execution Summary")
    assert "\x1b" not in out and "cleared" in out  # the step's terminal escapes are not the terminal's
    # --events-only: the pipeline's own lines, none of its steps' output.
    quiet = run_cli("run", str(pipeline), "--name", "quiet", "--events-only", "--set", "settings.force_rerun=true")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "[slow] started as job quiet.slow" in quiet.stdout and "[slow] Completed" in quiet.stdout
    assert "epoch" not in quiet.stdout


def test_a_step_that_failed_without_a_traceback_shows_the_last_lines_of_its_log(
    run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    # argparse refuses the arguments: usage and error on stderr, exit 2, no traceback.
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--epochs', type=int)\nparser.parse_args()\n"
    )
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text("type: pipeline\njobs:\n  train:\n    command: python train.py --lr 3\n    code: src\n")
    result = run_cli("run", str(pipeline), "--name", "usage")
    assert result.returncode == 1, result.stdout + result.stderr
    cause = _records(distrun_home)["usage"]["root_cause"]
    assert cause["step"] == "train" and "unrecognized arguments: --lr 3" in cause["log_tail"]
    summary = result.stdout[result.stdout.index("Execution Summary") :]
    assert "Failed first: step train (job usage.train)" in summary
    tail = summary[summary.index("  Last lines of its log:") :]
    assert "    train.py: error: unrecognized arguments: --lr 3" in tail.splitlines()[1:4]


OUTPUTS = REPO / "tests" / "data" / "pipelines" / "outputs" / "pipeline.yml"


def test_a_pipelines_own_outputs_are_found_by_their_names(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    import json

    result = run_cli("run", str(OUTPUTS), "--name", "pipe1")
    assert result.returncode == 0, result.stdout + result.stderr
    # `summary` is the output `report` of step write: show names it, by the pipeline's name.
    shown = run_cli("job", "show", "pipe1").stdout
    assert "summary: output report of step write (job pipe1.write), azureml://jobs/pipe1/outputs/summary" in shown
    outputs = json.loads(run_cli("job", "show", "pipe1", "-o", "json").stdout)["outputs"]
    assert outputs == {
        "summary": {
            "step": "write",
            "output": "report",
            "job": "pipe1.write",
            "status": "Completed",
            "path": "azureml://jobs/pipe1/outputs/summary",
        }
    }
    # Downloaded by its name, where Azure ML puts a named output.
    fetched = run_cli("job", "download", "pipe1", "--output-name", "summary", "-p", str(tmp_path / "got"))
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "got" / "named-outputs" / "summary" / "report.txt").read_text() == "written\n"
    everything = run_cli("job", "download", "pipe1", "--all", "-p", str(tmp_path / "all"))
    assert everything.returncode == 0, everything.stderr
    assert (tmp_path / "all" / "named-outputs" / "summary" / "report.txt").read_text() == "written\n"
    assert (tmp_path / "all" / "write" / "named-outputs" / "report" / "report.txt").is_file()  # and each step's
    missing = run_cli("job", "download", "pipe1", "--output-name", "sumary", "-p", str(tmp_path / "none"))
    assert missing.returncode == 2 and "the pipeline's outputs: summary" in missing.stderr
    # A later job reads it as azureml://jobs/PIPELINE/outputs/NAME.
    reader = tmp_path / "read.yml"
    reader.write_text(
        "command: cat ${{inputs.summary}}/report.txt\n"
        "inputs:\n  summary: {type: uri_folder, path: azureml://jobs/pipe1/outputs/summary}\n"
    )
    read = run_cli("run", str(reader), "--name", "reader")
    assert read.returncode == 0, read.stdout + read.stderr
    assert "written" in run_cli("logs", "reader").stdout
    wrong = reader.read_text().replace("outputs/summary", "outputs/report")
    reader.write_text(wrong)
    refused = run_cli("run", str(reader), "--name", "reader2")
    assert refused.returncode != 0 and "pipeline pipe1 has no output 'report' (its outputs: summary)" in refused.stderr


BOUND = REPO / "tests" / "data" / "pipelines" / "bound_settings" / "pipeline.yml"


def test_steps_run_on_the_compute_their_pipelines_inputs_name(run_cli, distrun_home: Path) -> None:
    # The pipeline's default compute does not exist: each step runs where its bound input says.
    result = run_cli("run", str(BOUND), "--name", "bound")
    assert result.returncode == 0, result.stdout + result.stderr
    records = _records(distrun_home)
    assert {records[f"bound.{s}"]["compute"] for s in ("stage.write", "stage.after", "compare")} == {"local"}
    assert len(records["bound.stage.write"]["processes"]) == 2  # resources.instance_count: ${{parent.inputs.nodes}}
    assert "written" in run_cli("logs", "bound/compare").stdout


RESERVED = REPO / "tests" / "data" / "pipelines" / "reserved" / "pipeline.yml"


def test_a_steps_artifacts_and_default_outputs_are_its_artifact_root(run_cli, distrun_home: Path) -> None:
    # Azure ML's reserved outputs: what the step wrote to ./outputs and ./logs, declared or not.
    result = run_cli("run", str(RESERVED), "--name", "res")
    assert result.returncode == 0, result.stdout + result.stderr
    logs = run_cli("logs", "res").stdout
    assert "[read_artifacts] [0/0] hello there" in logs and "[read_artifacts] [0/0] noted" in logs
    assert "[read_default] [0/0] hello there" in logs
    # A later job reads it by URI too, as a file inside it.
    reader = distrun_home.parent / "read.yml"
    reader.write_text(
        "command: cat ${{inputs.greeting}}\n"
        "inputs:\n  greeting:\n    type: uri_file\n"
        "    path: azureml://jobs/res.greet/outputs/default/paths/outputs/greeting.txt\n"
    )
    assert run_cli("run", str(reader), "--name", "reader").returncode == 0
    assert run_cli("logs", "reader").stdout.endswith("hello there\n")
    # `job download --output-name default` is the job's artifacts, as Azure ML downloads it.
    got = distrun_home.parent / "got"
    assert run_cli("job", "download", "res.greet", "--output-name", "default", "-p", str(got)).returncode == 0
    assert (got / "artifacts" / "outputs" / "greeting.txt").read_text() == "hello there\n"
    assert not (got / "named-outputs").exists()


def test_stream_of_a_detached_pipeline_shows_its_events_live_beside_its_steps_output_and_one_summary(
    start_cli, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    pipeline, go = _epochs_pipeline(tmp_path)
    started = run_cli("run", "-d", str(pipeline), "--name", "away")
    assert started.returncode == 0, started.stdout + started.stderr
    proc = start_cli("stream", "away")
    assert proc.stdout is not None
    seen: list[str] = []
    event = "[slow] started as job away.slow on local, 1 process\n"
    while not seen or (seen[-1] and not {event, "[slow] [0/0] epoch 0\n"} <= set(seen)):
        seen.append(proc.stdout.readline())
    # The background supervisor's event line and the step's output, both shown while the step
    # still runs: it waits for this test to have seen them.
    assert seen[-1], seen
    assert _records(distrun_home)["away"]["status"] == "Running"
    go.touch()
    rest, _ = proc.communicate(timeout=120)
    out = "".join(seen) + rest
    assert proc.returncode == 0, out
    assert out.index("[slow] [0/0] epoch 1") < out.index("Execution Summary")
    assert out.index("[slow] Completed in") < out.index("Execution Summary")
    # Its launcher.txt also holds its RunId and its summary: each is shown once.
    assert out.count("Execution Summary") == 1 and out.count("RunId: away") == 2, out  # header, summary
    assert "\x1b" not in out and "cleared" in out
    # --events-only: the pipeline's own lines and its summary, none of its steps' output.
    quiet = run_cli("job", "stream", "--events-only", "away")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "[slow] started as job away.slow" in quiet.stdout and "[slow] Completed in" in quiet.stdout
    assert "epoch" not in quiet.stdout and quiet.stdout.count("Execution Summary") == 1
    # `job create --stream` takes it too.
    made = run_cli(
        "job",
        "create",
        "-f",
        str(pipeline),
        "-n",
        "made",
        "--stream",
        "--events-only",
        "--set",
        "settings.force_rerun=true",
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "[slow] Completed" in made.stdout and "epoch" not in made.stdout
