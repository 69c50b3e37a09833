"""The hung job every engine's hang test runs, and what each must find once it ended hung.

Four gloo ranks on 2 nodes: every rank says it is alive twice a second until its process group
is up (importing torch on a loaded machine is silent for longer than the hang timeout), then
rank 3 (node 1) stalls before the collective that the others enter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from support.jobs import four_rank_job, record, wait_for

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
# Node 0's ranks print nothing for three 2 s hang timeouts while node 1's rank 2 prints twice a second.
QUIET_NODE = """
    import os, time
    for i in range(12):
        if os.environ["RANK"] == "2":
            print("tick", i, flush=True)
        time.sleep(0.5)
"""
# One rank per node. Until rank 0's first metric is in (the first request to distrun's tracking
# server waits for `mlflow server` to start: up to a minute on a loaded machine) every rank says it
# is waiting; then no rank prints while rank 0 logs a metric every 2 s through MLflow's REST API
# (what every MLflow client calls; importing mlflow would cost each rank seconds of CPU), and rank
# 0 writes how long the silence lasted into silent.txt of the code folder, which every node shares.
METRICS_ONLY = """
    import json, os, threading, time, urllib.request
    first = os.environ["RANK"] == "0"
    up = threading.Event()

    def waiting():
        while not up.wait(0.5):
            print("waiting for the tracking server", flush=True)

    def log(step):
        point = {"run_id": os.environ["MLFLOW_RUN_ID"], "key": "loss", "value": 1.0 / (step + 1), "step": step,
                 "timestamp": int(time.time() * 1000)}
        request = urllib.request.Request(os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-metric",
                                         data=json.dumps(point).encode(), headers={"Content-Type": "application/json",
                                         "Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"]})
        urllib.request.urlopen(request, timeout=300).read()

    def wait_for(name):
        while not os.path.exists(name):
            time.sleep(0.2)

    threading.Thread(target=waiting, daemon=True).start()
    log(0) if first else wait_for("ready.txt")
    up.set()
    silent_from = time.time()
    if first:
        open("ready.txt", "w").close()
        for step in range(1, {steps}):
            time.sleep(2)
            log(step)
        open("silent.txt", "w").write(str(time.time() - silent_from))
    else:
        wait_for("silent.txt")
"""
STALL_LINE = 15  # `time.sleep(3600)` in STALLING, once dedented
RANK_NAMES = ["rank 0", "rank 1", "rank 2", "rank 3"]


def stalling_job(write_job, compute: str | None = None, nodes: int = 2) -> Path:  # type: ignore[no-untyped-def]
    """The job file (`write_job` is the fixture), on `compute` when given; 4 ranks on `nodes` (2 or 1)."""
    text = four_rank_job("python train.py", grace=1)
    if nodes == 1:
        text = text.replace("instance_count: 2", "instance_count: 1").replace(
            "process_count_per_instance: 2", "process_count_per_instance: 4"
        )
    if compute is not None:
        text += f"    compute: {compute}\n"
    return write_job(text, {"train.py": STALLING})


def stalled_at(logs: Path) -> float:
    """When rank 3 stalled (it says so in its log); waits until it has."""
    log3 = logs / "std_log_process_03.txt"
    wait_for(lambda: log3.exists() and "stalling at " in log3.read_text(), timeout=180)
    return float(log3.read_text().split("stalling at ")[1].split()[0])


def check_stacks_shown(text: str) -> None:
    """`job stacks` of the stalled job: rank 3 alone at its sleep, every rank answered for."""
    assert "3 processes (rank 0, 1, 2): all_reduce at torch/distributed/" in text, text
    assert f"rank 3: stall at train.py:{STALL_LINE}" in text, text
    assert "did not answer" not in text, text


def check_shown_then_ended_hung(home: Path, name: str, timeout: float, ended: Callable[[], int | None]) -> None:
    """While the job hangs, `job stacks` answers for every rank; then it ends hung (`ended`: its
    `distrun run`'s exit status, once that has exited).

    `job stacks` is asked in this process, as the CLI asks (the CLI's printing is tested on
    local compute): a CLI process's start on a loaded machine can take most of the timeout.
    """
    from distrun.agent.stack_groups import group_stacks, grouped_text
    from distrun.runner.job_stacks import job_stacks
    from distrun.store.layout import Layout

    stalled = stalled_at(home / "jobs" / name / "user_logs")
    answer = job_stacks(Layout(home), name)  # files only: outside any engine's namespace
    assert answer.missing_nodes == [], answer
    check_stacks_shown(grouped_text(group_stacks(answer.processes)))
    assert ended() == 1
    check_ended_hung(home, name, timeout, stalled)


def check_ended_hung(home: Path, name: str, timeout: float, stalled: float, node: int = 1) -> dict:
    """The record and hang/ of the job once it ended: rank 3 to blame, the others in all_reduce."""
    wait_for(lambda: record(home, name)["status"] not in ("Queued", "Starting", "Preparing", "Running"), timeout=120)
    rec = record(home, name)
    assert rec["status"] == "Failed", rec
    said = f"hung: no progress for {timeout:g} s: rank 3 on node {node} is at stall at train.py:"
    assert rec["reason"].startswith(said), rec["reason"]
    root = rec["root_cause"]
    assert (root["rank"], root["node_rank"], root["hang"]) == (3, node, "hang/stacks.json"), root
    assert root["traceback"].endswith(f'train.py", line {STALL_LINE}, in stall'), root["traceback"]
    # Ended within the hang timeout (and a few seconds) of rank 3's last word.
    assert rec["ended_at"] - stalled < timeout + 8, rec["ended_at"] - stalled
    folder = home / "jobs" / name / "hang"
    stacks = json.loads((folder / "stacks.json").read_text())
    by_rank = {p["who"]: p for p in stacks["processes"]}
    assert sorted(by_rank) == RANK_NAMES, sorted(by_rank)
    for other in RANK_NAMES[:3]:
        main = next(t for t in by_rank[other]["threads"] if t["os_thread_id"] == by_rank[other]["pid"])
        assert main["frames"][0]["function"] == "all_reduce", main["frames"][0]
    text = (folder / "stacks.txt").read_text()
    assert "3 processes (rank 0, 1, 2): all_reduce at torch/distributed/" in text, text
    assert f"rank 3: stall at train.py:{STALL_LINE}" in text, text
    return rec
