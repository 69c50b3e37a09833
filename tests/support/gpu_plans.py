"""Plans of GPU jobs built by hand: a job of N nodes x M processes and its plan on 8 visible GPUs."""

from __future__ import annotations

from typing import Any

from distrun.plan import build_plan
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.prepare.machine_gpus import probe_gpus
from distrun.spec.models import JobSpec

EIGHT = "0,1,2,3,4,5,6,7"


def job(kind: str | None, nodes: int, per_node: int, **extra: Any) -> JobSpec:
    data: dict[str, Any] = {"command": "python train.py", "resources": {"instance_count": nodes}, **extra}
    if kind == "tensorflow":
        data["distribution"] = {"type": kind, "worker_count": nodes * per_node}
    elif kind:
        data["distribution"] = {"type": kind, "process_count_per_instance": per_node}
    if "gpus" in extra:
        data.pop("gpus")
        data["resources"]["properties"] = {"gpus_per_node": extra["gpus"]}
    return JobSpec.model_validate(data)


def plan(spec: JobSpec, visible: str | None = EIGHT, simulated: bool = True) -> LaunchPlan:
    # visible=None stands for a machine with no GPUs at all: the driver is not asked, so these
    # tests mean the same on a GPU machine as on a CPU one.
    environ = {"CUDA_VISIBLE_DEVICES": ""} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    placement = Placement(
        hosts=("127.0.0.1",) * spec.node_count,
        master_port=29500,
        job_dir="/jobs/j1",
        run_id="j1",
        task_ports=tuple(range(30000, 30000 + 64)),
        simulated=simulated,
        gpus=probe_gpus(environ) if simulated else None,
    )
    return build_plan(spec, placement, Bindings())


def visible_per_node(launch: LaunchPlan) -> dict[int, set[str | None]]:
    return {node.node_rank: {p.env.get("CUDA_VISIBLE_DEVICES") for p in node.processes} for node in launch.nodes}
