"""The sweep the engines' sweep tests run, and what every engine must show after it.

A grid of 3 trials, 2 at once, each a 2 nodes x 2 processes PyTorch job: x=2 all-reduces its
ranks over gloo (sum 6) and rank 0 logs `score` = x * 6 for 60 intervals at once; x=-1 fails on
rank 1; x=0.5 logs x * 6 every 3 s for 3 minutes, so a bandit policy can stop it only on values
read while it runs (it skips the training, which costs seconds of CPU a rank). On this 2-core machine a local
sweep would run one 4-process trial at once (its cores); on a cluster 2 run at once. Rank 0 calls the MLflow server's
REST API (what every MLflow client calls) rather than import mlflow, which takes seconds of CPU.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from support.jobs import record

TRIAL = """
    import json, os, sys, time, urllib.request
    x, rank = float(sys.argv[1]), int(os.environ["RANK"])
    print(f"rank {rank} on {os.uname().nodename} x={x}", flush=True)


    def log(steps, value):
        now = int(time.time() * 1000)
        points = [{"key": "score", "value": value, "step": s, "timestamp": now} for s in steps]
        body = json.dumps({"run_id": os.environ["MLFLOW_RUN_ID"], "metrics": points}).encode()
        request = urllib.request.Request(os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-batch",
                                         data=body, headers={"Content-Type": "application/json",
                                         "Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"]})
        for attempt in range(60):  # distrun's MLflow server may still be starting (minutes on a loaded machine)
            try:
                print("logged", len(points), urllib.request.urlopen(request, timeout=30).status, flush=True)
                return
            except OSError as exc:
                print("not logged yet:", exc, flush=True)
                time.sleep(3)


    if x < 0:  # fails on rank 1; the other ranks wait to be stopped with the job
        if rank == 1:
            raise ValueError(f"no score for x={x} on rank {rank}")
        time.sleep(300)
    if x < 1:  # poor: rank 0 logs x * 6 every 3 s for 3 minutes (it never trains: the policy stops it)
        for step in range(60 if rank == 0 else 0):
            log([step], x * 6)
            time.sleep(3)
        time.sleep(180)
        sys.exit(0)
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    total = torch.ones(1) * dist.get_rank()
    dist.all_reduce(total)
    print(f"rank {rank} of {dist.get_world_size()} sum {int(total.item())}", flush=True)
    if rank == 0:  # 60 intervals at once: the poor trial's are compared with these while it runs
        log(range(60), x * total.item())
    dist.barrier()
    dist.destroy_process_group()
"""

SWEEP = """
    type: sweep
    trial:
      command: python trial.py ${{search_space.x}}
      code: src
      resources: {instance_count: 2}
      distribution: {type: pytorch, process_count_per_instance: 2}
      limits: {grace_period: 3}
    search_space:
      x: {type: choice, values: [2, -1, 0.5]}
    sampling_algorithm: grid
    objective: {goal: maximize, primary_metric: score}
    early_termination: {type: bandit, slack_factor: 0.1, evaluation_interval: 1}
    limits: {max_concurrent_trials: 2}
"""


def write_sweep(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "trial.py").write_text(textwrap.dedent(TRIAL), encoding="utf-8")
    sweep = folder / "sweep.yml"
    sweep.write_text(textwrap.dedent(SWEEP), encoding="utf-8")
    return sweep


def checked_trials(home: Path, name: str, compute: str, out: str) -> dict[str, dict[str, Any]]:
    """The trials' job records, checked: each a 4-rank job on `compute` naming the sweep, at most 2
    at once; trial_0 completed with its score read from its run, trial_1 failed on rank 1 and the
    sweep went on, trial_2 stopped by the policy on values it logged while running; trial_0 best."""
    assert "Status: Completed" in out, out[-4000:]
    assert f"2 at once on {compute}; maximize score" in out, out[:2000]
    sweep = record(home, name)
    steps = sweep["steps"]
    assert [(k, s["status"], s["compute"], s["parameters"]) for k, s in steps.items()] == [
        ("trial_0", "Completed", compute, {"x": 2}),
        ("trial_1", "Failed", compute, {"x": -1}),
        ("trial_2", "Canceled", compute, {"x": 0.5}),
    ], steps
    trials = {key: record(home, f"{name}.{key}") for key in steps}
    for key, trial in trials.items():
        assert (trial["parent"], trial["compute"], trial["status"]) == (name, compute, steps[key]["status"])
        assert sorted(p["rank"] for p in trial["processes"]) == [0, 1, 2, 3], trial["processes"]
        assert f"[{key}] started as job {name}.{key} on {compute}, 4 processes" in out
    # Never more than 2 at once: each trial started when fewer than 2 others were running.
    for key, state in steps.items():
        others = [s for k, s in steps.items() if k != key and s["started_at"] < state["started_at"]]
        assert sum(1 for s in others if s["ended_at"] > state["started_at"]) < 2, steps
    # trial_0: every rank took part in the all-reduce; its 60 values were read from its MLflow run.
    logs = home / "jobs" / f"{name}.trial_0" / "user_logs"
    assert sorted(p.name for p in logs.iterdir()) == [f"std_log_process_{r:02d}.txt" for r in range(4)]
    for rank in range(4):
        assert f"rank {rank} of 4 sum 6\n" in (logs / f"std_log_process_{rank:02d}.txt").read_text()
    assert (steps["trial_0"]["metric"], steps["trial_0"]["intervals"]) == (12.0, 60)
    assert "[trial_0] score = 12 (interval 60)" in out
    # trial_1: failed on rank 1, with its traceback as the root cause; the sweep went on.
    cause = trials["trial_1"]["root_cause"]
    assert cause["name"] == "rank_1" and "ValueError: no score for x=-1.0 on rank 1" in cause["traceback"], cause
    # trial_2: canceled by the policy from values read while it ran (it logs for 3 minutes).
    assert steps["trial_2"]["reason"].startswith("stopped early by bandit policy at interval "), steps["trial_2"]
    assert 1 <= steps["trial_2"]["intervals"] < 60 and steps["trial_2"]["metric"] == 3.0, steps["trial_2"]
    assert sweep["sweep"]["best"]["trial"] == "trial_0" and sweep["sweep"]["best"]["metric"] == 12.0
    assert f"Best trial: trial_0 (job {name}.trial_0), score 12 (maximize)" in out
    return trials
