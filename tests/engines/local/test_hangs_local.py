"""Hung jobs on local compute: real gloo ranks stuck in a collective, real stacks read with py-spy.

Grouping and the odd one out are pure: tests/unit/test_stack_groups.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.hang_jobs import STALL_LINE, STALLING, check_ended_hung, stalled_at, stalling_job
from support.jobs import four_rank_job, record, wait_for
from support.ui_server import running_ui

HANG_TIMEOUT = 4


def test_a_rank_that_never_reaches_the_collective_is_named_with_its_stack(run_cli, write_job, distrun_home):
    done = run_cli("run", str(stalling_job(write_job)), "--name", "hung", "--hang-timeout", str(HANG_TIMEOUT))
    assert done.returncode == 1, done.stdout + done.stderr
    check_ended_hung(distrun_home, "hung", HANG_TIMEOUT, stalled_at(distrun_home / "jobs" / "hung" / "user_logs"))
    assert "hung: no progress" in done.stdout and f"line {STALL_LINE}, in stall" in done.stdout


def test_of_two_ranks_the_one_outside_the_collective_is_named(run_cli, write_job, distrun_home):
    # Two ranks on one node: rank 1 stalls, rank 0 waits in all_reduce. Two groups of one: no
    # majority, and the rank inside the collective is the one waiting.
    text = four_rank_job("python train.py", grace=1).replace("instance_count: 2", "instance_count: 1")
    job = write_job(text, {"train.py": STALLING.replace("dist.get_rank() == 3", "dist.get_rank() == 1")})
    done = run_cli("run", str(job), "--name", "hung-two", "--hang-timeout", str(HANG_TIMEOUT))
    assert done.returncode == 1, done.stdout + done.stderr
    rec = record(distrun_home, "hung-two")
    said = f"hung: no progress for {HANG_TIMEOUT:g} s: rank 1 on node 0 is at stall at train.py:{STALL_LINE}"
    assert rec["reason"].startswith(said), rec["reason"]
    assert "; 1 process (rank 0) waits inside a collective at all_reduce at torch/distributed/" in rec["reason"]
    assert (rec["root_cause"]["rank"], rec["root_cause"]["node_rank"]) == (1, 0), rec["root_cause"]


WAITING = """
    import os, signal, time
    if os.environ["RANK"] == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def wait_here():
        time.sleep(3600)

    print("up", flush=True)
    wait_here()
"""


# Ranks 0 and 1 are Python (1 ignores SIGTERM), rank 2 a shell loop, rank 3 exits at once.
RANKS = """
    case "$RANK" in
      3) exit 0 ;;
      2) while true; do sleep 0.2; done ;;
      *) exec python wait.py ;;
    esac
"""


def test_job_stacks_answers_for_every_process(run_cli, start_cli, write_job, distrun_home):
    job = write_job(
        """
        command: bash ranks.sh
        code: src
        resources:
          instance_count: 1
        distribution:
          type: pytorch
          process_count_per_instance: 4
        limits:
          grace_period: 1
        """,
        {"wait.py": WAITING, "ranks.sh": RANKS},
    )
    started = start_cli("run", str(job), "--name", "waiting")
    logs = distrun_home / "jobs" / "waiting" / "user_logs"
    wait_for(lambda: all(_says_up(logs / f"std_log_process_0{r}.txt") for r in (0, 1)), timeout=120)
    shown = run_cli("job", "stacks", "waiting")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "2 processes (rank 0, 1): wait_here at wait.py:7 <- <module> at wait.py:10" in shown.stdout
    assert "rank 2: not a Python process (bash; py-spy: " in shown.stdout
    assert "rank 3: has exited with code 0" in shown.stdout
    as_json = json.loads(run_cli("job", "stacks", "waiting", "-o", "json").stdout)
    assert [p["who"] for p in as_json["processes"]] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert as_json["missing_nodes"] == [] and as_json["processes"][2]["threads"] == []
    # The request files are gone once answered.
    folder = distrun_home / "jobs" / "waiting" / "stacks"
    assert list((folder / "requests").iterdir()) == [] and list((folder / "answers").iterdir()) == []
    # The web UI's Stacks button reads them the same way.
    with running_ui(distrun_home) as ui:
        assert 'id="stacks-button"' in ui.get("/jobs/waiting").text
        page = ui.get("/jobs/waiting/stacks").text
    assert "2 processes (rank 0, 1): wait_here at wait.py:7 &lt;- &lt;module&gt; at wait.py:10" in page
    assert "rank 2: not a Python process (bash; py-spy: " in page
    run_cli("job", "cancel", "waiting")
    started.wait(timeout=60)
    assert record(distrun_home, "waiting")["status"] == "Canceled"
    ended = run_cli("job", "stacks", "waiting")
    assert ended.returncode != 0
    assert "job waiting is Canceled: only a running job's processes have stacks" in ended.stderr


def _says_up(path: Path) -> bool:
    return path.exists() and "up" in path.read_text()
