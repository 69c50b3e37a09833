"""Restarts and preemption on Slurm: the batch script's attempt loop, on the real 2-node test cluster.

The same jobs as tests/engines/local/test_restarts.py (local compute): a rank that fails on attempt 0 only, a
no-restart exit code, a SIGTERM from outside (`scancel --signal=TERM --batch`, what Slurm's
`--signal=B:TERM@...` warning before preemption delivers). The pure parts come first.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.slurm.attempts import attempt_state, read_preempted, restart_aware_status
from distrun.backends.slurm.script import render_batch_script
from distrun.backends.slurm.target import SlurmSettings
from distrun.core.job_status import JobStatus
from distrun.spec.models import JobSpec
from support.clusters.slurm_cluster import SlurmCluster
from support.jobs import processes_of_job, record, wait_for
from support.restart_jobs import CHECKPOINTS, FAIL_ONCE, RANKS, with_limits

# ---------------------------------------------------------------- pure: script and states


def _script(limits: dict) -> str:
    spec = JobSpec.model_validate({"command": "python train.py", "limits": limits})
    target = SlurmSettings.from_settings("hpc", {"partition": "debug"})
    return render_batch_script(spec, target, job_name="j", job_dir="/shared/jobs/j", python="python3")


def test_a_job_with_restarts_is_requeueable_and_loops_over_attempts() -> None:
    script = _script({"max_restarts": 2, "grace_period": 60})
    for line in ("#SBATCH --requeue", "#SBATCH --open-mode=append", "#SBATCH --signal=B:TERM@90"):
        assert line in script.splitlines()
    assert "trap preempted TERM" in script
    assert 'export DISTRUN_RESTART_COUNT="$NEXT" TORCHELASTIC_RESTART_COUNT="$NEXT"' in script
    assert 'requeue) scontrol requeue "$SLURM_JOB_ID"; exit 0 ;;' in script
    assert "exec srun" not in script


def test_a_job_without_restarts_keeps_the_plain_script() -> None:
    script = _script({})
    assert "--requeue" not in script and "trap" not in script
    assert "\nexec srun --nodes=1" in script


def test_plan_shows_the_requeue_and_signal_lines(run_cli, write_job):
    # Render is pure: no cluster is asked (the target points nowhere).
    created = run_cli("compute", "create", "--name", "far", "--type", "slurm", "--set", "partition=debug")
    assert created.returncode == 0, created.stderr
    shown = run_cli("plan", str(write_job(with_limits(FAIL_ONCE, "max_restarts: 2"))), "--compute", "far")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    for line in ("#SBATCH --requeue", "#SBATCH --signal=B:TERM@33", "trap preempted TERM"):
        assert line in shown.stdout
    assert "restarts: the batch script runs the attempts" in shown.stdout


def _outcome(node: int, status: JobStatus, failed_at: float | None = None) -> NodeOutcome:
    root = {"name": f"rank_{node}", "exit_code": 3} if status == JobStatus.FAILED else None
    return NodeOutcome(
        node, f"n{node + 1}", status, f"node {node} {status}", 1.0, 2.0, root_cause=root, failed_at=failed_at
    )


def test_an_attempt_ends_failed_before_canceled_before_preempted() -> None:
    failed = [_outcome(0, JobStatus.FAILED, 5.0), _outcome(1, JobStatus.PREEMPTED)]
    assert attempt_state(failed, 2, canceled_at=6.0, preempted="preempted (x)")[0] == JobStatus.FAILED
    # A rank that exits non-zero on the cancel's own SIGTERM (a checkpoint handler) fails after it.
    assert attempt_state(failed, 2, canceled_at=5.0, preempted="preempted (x)")[:2] == (
        JobStatus.CANCELED,
        "canceled by the user",
    )
    stopped = [_outcome(0, JobStatus.CANCELED), _outcome(1, JobStatus.CANCELED)]
    assert attempt_state(stopped, 2, canceled_at=1.0, preempted="preempted (x)")[0] == JobStatus.CANCELED
    assert attempt_state(stopped, 2, canceled_at=None, preempted="preempted (x)")[:2] == (
        JobStatus.PREEMPTED,
        "preempted (x)",
    )
    done = [_outcome(0, JobStatus.COMPLETED), _outcome(1, JobStatus.COMPLETED)]
    assert attempt_state(done, 2, canceled_at=None, preempted=None)[0] == JobStatus.COMPLETED
    status, reason, _ = attempt_state(done[:1], 2, canceled_at=None, preempted=None)
    assert status == JobStatus.FAILED and "node(s) 1 wrote no outcome" in reason


def test_a_rank_ending_on_the_preemptions_own_sigterm_is_not_the_attempts_cause() -> None:
    # scancel signals the ranks too: rank 0's checkpoint handler exits 143 before its agent takes
    # the SIGTERM as a preemption, so node 0 reports Failed while node 1 reports Preempted.
    handler_exit = replace(
        _outcome(0, JobStatus.FAILED, 10.2), root_cause={"name": "rank_0", "exit_code": 143, "signal": None}
    )
    killed = replace(handler_exit, root_cause={"name": "rank_0", "exit_code": None, "signal": "SIGTERM"})
    for victim in (handler_exit, killed):
        # Slurm's own requeue signals everything at once: no time noted, or noted after the exit.
        for noted_at in (None, 10.0, 10.5):
            state = attempt_state(
                [victim, _outcome(1, JobStatus.PREEMPTED)], 2, canceled_at=None, preempted=None, preempted_at=noted_at
            )
            assert state == (JobStatus.PREEMPTED, "preempted (SIGTERM from outside)", None)
    # Any failure after the batch script noted the SIGTERM is the stop's doing (a peer's lost connection).
    after = [_outcome(0, JobStatus.FAILED, 10.2), _outcome(1, JobStatus.CANCELED)]
    assert (
        attempt_state(after, 2, canceled_at=None, preempted="preempted (x)", preempted_at=10.0)[0]
        == JobStatus.PREEMPTED
    )
    # A failure of the job's own before the note stays the cause, and without any preemption so does a 143.
    assert (
        attempt_state(after, 2, canceled_at=None, preempted="preempted (x)", preempted_at=10.5)[0] == JobStatus.FAILED
    )
    alone = [handler_exit, _outcome(1, JobStatus.CANCELED)]
    assert attempt_state(alone, 2, canceled_at=None, preempted=None)[0] == JobStatus.FAILED


def test_the_preemption_note_gives_its_time_and_what_was_seen() -> None:
    assert read_preempted("1795463579.697\nSIGTERM from outside at 2026-11-23T19:52:59Z\n") == (
        "preempted (SIGTERM from outside at 2026-11-23T19:52:59Z)",
        1795463579.697,
    )
    # A note without a time (written by an older batch script) is still a preemption.
    assert read_preempted("SIGTERM from outside\n") == ("preempted (SIGTERM from outside)", None)
    assert read_preempted("") == ("preempted (SIGTERM from outside)", None)


def test_between_attempts_the_job_stays_running_until_slurm_ended_it() -> None:
    failed = (JobStatus.FAILED, "rank 1 failed", {"name": "rank_1"})
    assert restart_aware_status(JobStatus.RUNNING, failed, [])[0] == JobStatus.RUNNING
    first = {"attempt": 0, "status": "Failed", "reason": "rank 1 failed; failed: restart 1 of 2", "restarted": True}
    queued = restart_aware_status(JobStatus.QUEUED, (JobStatus.QUEUED, "", None), [first])
    assert queued == (JobStatus.QUEUED, "attempt 1 after: rank 1 failed; failed: restart 1 of 2", None)
    last = {"attempt": 1, "status": "Preempted", "reason": "preempted; limits.max_preemptions is 0"}
    ended = restart_aware_status(JobStatus.COMPLETED, (JobStatus.COMPLETED, "", None), [first, last])
    assert ended == (JobStatus.PREEMPTED, "preempted; limits.max_preemptions is 0", None)
    # The script died between attempts (killed, or scontrol requeue refused): said, not "Completed".
    lost = restart_aware_status(JobStatus.COMPLETED, (JobStatus.FAILED, "node(s) 0, 1 wrote no outcome", None), [first])
    assert lost[0] == JobStatus.FAILED and lost[1].startswith("Slurm ended the job before attempt 1 ran")


# ---------------------------------------------------------------- real jobs on the cluster


def job_folder(home: Path, name: str) -> Path:
    return home / "jobs" / name


def test_a_rank_failing_on_the_first_attempt_only_completes_on_the_second(run_cli, write_job, hpc, distrun_home):
    job = write_job(with_limits(FAIL_ONCE, "max_restarts: 2"))
    done = run_cli("run", str(job), "--compute", hpc, "--name", "once", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Attempts: 2\n  attempt 0: Failed, rank 1 on node 0 exited with code 3\n" in done.stdout
    rec = record(distrun_home, "once")
    assert rec["status"] == "Completed", rec
    attempts = rec["attempts"]
    assert [(a["attempt"], a["status"], a["restarted"]) for a in attempts] == [
        (0, "Failed", True),
        (1, "Completed", False),
    ]
    assert attempts[0]["root_cause"]["name"] == "rank_1" and attempts[0]["root_cause"]["exit_code"] == 3
    assert attempts[0]["reason"] == "rank 1 on node 0 exited with code 3"
    logs = job_folder(distrun_home, "once") / "user_logs"
    assert attempts[0]["logs"] == "user_logs/attempt_0" and attempts[1]["logs"] == "user_logs"
    assert attempts[0]["root_cause"]["log"] == str(logs / "attempt_0" / "std_log_process_01.txt")
    # Both attempts' logs are kept, each rank saw its attempt number, and the outputs carried over.
    assert (logs / "attempt_0" / "std_log_process_01.txt").read_text() == "rank 1 attempt 0 0\n"
    assert (logs / "std_log_process_01.txt").read_text() == "rank 1 attempt 1 1\n"
    assert (logs / "std_log_process_02.txt").read_text() == "rank 2 attempt 1 1\n"
    # Attempt 0's node outcomes are kept beside the channel; the record's processes are attempt 1's.
    kept = job_folder(distrun_home, "once") / "slurm" / "attempt_0"
    assert json.loads((kept / "node_00.json").read_text())["status"] == "Failed"
    assert [p["exit_code"] for p in rec["processes"]] == [0, 0, 0, 0]


# Attempt 0: rank 1 fails after a moment while the others wait; attempt 1: every rank completes.
FAIL_WHILE_OTHERS_RUN = """python -c "import os, sys, time;
      first = os.environ['DISTRUN_RESTART_COUNT'] == '0';
      print('rank', os.environ['RANK'], 'up', flush=True);
      first and time.sleep(2 if os.environ['RANK'] == '1' else 300);
      sys.exit(3 if first else 0)\""""


def test_the_other_node_stopped_by_a_failure_is_not_preempted(run_cli, write_job, hpc, distrun_home):
    # srun ends node 1's agent with SIGTERM after node 0's rank failed: a failure, not a preemption.
    job = write_job(with_limits(FAIL_WHILE_OTHERS_RUN, "max_restarts: 1"))
    done = run_cli("run", str(job), "--compute", hpc, "--name", "peer", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rec = record(distrun_home, "peer")
    assert [a["status"] for a in rec["attempts"]] == ["Failed", "Completed"]
    kept = job_folder(distrun_home, "peer") / "slurm" / "attempt_0"
    assert json.loads((kept / "node_00.json").read_text())["status"] == "Failed"
    assert json.loads((kept / "node_01.json").read_text())["status"] == "Canceled"


def test_a_no_restart_exit_code_fails_at_once(run_cli, write_job, hpc, distrun_home):
    job = write_job(with_limits(FAIL_ONCE, "max_restarts: 2", "no_restart_exit_codes: [3]"))
    done = run_cli("run", str(job), "--compute", hpc, "--name", "final", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rec = record(distrun_home, "final")
    assert rec["status"] == "Failed"
    assert rec["reason"].endswith("exited with code 3; not restarted: exit code 3 is in limits.no_restart_exit_codes")
    assert [a["status"] for a in rec["attempts"]] == ["Failed"]
    assert not (job_folder(distrun_home, "final") / "user_logs" / "attempt_0").exists()


def _start(run_cli, write_job, home: Path, name: str, *limits: str) -> str:
    """Start the checkpointing job with `limits` in the background; returns once every rank is up."""
    job = write_job(with_limits(CHECKPOINTS, *limits, grace=20))
    created = run_cli("run", "-d", str(job), "--compute", "hpc", "--name", name, "-o", "json")
    assert created.returncode == 0, created.stdout + created.stderr
    logs = job_folder(home, name) / "user_logs"

    def all_up() -> bool:
        files = [logs / f"std_log_process_0{rank}.txt" for rank in RANKS]
        return all(f.is_file() and "attempt 0" in f.read_text() for f in files)

    wait_for(all_up, timeout=120)
    return record(home, name)["backend_id"]


# The test cluster holds a requeued job cred_expire + 1 s and looks at it again every second
# (support.clusters.slurm_cluster); Slurm's defaults would hold it 2 to 3 minutes.
HELD_AT_MOST = 60


def requeue_hold(attempts: list[dict]) -> float:
    """Seconds between the end of attempt 0 and the start of attempt 1 (requeued by Slurm)."""
    return attempts[1]["started_at"] - attempts[0]["ended_at"]


def _ended(home: Path, name: str, cluster: SlurmCluster | None = None) -> dict:
    ended = ("Completed", "Failed", "Preempted", "Canceled")
    try:
        wait_for(lambda: record(home, name)["status"] in ended, timeout=240)
    except AssertionError:
        # What the job said, and what Slurm says of it: a job that never ends explains itself.
        folder = job_folder(home, name)
        said = {"record": record(home, name)}
        for pattern in ("system_logs/*.txt", "slurm/*.txt", "slurm/*.json"):
            for log in sorted(folder.glob(pattern)):
                said[str(log.relative_to(folder))] = log.read_text(errors="replace")[-3000:]
        if cluster is not None:
            shown = cluster.run(["scontrol", "show", "job", str(said["record"]["backend_id"])], check=False)
            said["scontrol show job"] = shown.stdout + shown.stderr
        shown_all = json.dumps(said, indent=1, default=str)
        raise AssertionError(f"job {name} did not end within 240 s: {shown_all}") from None
    return record(home, name)


@pytest.mark.slow  # Slurm holds a requeued job cred_expire + 1 s (6 s on the test cluster)
def test_sigterm_from_outside_preempts_requeues_and_restarts_the_job(
    run_cli,
    write_job,
    hpc,
    slurm_cluster: SlurmCluster,
    distrun_home,
):
    job_id = _start(run_cli, write_job, distrun_home, "spot", "max_restarts: 1")
    # What Slurm's --signal=B:TERM@... delivers before a preemption: SIGTERM to the batch script only.
    slurm_cluster.run(["scancel", "--signal=TERM", "--batch", job_id])
    rec = _ended(distrun_home, "spot", slurm_cluster)
    logs = job_folder(distrun_home, "spot") / "user_logs"
    assert rec["status"] == "Completed", rec
    attempts = rec["attempts"]
    assert [(a["status"], a["restarted"]) for a in attempts] == [("Preempted", True), ("Completed", False)]
    assert attempts[0]["reason"].startswith("preempted (SIGTERM from outside at ")
    assert requeue_hold(attempts) < HELD_AT_MOST
    for rank in RANKS:
        # Every rank had the grace period to save its checkpoint, and attempt 1 resumed from it.
        assert (logs / "attempt_0" / f"std_log_process_0{rank}.txt").read_text().endswith("saved\n")
        assert (logs / f"std_log_process_0{rank}.txt").read_text() == f"rank {rank} attempt 1 resumed True\n"
    wait_for(lambda: processes_of_job("spot") == [], timeout=30)


def test_preemptions_beyond_max_preemptions_end_the_job_preempted(
    run_cli,
    write_job,
    hpc,
    slurm_cluster: SlurmCluster,
    distrun_home,
):
    job_id = _start(run_cli, write_job, distrun_home, "evicted", "max_restarts: 3", "max_preemptions: 0")
    slurm_cluster.run(["scancel", "--signal=TERM", "--batch", job_id])
    rec = _ended(distrun_home, "evicted")
    assert rec["status"] == "Preempted", rec
    assert rec["reason"].endswith("; preempted 1 time(s); limits.max_preemptions is 0")
    assert [a["status"] for a in rec["attempts"]] == ["Preempted"]
    wait_for(lambda: processes_of_job("evicted") == [], timeout=30)


def test_job_cancel_still_cancels_a_job_with_restarts(run_cli, write_job, hpc, distrun_home):
    _start(run_cli, write_job, distrun_home, "stop_it", "max_restarts: 3")
    assert run_cli("job", "cancel", "stop_it").returncode == 0
    rec = _ended(distrun_home, "stop_it")
    assert rec["status"] == "Canceled", rec
    # Recorded as an attempt when the batch script outlived the cancel long enough to write it down.
    assert [a["status"] for a in rec["attempts"] or []] in ([], ["Canceled"])
    assert not (job_folder(distrun_home, "stop_it") / "user_logs" / "attempt_0").exists()
    wait_for(lambda: processes_of_job("stop_it") == [], timeout=30)


@pytest.mark.slow  # Slurm holds a requeued job cred_expire + 1 s (6 s on the test cluster)
def test_a_requeue_by_slurm_itself_is_recorded_preempted_and_restarted(
    run_cli,
    write_job,
    hpc,
    slurm_cluster: SlurmCluster,
    distrun_home,
):
    # What Slurm does on its own (PreemptMode=REQUEUE, an administrator): stop the job and queue it again.
    job_id = _start(run_cli, write_job, distrun_home, "bumped", "max_restarts: 1")
    slurm_cluster.run(["scontrol", "requeue", job_id])
    rec = _ended(distrun_home, "bumped")
    assert rec["status"] == "Completed", rec
    assert [(a["status"], a["restarted"]) for a in rec["attempts"]] == [("Preempted", True), ("Completed", False)]
    assert requeue_hold(rec["attempts"]) < HELD_AT_MOST
    logs = job_folder(distrun_home, "bumped") / "user_logs"
    assert (logs / "attempt_0" / "std_log_process_00.txt").read_text().startswith("rank 0 attempt 0 resumed False\n")
    assert (logs / "std_log_process_00.txt").read_text().startswith("rank 0 attempt 1 resumed")
    wait_for(lambda: processes_of_job("bumped") == [], timeout=30)
