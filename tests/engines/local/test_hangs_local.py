"""Hung jobs on local compute: real gloo ranks stuck in a collective, real stacks read with py-spy.

Grouping and the odd one out are pure: tests/unit/test_stack_groups.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import four_rank_job, record, wait_for
from support.ui_server import running_ui

HANG_TIMEOUT = 4

# Every rank says it is alive twice a second until its process group is up (importing torch on
# a loaded machine is silent for longer than the hang timeout), then rank 3 stalls before the
# collective that the others enter.
STALLING = """
    import os, threading, time
    ready = threading.Event()

    def heartbeat():
        while not ready.wait(0.5):
            print("starting", flush=True)

    threading.Thread(target=heartbeat, daemon=True).start()
    import torch
    import torch.distributed as dist

    def stall():
        print("stalling at", time.time(), flush=True)
        time.sleep(3600)

    def main():
        dist.init_process_group("gloo")
        ready.set()
        if dist.get_rank() == 3:
            stall()
        dist.all_reduce(torch.ones(1))

    main()
"""
STALL_LINE = 15  # `time.sleep(3600)` in STALLING, once dedented


def test_a_rank_that_never_reaches_the_collective_is_named_with_its_stack(run_cli, write_job, distrun_home):
    job = write_job(four_rank_job("python train.py", grace=1), {"train.py": STALLING})
    done = run_cli("run", str(job), "--name", "hung", "--hang-timeout", str(HANG_TIMEOUT))
    assert done.returncode == 1, done.stdout + done.stderr
    rec = record(distrun_home, "hung")
    assert rec["status"] == "Failed"
    said = f"hung: no progress for {HANG_TIMEOUT} s: rank 3 on node 1 is at stall at train.py:"
    assert rec["reason"].startswith(said), rec["reason"]
    root = rec["root_cause"]
    assert (root["rank"], root["node_rank"], root["hang"]) == (3, 1, "hang/stacks.json")
    assert root["traceback"].endswith(f'train.py", line {STALL_LINE}, in stall'), root["traceback"]
    # The job ended within the hang timeout (and a few seconds) of rank 3's last word.
    log3 = (distrun_home / "jobs" / "hung" / "user_logs" / "std_log_process_03.txt").read_text()
    stalled_at = float(log3.split("stalling at ")[1].split()[0])
    assert rec["ended_at"] - stalled_at < HANG_TIMEOUT + 8, (rec["ended_at"] - stalled_at, log3)
    folder = distrun_home / "jobs" / "hung" / "hang"
    stacks = json.loads((folder / "stacks.json").read_text())
    by_rank = {p["who"]: p for p in stacks["processes"]}
    assert sorted(by_rank) == ["rank 0", "rank 1", "rank 2", "rank 3"]
    for other in ("rank 0", "rank 1", "rank 2"):
        main = next(t for t in by_rank[other]["threads"] if t["os_thread_id"] == by_rank[other]["pid"])
        assert main["frames"][0]["function"] == "all_reduce", main["frames"][0]
    text = (folder / "stacks.txt").read_text()
    assert "3 processes (rank 0, 1, 2): all_reduce at torch/distributed/" in text
    assert f"rank 3: stall at train.py:{STALL_LINE}" in text
    assert "hung: no progress" in done.stdout and f"line {STALL_LINE}, in stall" in done.stdout


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
