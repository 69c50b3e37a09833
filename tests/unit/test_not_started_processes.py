"""A node stopped before its processes started still lists them: the record names every planned process."""

from __future__ import annotations

from pathlib import Path

from distrun.agent.node import stopped_before_start
from distrun.agent.node_facts import NodeFacts
from distrun.backends.ray.driver import merged_end
from distrun.cli.views import process_state
from distrun.core.job_status import JobStatus
from distrun.loading.loader import load_job_data
from distrun.plan import build_plan
from distrun.plan.model import Bindings, Placement
from distrun.runner.report import execution_summary
from distrun.store.index import JobRecord
from distrun.ui.job_view import rank_rows

JOB_DIR = "/shared/jobs/quiet_heron_2"
FACTS = NodeFacts(
    node_rank=1,
    node_names=("n0", "n1"),
    addresses=("127.0.0.2", "127.0.0.3"),
    master_port=29500,
    task_ports=(),
    job_dir=Path(JOB_DIR),
    engine="Ray",
)


def node_1_processes():
    data = {
        "command": "python train.py",
        "resources": {"instance_count": 2},
        "distribution": {"type": "pytorch", "process_count_per_instance": 2},
    }
    placement = Placement(hosts=FACTS.addresses, master_port=29500, job_dir=JOB_DIR, run_id="quiet_heron_2")
    plan = build_plan(load_job_data(data, Path(".")).spec, placement, Bindings())
    return plan.nodes[1].processes


def test_a_node_stopped_while_planning_lists_its_ranks_as_not_started() -> None:
    outcome = stopped_before_start(FACTS, 15, 100.0, node_1_processes(), Path(JOB_DIR) / "user_logs")
    assert outcome.status == JobStatus.CANCELED
    assert outcome.reason == "stopped by Ray (SIGTERM) before the processes started"
    assert [(p["name"], p["rank"], p["host"], p["address"]) for p in outcome.processes] == [
        ("rank_2", 2, "n1", "127.0.0.3"),
        ("rank_3", 3, "n1", "127.0.0.3"),
    ]
    for proc in outcome.processes:
        assert proc["never_started"] and proc["stopped_by_distrun"] and proc["pid"] is None
        assert proc["log"] == f"{JOB_DIR}/user_logs/std_log_process_0{proc['rank']}.txt"
        assert process_state(proc) == "not started"


def test_the_jobs_record_names_the_failure_the_stopped_rank_and_the_ranks_never_started() -> None:
    ran = [
        {"name": "rank_0", "rank": 0, "node_rank": 0, "log": "/n0/rank_0.txt", "stopped_by_distrun": True},
        {"name": "rank_1", "rank": 1, "node_rank": 0, "log": "/n0/rank_1.txt", "exit_code": 1},
    ]
    failed = {"status": "Failed", "reason": "rank 1 on node 0 exited with code 1", "failed_at": 5.0, "processes": ran}
    stopped = stopped_before_start(FACTS, 15, 6.0, node_1_processes(), Path(JOB_DIR) / "user_logs").to_dict()
    end = merged_end([failed, stopped], None, "/home/jobs/quiet_heron_2/user_logs")
    assert end.status == JobStatus.FAILED
    assert [(p["name"], process_state(p)) for p in end.processes] == [
        ("rank_0", "stopped"),
        ("rank_1", "failed"),
        ("rank_2", "not started"),
        ("rank_3", "not started"),
    ]
    record = JobRecord(
        name="quiet_heron_2",
        status=end.status,
        compute="ray",
        folder="/home/jobs/quiet_heron_2",
        created_at=1.0,
        reason=end.reason,
        root_cause={"name": "rank_1", "node_rank": 0, "host": "n0", "after_ms": 1200.0, "log": "/n0/rank_1.txt"},
        processes=end.processes,
    )
    summary = execution_summary(record)
    assert "Stopped by distrun: rank_0\n" in summary
    assert "Not started (stopped before their turn): rank_2, rank_3\n" in summary
    # The web UI's per-rank table says the same, not "running" for a process with no exit.
    assert [(row.name, row.state) for row in rank_rows(record, {})][2:] == [
        ("rank_2", "not started"),
        ("rank_3", "not started"),
    ]
