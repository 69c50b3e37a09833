"""A job rendered for Kubernetes: the objects to create and the plan every pod will run. Pure.

The pods rebuild the very same plan from `job.json`, `bindings.json` and `placement.json`
in the job's ConfigMap, so what `distrun plan` shows is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.backends.kubernetes import bundle as job_bundle
from distrun.backends.kubernetes.agent_zip import agent_zip
from distrun.backends.kubernetes.manifests import render_objects
from distrun.backends.kubernetes.mlflow_route import pod_tracking
from distrun.backends.kubernetes.output_records import OUTPUTS_LIMIT
from distrun.backends.kubernetes.pod_contract import BINDINGS_FILE, JOB_FILE, PLACEMENT_FILE, placement_dict
from distrun.backends.kubernetes.pods import PodLayout, build_layout, placement
from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.core.json_encoding import compact_json
from distrun.plan import build_plan
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.spec.models import JobSpec


@dataclass(frozen=True)
class KubernetesRequest:
    """What is submitted: the objects, with the layout and plan they were made from."""

    layout: PodLayout
    objects: list[dict[str, Any]]
    plan: LaunchPlan
    notes: tuple[str, ...]


def pod_bindings(bindings: Bindings, local_job_dir: str, pod_dir: str) -> Bindings:
    """Paths inside the local job folder, as the pods see them (their own job folder). Of the
    variables distrun's services give every process, only the MLflow run's travel, and only when
    the pods can reach its URI (mlflow_route); a built Python environment is this machine's."""

    def moved(path: str) -> str:
        if path == local_job_dir or path.startswith(local_job_dir.rstrip("/") + "/"):
            return pod_dir + path[len(local_job_dir.rstrip("/")) :]
        return path

    return Bindings(
        inputs={k: moved(v) for k, v in bindings.inputs.items()},
        outputs={k: moved(v) for k, v in bindings.outputs.items()},
        input_paths={k: moved(v) for k, v in bindings.input_paths.items()},
        environment=pod_tracking(bindings.environment).environment,
    )


def job_files(spec: JobSpec, bindings: Bindings, where: Placement) -> dict[str, bytes]:
    dumped = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        JOB_FILE: compact_json(dumped, sort_keys=True),
        BINDINGS_FILE: compact_json(bindings.__dict__, sort_keys=True),
        PLACEMENT_FILE: compact_json(placement_dict(where), sort_keys=True),
    }


def _notes(spec: JobSpec, target: KubernetesSettings, layout: PodLayout, local: Bindings, job_dir: str) -> list[str]:
    kind = "one JobSet" if layout.jobset else "a headless Service and one Indexed Job per role"
    notes = [
        f"Kubernetes namespace {target.namespace}: {kind} ({', '.join(f'{r.name} x{r.count}' for r in layout.roles)}); "
        "each pod's distrun node agent runs its node's processes; MASTER_ADDR is node 0's pod DNS name"
    ]
    notes.append(
        "the Secret's token (made anew at each submission, masked here) guards node 0's exchange, which relays "
        "progress and stack requests between the pods and answers `distrun job stacks`"
    )
    if any(role.serves_remote_starts for role in layout.roles):
        notes.append("MPI: the worker pods' agents start mpirun's daemons (no ssh), for requests carrying the token")
    outside = sorted(name for name, path in local.input_paths.items() if not path.startswith(job_dir.rstrip("/") + "/"))
    if outside:
        notes.append(
            f"data input(s) {', '.join(outside)} are paths on this machine: the pods see them only if the image or "
            "a volume has them at the same path (mode: download copies them into the job instead)"
        )
    if spec.outputs:
        notes.append(
            "named outputs are written inside the pods; each pod's agent sends what they hold back through its "
            f"log when its processes end (at most {OUTPUTS_LIMIT >> 20} MiB compressed a pod)"
        )
    tracking = pod_tracking(local.environment).note
    if tracking:
        notes.append(tracking)
    return notes


def render_request(
    spec: JobSpec,
    target: KubernetesSettings,
    *,
    job_name: str,
    bindings: Bindings,
    local_job_dir: str,
    code_dir: Path | None,
    jobset: bool,
    token: str,
    named_image: str | None = None,
    tracking_token: str | None = None,
) -> KubernetesRequest:
    """The objects and the plan for `spec`; `code_dir` is the code snapshot (None: in the image);
    `token` the MPI remote-start token its Secret carries, and `tracking_token` the ranks' MLflow
    token (its Secret carries it too, when the pods log to the job's run)."""
    layout = build_layout(spec, target, job_name, jobset, named_image)
    where = placement(spec, target, layout, job_name)
    bound = pod_bindings(bindings, local_job_dir, where.job_dir)
    plan = build_plan(spec, where, bound)
    trees: dict[str, Path] = {}
    if code_dir is not None and not target.code_in_image:
        trees[job_bundle.CODE] = code_dir
    inputs = Path(local_job_dir) / job_bundle.INPUTS  # copied inputs travel also when the code is in the image
    if inputs.is_dir():
        trees[job_bundle.INPUTS] = inputs
    agent = agent_zip()
    payload = job_bundle.encoded(job_bundle.build_bundle(job_files(spec, bound, where), trees), len(agent))
    reached = bool(bound.environment)  # the pods log to the job's run (pod_tracking)
    tracking = tracking_token if reached else None
    objects = render_objects(layout, spec, target, job_name, payload, token, job_bundle.encoded(agent), tracking)
    return KubernetesRequest(layout, objects, plan, tuple(_notes(spec, target, layout, bindings, local_job_dir)))
