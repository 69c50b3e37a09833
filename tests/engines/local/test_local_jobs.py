"""Real jobs on the local backend: torch/gloo ranks, failures, timeouts, cancel, orphans."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from distrun.store.index import JobIndex
from support.cli import REPO
from support.jobs import (
    TORCHRUN_PER_NODE_JOB,
    only_job,
    processes_of_job,
    python_ranks,
    record,
    torchrun_check,
    wait_for,
)

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"


@pytest.mark.slow
def test_example_ddp_trains_and_saves_the_model(run_cli, distrun_home):
    result = run_cli("run", str(EXAMPLE), "--set", "inputs.epochs=2")
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    logs = sorted(p.name for p in (folder / "user_logs").iterdir())
    assert logs == [f"std_log_process_{i:02d}.txt" for i in range(4)]
    assert (folder / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert "[0/0] epoch 2/2 loss" in result.stdout
    for rank in range(4):
        text = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank}/4 on node {rank // 2} (local rank {rank % 2})" in text
    assert "Status: Completed" in result.stdout


@pytest.mark.slow
def test_per_node_torchrun_form(run_cli, write_job, distrun_home):
    job = write_job(TORCHRUN_PER_NODE_JOB, torchrun_check())
    result = run_cli("run", str(job))
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(4):
        assert f"rank {rank} of 4 sum 6" in result.stdout


def test_failing_rank_is_the_root_cause_with_its_traceback(run_cli, write_job, distrun_home):
    job = write_job(
        python_ranks(
            "time.sleep(0.5); int(os.environ['RANK']) == 2 and sys.exit(__import__('fail').go()); time.sleep(60)"
        ),
        {"fail.py": "def go():\n    raise ValueError('bad batch on rank 2')\n"},
    )
    started = time.monotonic()
    result = run_cli("run", str(job))
    assert time.monotonic() - started < 30  # the others did not sleep their 60 s
    assert result.returncode == 1
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    cause = rec["root_cause"]
    assert (cause["rank"], cause["node_rank"], cause["exit_code"]) == (2, 1, 1)
    assert "ValueError: bad batch on rank 2" in cause["traceback"]
    assert 'fail.py", line 2, in go' in cause["traceback"]
    others = {p["rank"]: p for p in rec["processes"] if p["rank"] != 2}
    assert all(p["stopped_by_distrun"] and p["signal"] == "SIGTERM" for p in others.values())
    assert "Reason: rank 2 on node 1 exited with code 1" in result.stdout
    assert "ValueError: bad batch on rank 2" in result.stdout
    assert processes_of_job(name) == []


def test_sigkilled_rank_is_named_as_possibly_out_of_memory(run_cli, write_job, distrun_home):
    job = write_job(
        python_ranks("time.sleep(0.3); os.environ['RANK'] == '1' and os.kill(os.getpid(), 9); time.sleep(60)")
    )
    result = run_cli("run", str(job))
    assert result.returncode == 1
    cause = record(distrun_home, only_job(distrun_home))["root_cause"]
    assert cause["rank"] == 1 and cause["signal"] == "SIGKILL"
    assert "possibly out of memory" in cause["reason"]


def test_timeout_fails_the_job(run_cli, write_job, distrun_home):
    job = write_job(python_ranks("time.sleep(60)"))
    result = run_cli("run", str(job), "--set", "limits.timeout=1")
    assert result.returncode == 1
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 1 s"
    assert processes_of_job(name) == []


def _running_job(home: Path) -> str:
    def running() -> str | None:
        if not (home / "jobs.db").exists():
            return None
        jobs = JobIndex(home / "jobs.db").list()
        return jobs[0].name if jobs and jobs[0].status == "Running" else None

    return str(wait_for(running))


def test_cancel_from_another_shell(start_cli, run_cli, write_job, distrun_home):
    job = write_job(python_ranks("time.sleep(60)"))
    proc = start_cli("run", str(job))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 4)
    result = run_cli("job", "cancel", name)
    assert result.returncode == 0, result.stderr
    assert proc.wait(timeout=30) == 130
    assert record(distrun_home, name)["status"] == "Canceled"
    assert processes_of_job(name) == []


def test_ctrl_c_cancels(start_cli, write_job, distrun_home):
    job = write_job(python_ranks("time.sleep(60)"))
    proc = start_cli("run", str(job))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 4)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled" and "SIGINT" in rec["reason"]
    assert processes_of_job(name) == []


def test_sigkill_of_distrun_leaves_no_process_and_a_true_record(start_cli, run_cli, write_job, distrun_home):
    # Each rank also starts a grandchild that leaves its session (setsid), as daemons do.
    job = write_job(
        """
        command: setsid sleep 300 & python -c "import time; print('up', flush=True); time.sleep(300)"
        code: src
        resources:
          instance_count: 2
        distribution:
          type: pytorch
          process_count_per_instance: 2
        """
    )
    proc = start_cli("run", str(job))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 8)
    proc.kill()
    proc.wait()
    wait_for(lambda: processes_of_job(name) == [], timeout=10)
    shown = run_cli("job", "show", name, "-o", "json")
    data = json.loads(shown.stdout)
    assert data["status"] == "Failed" and data["reason"].startswith("launcher lost")


def test_detached_create_then_stream_show_list_logs_download(run_cli, write_job, distrun_home, tmp_path):
    job = write_job(
        """
        name: detached_one
        command: >-
          python -c "import os; r = os.environ['RANK']; print('hello from', r);
          open('outputs/out_%s.txt' % r, 'w').write(r); open('logs/log_%s.txt' % r, 'w').write(r);
          open(os.environ['AZURE_ML_OUTPUT_result'] + '/r%s' % r, 'w').write(r)"
        code: src
        outputs:
          result:
        resources:
          instance_count: 1
        distribution:
          type: pytorch
          process_count_per_instance: 2
        """
    )  # src/ has no outputs/ or logs/: distrun makes them before the ranks start, as Azure ML does
    created = run_cli("job", "create", "--file", str(job), "-o", "json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == "detached_one"
    streamed = run_cli("job", "stream", "detached_one")
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    assert "[0/0] hello from 0" in streamed.stdout and "[0/1] hello from 1" in streamed.stdout
    assert "Status: Completed" in streamed.stdout
    shown = json.loads(run_cli("job", "show", "-n", "detached_one", "-o", "json").stdout)
    assert shown["status"] == "Completed"
    listed = json.loads(run_cli("job", "list", "--output", "json").stdout)
    assert [j["name"] for j in listed] == ["detached_one"]
    logs = run_cli("logs", "detached_one", "--rank", "1")
    assert logs.stdout == "hello from 1\n"
    dest = tmp_path / "dl"
    downloaded = run_cli("job", "download", "detached_one", "-p", str(dest), "--all")
    assert downloaded.returncode == 0, downloaded.stderr
    assert (dest / "artifacts" / "outputs" / "out_1.txt").read_text() == "1"
    assert (dest / "artifacts" / "logs" / "log_0.txt").read_text() == "0"
    assert (dest / "named-outputs" / "result" / "r0").read_text() == "0"
    assert (dest / "artifacts" / "user_logs" / "std_log_process_00.txt").exists()


def test_invalid_job_starts_nothing_and_prints_no_traceback(run_cli, write_job, distrun_home):
    job = write_job(
        """
        command: python train.py --epochs ${{inputs.epoch}}
        code: src
        inputs:
          epochs: 3
        environment_variables:
          WORLD_SIZE: 8
        resources:
          instance_count: 0
        """
    )
    result = run_cli("run", str(job))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{job}:9:3: resources.instance_count: must be at least 1, got 0" in result.stderr
    assert not (distrun_home / "jobs.db").exists()


def test_plan_shows_every_process_env(run_cli, distrun_home):
    result = run_cli("plan", str(EXAMPLE), "--output", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)["plan"]
    procs = [p for node in plan["nodes"] for p in node["processes"]]
    assert [p["env"]["RANK"] for p in procs] == ["0", "1", "2", "3"]
    env = procs[3]["env"]
    port = env["MASTER_PORT"]
    assert env["NODE_RANK"] == env["GROUP_RANK"] == env["AZUREML_CR_NODE_RANK"] == "1"
    assert env["LOCAL_RANK"] == "1" and env["LOCAL_WORLD_SIZE"] == "2" and env["WORLD_SIZE"] == "4"
    assert env["AZ_BATCH_MASTER_NODE"] == f"127.0.0.1:{port}" and env["AZ_BATCHAI_MPI_MASTER_NODE"] == "127.0.0.1"
    assert env["AZUREML_PROCESS_NAME"] == "rank_3" and env["AZUREML_NODE_COUNT"] == "2"
    assert env["PYTHONUNBUFFERED"] == "1"
    # The host list grows with the nodes: kept once for every process, not in each one's env.
    assert "AZ_BATCH_HOST_LIST" not in env and plan["shared_env"] == {"AZ_BATCH_HOST_LIST": "127.0.0.1,127.0.0.1"}
    assert int(port) != 29500 and not (distrun_home / "jobs.db").exists()
    text = run_cli("plan", str(EXAMPLE)).stdout
    assert "[1/3] rank_3" in text and "RANK=3" in text
    assert "  AZ_BATCH_HOST_LIST=127.0.0.1,127.0.0.1" in text.split("node 0")[0]  # under "every process"


def test_master_port_can_be_pinned(run_cli, write_job):
    job = write_job("command: echo $MASTER_PORT\nenvironment_variables:\n  MASTER_PORT: 31234\n")
    plan = json.loads(run_cli("plan", str(job), "--output", "json").stdout)["plan"]
    assert plan["master_port"] == 31234


def test_two_jobs_at_once_get_different_ports(start_cli, write_job, distrun_home):
    body = """
        command: >-
          python -c "import os, torch.distributed as d; d.init_process_group('gloo'); d.barrier();
          print('port', os.environ['MASTER_PORT'])"
        resources:
          instance_count: 2
    """
    procs = [start_cli("run", str(write_job(body))) for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    ports = {line.split()[-1] for out in outputs for line in out.splitlines() if " port " in line}
    assert len(ports) == 2


def test_unknown_compute_lists_the_known_ones(run_cli, write_job, distrun_home):
    (distrun_home).mkdir(parents=True, exist_ok=True)
    (distrun_home / "config.yaml").write_text("compute:\n  hpc:\n    type: slurm\n    partition: debug\n")
    job = write_job("command: echo hi\ncompute: azureml:gpu-cluster\n")
    result = run_cli("run", str(job))
    assert result.returncode == 2
    assert "unknown compute target 'gpu-cluster'; known targets: local, hpc" in result.stderr


def test_code_snapshot_honours_amlignore_and_refuses_outside_links(run_cli, write_job, distrun_home, tmp_path):
    job = write_job(
        "command: ls\ncode: src\n",
        {".amlignore": "data/\n*.ckpt\n", "train.py": "", "data/big.bin": "x", "old.ckpt": "x"},
    )
    os.symlink("train.py", job.parent / "src" / "link.py")
    assert run_cli("run", str(job), "--name", "snap").returncode == 0
    code = distrun_home / "jobs" / "snap" / "code"
    # outputs/ and logs/ are made in the working folder when the ranks start, as on Azure ML
    assert sorted(p.name for p in code.iterdir()) == [".amlignore", "link.py", "logs", "outputs", "train.py"]
    os.symlink(tmp_path, job.parent / "src" / "escape")
    result = run_cli("run", str(job), "--name", "snap2")
    assert result.returncode == 2 and "outside the code folder" in result.stderr
    assert JobIndex(distrun_home / "jobs.db").get("snap2").status == "Failed"


def test_inputs_are_quoted_and_data_inputs_placed(run_cli, write_job, distrun_home, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("A")
    job = write_job(
        f"""
        command: >-
          python show.py ${{{{inputs.msg}}}} ${{{{inputs.mounted}}}} ${{{{inputs.copied}}}}
          $[[--opt ${{{{inputs.missing}}}}]]
        code: src
        inputs:
          msg: "two words; touch {tmp_path}/pwned"
          mounted:
            type: uri_folder
            path: {data}
          copied:
            type: uri_folder
            path: file://{data}
            mode: download
        """,
        {"show.py": "import sys\nprint(sys.argv[1:])\n"},
    )
    result = run_cli("run", str(job), "--name", "quoted")
    assert result.returncode == 0, result.stderr
    copied = distrun_home / "jobs" / "quoted" / "inputs" / "copied"
    expected = str(["two words; touch " + str(tmp_path) + "/pwned", str(data), str(copied)])
    assert f"[0/0] {expected}" in result.stdout
    assert (copied / "a.txt").read_text() == "A"
    assert not (tmp_path / "pwned").exists()
