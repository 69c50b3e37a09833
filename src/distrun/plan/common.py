"""Pieces every distribution's planner shares: the rendered command, base environment."""

from __future__ import annotations

from distrun.plan.model import Bindings, Placement
from distrun.plan.plan_job import PlanJob
from distrun.restarts.policy import restart_env
from distrun.spec.command_template import render_command

SHELL = "bash"  # Azure ML runs the command under bash; `$RANK` etc. expand per process


def rendered_command(job: PlanJob, bindings: Bindings) -> str:
    return render_command(job.command, bindings.inputs, bindings.outputs)


def shell_argv(command: str) -> tuple[str, ...]:
    return (SHELL, "-c", command)


def code_dir(placement: Placement) -> str:
    return placement.job_dir.rstrip("/") + "/code"


def job_env(job: PlanJob, placement: Placement, bindings: Bindings) -> dict[str, str]:
    """Variables every process of the job sees, whatever its framework."""
    env = dict(job.environment_variables)
    env.update(bindings.environment)  # the job's own Python environment first on PATH; its MLflow run
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "AZUREML_RUN_ID": placement.run_id,
            "DISTRUN_JOB_NAME": placement.run_id,
            "DISTRUN_JOB_DIR": placement.job_dir,
            "AZUREML_NODE_COUNT": str(len(placement.hosts)),
            "AZ_BATCH_HOST_LIST": ",".join(placement.hosts),
            "AZ_BATCH_MASTER_NODE": f"{placement.master_addr}:{placement.master_port}",
            "AZ_BATCHAI_MPI_MASTER_NODE": placement.master_addr,
            **restart_env(placement.restart_count),
        }
    )
    # Azure ML's names for data paths, read by scripts that do not take arguments.
    for name, path in bindings.input_paths.items():
        env[f"AZURE_ML_INPUT_{name}"] = path
    for name, path in bindings.outputs.items():
        env[f"AZURE_ML_OUTPUT_{name}"] = path
    return env


def process_log_name(index: int) -> str:
    return f"std_log_process_{index:02d}.txt"
