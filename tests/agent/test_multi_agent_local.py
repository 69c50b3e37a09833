"""The multi-agent path on local compute: one node agent process per simulated node, real gloo ranks.

Local compute normally runs every simulated node in one gang. Here each node gets its own agent
process (`python -m distrun.agent.node --facts ...`), as on a cluster, and the agents report
through the shared-folder outcome channel: what Slurm does, without Slurm.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import cli_env
from support.jobs import four_rank_job

GLOO_RANK = """
import os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == int(os.environ.get("FAIL_RANK", "-1")):
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
t = torch.ones(1) * rank
dist.all_reduce(t)
print(f"rank {rank} of {dist.get_world_size()} sum {int(t.item())}", flush=True)
dist.destroy_process_group()
"""


def run_agents(write_job, distrun_home: Path, name: str, env: dict[str, str]):
    """Prepare a 2-node x 2-rank job on local compute and run one agent process per node, like an engine.

    Like Slurm's --kill-on-bad-exit, an agent that exits non-zero makes the "engine" stop the others.
    """
    from distrun.agent.node_facts import NodeFacts
    from distrun.agent.outcome_channel import FolderOutcomeChannel
    from distrun.backends.ports import free_ports
    from distrun.loading.loader import load_job_file
    from distrun.prepare.compute import resolve_target
    from distrun.prepare.submission import prepare_job
    from distrun.store.layout import Layout, NodeChannelPaths

    job = write_job(four_rank_job("python train.py"), {"train.py": GLOO_RANK})
    layout = Layout()
    loaded = load_job_file(str(job), ())
    prepared = prepare_job(loaded, layout, resolve_target("local", layout.config_path), name)
    channel_paths = NodeChannelPaths(prepared.folder.root / "agents")
    (master_port,) = free_ports(1, address="127.0.0.1")
    agents = []
    for node_rank in range(2):
        facts = NodeFacts(
            node_rank=node_rank,
            node_names=("sim0", "sim1"),
            addresses=("127.0.0.1", "127.0.0.1"),
            master_port=master_port,
            task_ports=(),
            job_dir=prepared.folder.root,
            engine="local",
            engine_job_id=name,
        )
        data = facts.to_dict()
        del data["base_env"]  # the agent's own environment, as an engine's node would give it
        facts_file = prepared.folder.root / f"facts_{node_rank}.json"
        facts_file.write_text(json.dumps(data))
        agents.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distrun.agent.node",
                    "--facts",
                    str(facts_file),
                    "--channel",
                    str(channel_paths.folder),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=cli_env(distrun_home, env),
            )
        )
    give_up = time.monotonic() + 300
    stopped = False
    while any(a.poll() is None for a in agents) and time.monotonic() < give_up:
        if not stopped and any(a.returncode not in (None, 0) for a in agents):
            stopped = True
            for other in agents:
                if other.poll() is None:
                    other.send_signal(signal.SIGTERM)
        time.sleep(0.1)
    outputs = []
    for agent in agents:
        if agent.poll() is None:
            agent.kill()
        outputs.append(agent.communicate(timeout=60)[0].decode())
    return prepared, FolderOutcomeChannel(channel_paths, 2), [a.returncode for a in agents], outputs


@pytest.mark.slow
def test_one_agent_per_simulated_node_runs_real_gloo_ranks_and_reports_through_the_folder(write_job, distrun_home):
    from distrun.backends.cluster import first_failure

    prepared, channel, codes, outputs = run_agents(write_job, distrun_home, "agents_ok", {})
    assert codes == [0, 0], outputs
    outcomes = channel.outcomes()
    assert sorted(outcomes) == [0, 1]
    assert [outcomes[n].status for n in (0, 1)] == ["Completed", "Completed"]
    assert [len(outcomes[n].processes) for n in (0, 1)] == [2, 2]
    assert {p["host"] for p in outcomes[1].processes} == {"sim1"}
    assert first_failure(list(outcomes.values())) is None
    for rank in range(4):
        log = (prepared.folder.user_logs / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} of 4 sum 6" in log
    # Node 0 wrote the plan every node built, with the real hosts.
    plan = json.loads(prepared.folder.plan_json.read_text())
    assert [node["host"] for node in plan["nodes"]] == ["127.0.0.1", "127.0.0.1"]
    assert "node 0 of 2 (sim0, 127.0.0.1), local job agents_ok" in outputs[0]


@pytest.mark.slow
def test_the_first_failure_across_agents_is_the_root_cause(write_job, distrun_home):
    from distrun.backends.cluster import first_failure

    _, channel, codes, outputs = run_agents(write_job, distrun_home, "agents_fail", {"FAIL_RANK": "3"})
    assert codes[1] == 1, outputs  # node 1 holds rank 3
    outcomes = channel.outcomes()
    assert sorted(outcomes) == [0, 1]
    cause = first_failure(list(outcomes.values()))
    assert cause is not None and cause.node_rank == 1
    assert cause.root_cause["rank"] == 3 and cause.root_cause["host"] == "sim1"
    assert cause.root_cause["exit_code"] == 3
    assert outcomes[0].status in ("Failed", "Canceled")  # its ranks lost their peer, or were stopped
    if outcomes[0].status == "Failed":
        assert outcomes[0].failed_at > cause.failed_at


def test_a_nodes_launch_marker_is_unique_on_the_machine_even_for_the_same_job_and_engine_id(tmp_path):
    """Two clusters on one machine number their jobs alike (two Slurm test clusters side by side
    both call a job 12): the marker a node's sweep and cgroup go by must still differ."""
    from distrun.agent.node import node_launch_id
    from distrun.agent.node_facts import NodeFacts

    def facts() -> NodeFacts:
        return NodeFacts(
            node_rank=1,
            node_names=("n1", "n2"),
            addresses=("127.0.0.1", "127.0.0.1"),
            master_port=29500,
            task_ports=(),
            job_dir=tmp_path / "peer",
            engine="Slurm",
            engine_job_id="12",
        )

    first, second = node_launch_id(facts()), node_launch_id(facts())
    assert first != second
    for marker in (first, second):
        assert marker.startswith("peer-slurm12-") and marker.endswith("-node1")
