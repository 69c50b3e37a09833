"""The Slurm backend's pure parts: target settings, the sbatch script, state mapping, outcome merging."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.slurm.backend import _notes, filesystem_type
from distrun.backends.slurm.client import SlurmJobInfo, parse_scontrol_line
from distrun.backends.slurm.node_agent import TASK_LEVEL_SLURM_VARS, parse_args, rank_env
from distrun.backends.slurm.script import render_batch_script
from distrun.backends.slurm.state import first_failure, job_state
from distrun.backends.slurm.target import SlurmSettings, slurm_time_limit
from distrun.core.errors import DistrunError
from distrun.loading.loader import load_job_data
from distrun.spec.models import JobSpec

JOB_DIR = "/shared/distrun/jobs/calm_otter_1"


def job(**extra: object) -> JobSpec:
    data = {
        "command": "python train.py",
        "resources": {"instance_count": 2},
        "distribution": {"type": "pytorch", "process_count_per_instance": 2},
    }
    data.update(extra)
    return load_job_data(data, Path(".")).spec


def script(spec: JobSpec, **settings: object) -> str:
    target = SlurmSettings.from_settings("hpc", settings)
    return render_batch_script(spec, target, job_name="calm_otter_1", job_dir=JOB_DIR, python="/opt/py/bin/python")


def directives(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


# ---------------------------------------------------------------- the script


def test_script_asks_one_task_per_node_and_starts_one_agent_per_node() -> None:
    text = script(job())
    assert directives(text) == [
        "--job-name=calm_otter_1",
        "--nodes=2",
        "--ntasks-per-node=1",
        f"--output={JOB_DIR}/slurm/output.txt",
        f"--chdir={JOB_DIR}",
        "--export=ALL",
    ]
    srun = [line for line in text.splitlines() if "srun" in line and not line.startswith("#")]
    assert srun == [
        "exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 "
        f"/opt/py/bin/python -m distrun.backends.slurm.node_agent --job-dir {JOB_DIR}"
    ]
    assert "DISTRUN_PORTS=$(/opt/py/bin/python -m distrun.backends.ports 1) || exit 1" in text


def test_target_settings_become_sbatch_options_in_order() -> None:
    text = script(
        job(),
        partition="gpu",
        account="proj1",
        qos="high",
        cpus_per_node=8,
        memory_per_node="64G",
        gpus_per_node=4,
        sbatch_options="--exclusive --constraint=ib",
        setup=["module load cuda/12"],
    )
    found = directives(text)
    for option in (
        "--cpus-per-task=8",
        "--mem=64G",
        "--gpus-per-node=4",
        "--partition=gpu",
        "--account=proj1",
        "--qos=high",
        "--exclusive",
        "--constraint=ib",
    ):
        assert option in found
    # srun no longer inherits --cpus-per-task (Slurm 22.05+): the step asks again.
    assert "--kill-on-bad-exit=1 --cpus-per-task=8 --gpus-per-node=4 " in text
    assert text.index("module load cuda/12") < text.index("exec srun")


def test_job_resources_properties_win_over_the_target() -> None:
    spec = job(resources={"instance_count": 3, "properties": {"cpus_per_node": 2, "gpus_per_node": "a100:1"}})
    found = directives(script(spec, cpus_per_node=16))
    assert "--nodes=3" in found and "--cpus-per-task=2" in found and "--gpus-per-node=a100:1" in found


def test_pinned_master_port_is_used_as_is() -> None:
    text = script(job(environment_variables={"MASTER_PORT": 29400}))
    assert "# MASTER_PORT 29400 is pinned by the job's environment_variables" in text
    assert "distrun.backends.ports" not in text


def test_tensorflow_task_ports_are_found_on_the_first_node_too() -> None:
    spec = job(distribution={"type": "tensorflow", "worker_count": 2, "parameter_server_count": 1})
    free_ports = "DISTRUN_PORTS=$(/opt/py/bin/python -m distrun.backends.ports 4) || exit 1"
    assert free_ports in script(spec)


def test_time_limit_is_a_backstop_behind_the_agents_timeout() -> None:
    target = SlurmSettings.from_settings("hpc", {"time_limit": "2:00:00"})
    assert slurm_time_limit(job(), target) == "2:00:00"  # no limits.timeout: the target's default
    assert slurm_time_limit(job(limits={"timeout": 10}), target) == "1"  # 10 s + grace 10 s + margin: 1 min
    assert slurm_time_limit(job(limits={"timeout": 3600, "grace_period": 30}), target) == "61"
    assert "--time=1" in directives(script(job(limits={"timeout": 10})))
    # A timeout of 30 days is an ordinary training job; one beyond any wait is asked for as 100 years.
    assert slurm_time_limit(job(limits={"timeout": 30 * 86400, "grace_period": 0}), target) == "43201"
    assert slurm_time_limit(job(limits={"timeout": 1e300, "grace_period": 1e300}), target) == str(100 * 365 * 1440)


def test_keys_with_no_meaning_on_slurm_are_noted_once(tmp_path: Path) -> None:
    target = SlurmSettings.from_settings("hpc", {})
    noted = _notes(
        job(resources={"instance_count": 2, "shm_size": "8g", "docker_args": "--ipc=host"}), target, tmp_path
    )
    unused = [note for note in noted if "no meaning on Slurm compute" in note]
    assert unused == [
        "resources.shm_size, resources.docker_args: no meaning on Slurm compute; recorded with the job, not used"
    ]
    assert not any("no meaning" in note for note in _notes(job(), target, tmp_path))


def test_job_dir_with_spaces_is_quoted() -> None:
    target = SlurmSettings.from_settings("hpc", {})
    text = render_batch_script(job(), target, job_name="x", job_dir="/shared/my jobs/x", python="python3")
    assert '#SBATCH --output="/shared/my jobs/x/slurm/output.txt"' in text
    assert "--job-dir '/shared/my jobs/x'" in text


# ---------------------------------------------------------------- target settings
# A misspelled setting, and the error's form, are the contract's: tests/unit/test_backend_conformance.py.


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"cpus_per_node": 0}, "cpus_per_node"),
        ({"memory_per_node": "lots"}, "memory_per_node"),
        ({"sbatch_options": ["--nodes=4"]}, "set by distrun from the job"),
        ({"sbatch_options": ["exclusive"]}, "is not an sbatch option"),
    ],
)
def test_bad_settings_are_explained(settings: dict[str, object], expected: str) -> None:
    with pytest.raises(DistrunError) as caught:
        SlurmSettings.from_settings("hpc", settings)
    assert expected in caught.value.message
    assert caught.value.message.startswith("compute target 'hpc' (slurm): ")


# ---------------------------------------------------------------- Slurm's answers


def test_parse_scontrol_oneliner() -> None:
    line = (
        "JobId=7 JobName=calm_otter_1 JobState=PENDING Reason=Resources Dependency=(null) "
        "TRES=cpu=2,node=2,billing=2 AllocNode:Sid=login:42 NtasksPerN:B:S:C=1:0:*:* ExitCode=0:0"
    )
    fields = parse_scontrol_line(line)
    assert fields["JobState"] == "PENDING" and fields["Reason"] == "Resources"
    assert fields["TRES"] == "cpu=2,node=2,billing=2" and fields["AllocNode:Sid"] == "login:42"


# ---------------------------------------------------------------- merging node outcomes
# Slurm's state words alone -> JobStatus: the table in tests/unit/test_backend_conformance.py.


def outcome(node: int, status: str, failed_at: float | None = None, rank: int | None = None) -> NodeOutcome:
    root = None
    if rank is not None:
        root = {"rank": rank, "node_rank": node, "reason": f"rank {rank} on node {node} exited with code 1"}
    reason = root["reason"] if root else ("all processes completed" if status == "Completed" else status)
    data = {"node_rank": node, "status": status, "reason": reason, "root_cause": root, "failed_at": failed_at}
    return NodeOutcome.from_dict(data)


def test_the_earliest_failure_across_nodes_is_the_root_cause() -> None:
    # Node 1's rank 3 failed first; node 0's rank 0 failed after it (its peer was gone).
    outcomes = [outcome(0, "Failed", failed_at=100.4, rank=0), outcome(1, "Failed", failed_at=100.1, rank=3)]
    assert first_failure(outcomes).node_rank == 1
    state = job_state(SlurmJobInfo("7", "FAILED"), outcomes, 2)
    assert state.status == "Failed" and state.root_cause["rank"] == 3


def test_a_failure_waits_for_every_node_while_slurm_still_runs_the_job() -> None:
    outcomes = [outcome(0, "Failed", failed_at=100.4, rank=0)]
    assert job_state(SlurmJobInfo("7", "RUNNING"), outcomes, 2).status == "Running"
    assert job_state(SlurmJobInfo("7", "COMPLETING"), outcomes, 2).status == "Finalizing"


def test_completed_only_when_every_node_completed() -> None:
    both = [outcome(0, "Completed"), outcome(1, "Completed")]
    assert job_state(SlurmJobInfo("7", "COMPLETED"), both, 2).status == "Completed"
    assert job_state(SlurmJobInfo("7", "COMPLETING"), both, 2).status == "Finalizing"
    # Aged out of the controller (no accounting): the outcomes alone decide.
    assert job_state(SlurmJobInfo("7", None), both, 2).status == "Completed"


def test_cancel_wins_over_failures_it_caused_but_not_over_earlier_ones() -> None:
    stopped = [outcome(0, "Canceled"), outcome(1, "Canceled")]
    assert job_state(SlurmJobInfo("7", "CANCELLED"), stopped, 2, canceled_at=50.0).status == "Canceled"
    assert job_state(SlurmJobInfo("7", "RUNNING"), [], 2, canceled_at=50.0).status == "CancelRequested"
    failed_before = [outcome(0, "Canceled"), outcome(1, "Failed", failed_at=40.0, rank=2)]
    assert job_state(SlurmJobInfo("7", "FAILED"), failed_before, 2, canceled_at=50.0).status == "Failed"


def test_a_job_canceled_while_queued_is_canceled_at_once() -> None:
    info = SlurmJobInfo("7", "CANCELLED", node_list="", end_time=1000.0)
    assert job_state(info, [], 2, canceled_at=999.0, now=1000.5).status == "Canceled"
    assert job_state(SlurmJobInfo("7", "PENDING", reason="Resources"), [], 2).reason == "Resources"


def test_slurm_ending_the_job_names_slurms_reason() -> None:
    stopped = [outcome(0, "Canceled"), outcome(1, "Canceled")]
    state = job_state(SlurmJobInfo("7", "TIMEOUT"), stopped, 2)
    assert (state.status, state.reason) == ("Failed", "Slurm's time limit was reached")
    state = job_state(SlurmJobInfo("7", "CANCELLED"), stopped, 2)
    assert state.status == "Canceled" and "scancel" in state.reason


def test_missing_outcomes_point_at_the_shared_filesystem() -> None:
    info = SlurmJobInfo("7", "FAILED", exit_code="2:0", node_list="n[1-2]", end_time=1000.0)
    waiting = job_state(info, [outcome(0, "Completed")], 2, now=1005.0)
    assert waiting.status == "Finalizing"  # NFS may show the file a moment later
    state = job_state(info, [outcome(0, "Completed")], 2, now=1100.0)
    assert state.status == "Failed"
    assert "node(s) 1 wrote no outcome" in state.reason and "DISTRUN_HOME" in state.reason


def test_ranks_do_not_see_the_agents_task_variables() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_NODEID": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "HOME": "/root"}
    kept = rank_env(env)
    assert kept == {"SLURM_JOB_ID": "7", "SLURM_NODEID": "1", "HOME": "/root"}
    assert "SLURM_LOCALID" in TASK_LEVEL_SLURM_VARS


MOUNTS = """overlay / overlay rw 0 0
tmpfs /tmp tmpfs rw 0 0
nfs1:/export/home /shared/home nfs4 rw 0 0
"""


def test_filesystem_type_is_the_longest_mount_above_the_path() -> None:
    assert filesystem_type(Path("/shared/home/me/.distrun"), MOUNTS) == "nfs4"
    assert filesystem_type(Path("/tmp/distrun-home"), MOUNTS) == "tmpfs"
    assert filesystem_type(Path("/root/.distrun"), MOUNTS) == "overlay"


def test_the_node_agent_reads_the_batch_scripts_form_and_any_other_through_argparse(capsys) -> None:
    assert parse_args(["--job-dir", "/shared/my jobs/x"]) == (Path("/shared/my jobs/x"), None)
    assert parse_args(["--job-dir=/shared/x"]) == (Path("/shared/x"), None)
    assert parse_args(["--free-ports", "3"]) == (None, 3)
    for wrong in (["--job-dir"], ["--job-dir", "--free-ports"], ["--job-dir", "/x", "--free-ports", "2"], []):
        with pytest.raises(SystemExit) as exited:
            parse_args(wrong)
        assert exited.value.code == 2, wrong
        assert "usage: python -m distrun.backends.slurm.node_agent" in capsys.readouterr().err
