"""A real hang on the 2-node Ray cluster: `job stacks` and the node agents' exchange of stack
requests and progress go through the driver (`agent.folder_mirror`), since the Ray nodes share
no folder with this machine."""

from __future__ import annotations

from support.hang_jobs import check_shown_then_ended_hung, stalling_job

HANG_TIMEOUT = 8


def test_a_hung_job_on_ray_is_shown_then_ended_with_every_nodes_stacks(ray_cli, write_job, ray_target, distrun_home):
    job = stalling_job(write_job, ray_target)
    proc = ray_cli("run", str(job), "--name", "hung", "--hang-timeout", str(HANG_TIMEOUT))
    check_shown_then_ended_hung(
        distrun_home, "hung", HANG_TIMEOUT, lambda: proc.communicate(timeout=120) and proc.returncode
    )
