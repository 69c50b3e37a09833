"""A real hang on the 2-node Slurm cluster: `job stacks` reaches both nodes' agents through the
shared job folder, and the hang watchdog judges the whole job's progress, not one node's."""

from __future__ import annotations

from support.hang_jobs import QUIET_NODE, check_shown_then_ended_hung, stalling_job
from support.jobs import four_rank_job, record

HANG_TIMEOUT = 8


def test_a_hung_two_node_job_is_shown_then_ended_with_every_nodes_stacks(start_cli, write_job, hpc, distrun_home):
    job = stalling_job(write_job, hpc)
    started = start_cli("run", str(job), "--name", "hung", "--hang-timeout", str(HANG_TIMEOUT))
    check_shown_then_ended_hung(distrun_home, "hung", HANG_TIMEOUT, lambda: started.wait(timeout=120))


def test_a_silent_node_is_not_hung_while_another_node_prints(run_cli, write_job, hpc, distrun_home):
    job = write_job(four_rank_job("python quiet.py", grace=1) + f"    compute: {hpc}\n", {"quiet.py": QUIET_NODE})
    # Node 0 stays silent for the whole 6 s, twice the timeout; node 1 prints every 0.5 s.
    done = run_cli("run", str(job), "--name", "quiet", "--hang-timeout", "3", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert record(distrun_home, "quiet")["status"] == "Completed"
