"""Which pods a job becomes on Kubernetes, and where each plan node lives: pure.

One pod per plan node, grouped in roles (one replicatedJob, or one Indexed Job, per role):
- pytorch and no distribution: `worker` x instance_count; pod i is node i.
- tensorflow: `chief`, `worker`, `ps`, one pod per task, in TF_CONFIG's cluster order; task k
  is node k, so each task can have its role's image and resources.
- mpi: `launcher` x 1 (runs node 0's mpirun) and `worker` x instance_count, the hosts of the
  hostfile. No SSH: each worker pod's agent starts what mpirun asks for (its daemon, `orted`)
  through distrun's remote start (`distrun.agent.remote_start`), with a token from the job's
  Secret; the launcher's mpirun gets it as its remote shell.

A pod learns its node rank from the role's first node rank plus JOB_COMPLETION_INDEX, which
Kubernetes sets in every pod of an Indexed Job.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.core.errors import DistrunError
from distrun.plan.model import Placement
from distrun.spec.models import EnvironmentSpec, JobSpec, MpiDistribution, TensorFlowDistribution

# Pod hostnames are `<name>-<role>-0-<index>` (JobSet) or `<name>-<role>-<index>`: at most 63
# characters, so the object name leaves room for the longest role and a 5-digit index.
NAME_LIMIT = 40
GPU_RESOURCE = "nvidia.com/gpu"
RESOURCE_KEYS = {"cpu": "cpu", "memory": "memory", "gpu": GPU_RESOURCE, "ephemeral_storage": "ephemeral-storage"}


@dataclass(frozen=True)
class PodRole:
    """One role's pods: a replicatedJob of a JobSet, or one Indexed Job."""

    name: str  # worker | chief | ps | launcher
    count: int
    first_node: int  # plan node rank of the pod with completion index 0
    image: str
    limits: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the role's own variables (ps settings)
    decides_success: bool = True  # the job completes when these pods do (successPolicy target)
    serves_remote_starts: bool = False  # MPI workers: mpirun on the launcher starts its daemons there


@dataclass(frozen=True)
class PodLayout:
    object_name: str  # JobSet name, or the headless Service's
    jobset: bool
    roles: tuple[PodRole, ...]

    def hostname(self, role: str, index: int) -> str:
        middle = f"{role}-0" if self.jobset else role
        return f"{self.object_name}-{middle}-{index}"

    def dns_name(self, role: str, index: int) -> str:
        """Stable `<pod hostname>.<subdomain>`: resolvable in the namespace once the pod exists."""
        return f"{self.hostname(role, index)}.{self.object_name}"

    def node_hosts(self) -> tuple[str, ...]:
        """The plan's hosts, node rank order: the DNS name of each plan node's pod."""
        hosts: dict[int, str] = {}
        for role in self.roles:
            if role.name == "launcher":
                continue  # MPI's launcher pod runs node 0's mpirun; the hosts are the workers
            for index in range(role.count):
                hosts[role.first_node + index] = self.dns_name(role.name, index)
        return tuple(hosts[n] for n in sorted(hosts))


def object_name(job_name: str) -> str:
    """A DNS label from the job name: lower case, '-' for anything else, a hash when shortened."""
    name = re.sub(r"[^a-z0-9-]+", "-", job_name.lower()).strip("-") or "job"
    if not name[0].isalpha():
        name = "j-" + name
    if len(name) > NAME_LIMIT or name != job_name:
        digest = hashlib.sha256(job_name.encode()).hexdigest()[:6]
        name = f"{name[: NAME_LIMIT - 7].rstrip('-')}-{digest}"
    return name


def job_image(job: JobSpec, target: KubernetesSettings, named_image: str | None = None) -> str:
    """The image every pod runs: the job's environment image (or the image config.yaml's
    `environments:` maps its name to, `named_image`), else the target's, else a curated name's
    (`mcr.microsoft.com/azureml/curated/NAME:latest`)."""
    env = job.environment
    if isinstance(env, EnvironmentSpec) and env.image:
        return env.image
    if isinstance(env, str) and named_image:
        return named_image
    if target.image:
        return target.image
    if isinstance(env, str):
        from distrun.environments.curated import find_curated

        curated = find_curated(env)
        if curated is not None:  # a curated name: the image Azure ML publishes it as
            return curated.image
        raise DistrunError(
            f"environment {env!r} names an Azure ML environment, which has no image distrun can pull",
            "give an image: environment: {image: REGISTRY/IMAGE:TAG} in the job (or environment.docker.image), "
            "map the name to one under `environments:` in config.yaml (image: ...), "
            "or set the compute target's image (distrun compute create ... --set image=...)",
        )
    raise DistrunError(
        "the job names no image, and Kubernetes runs every pod from one",
        "add environment: {image: REGISTRY/IMAGE:TAG} with python3 (3.10 or newer) and your framework, "
        "or set the compute target's image",
    )


def _role_image(settings: Any, default: str) -> str:
    """A parameter server's own environment: `{docker: {image}}`, `{image}` or an image text."""
    if isinstance(settings, dict):
        docker = settings.get("docker")
        if isinstance(docker, dict) and docker.get("image"):
            return str(docker["image"])
        if settings.get("image"):
            return str(settings["image"])
    if isinstance(settings, EnvironmentSpec) and settings.image:
        return settings.image
    return default


def pod_resources(spec: Any, where: str) -> tuple[dict[str, str], dict[str, str]]:
    """(limits, requests) from `{cpu, memory, gpu}` or `{limits: {...}, requests: {...}}`."""
    if spec is None:
        return {}, {}
    if not isinstance(spec, dict):
        raise DistrunError(f"{where}: expected a mapping such as {{cpu: 4, memory: 8Gi, gpu: 1}}")
    if set(spec) & {"limits", "requests"}:
        unknown = sorted(set(spec) - {"limits", "requests"})
        if unknown:
            raise DistrunError(f"{where}: unknown key {unknown[0]!r}", "use limits and requests")
        return _quantities(spec.get("limits"), f"{where}.limits"), _quantities(
            spec.get("requests"), f"{where}.requests"
        )
    return _quantities(spec, where), {}


def _quantities(values: Any, where: str) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise DistrunError(f"{where}: expected a mapping such as {{cpu: 4, memory: 8Gi, gpu: 1}}")
    out = {}
    for key, value in values.items():
        name = RESOURCE_KEYS.get(str(key), str(key) if "/" in str(key) else None)
        if name is None:
            raise DistrunError(
                f"{where}.{key}: unknown resource {key!r}",
                "use cpu, memory, gpu (nvidia.com/gpu), ephemeral_storage, or a full name such as amd.com/gpu",
            )
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]+(\.[0-9]+)?(m|[KMGTPE]i?|[kmgtpe])?", str(value)):
            raise DistrunError(f"{where}.{key}: {value!r} is not a quantity", "e.g. 4, 500m, 8Gi")
        out[name] = str(value)
    return out


def build_layout(
    job: JobSpec, target: KubernetesSettings, job_name: str, jobset: bool, named_image: str | None = None
) -> PodLayout:
    image = job_image(job, target, named_image)
    props = job.properties or {}  # the seed draft's per-role settings (see spec.normalize)
    worker_limits, worker_requests = pod_resources(
        props.get("worker_resources") or props.get("worker_resource_limits"), "worker resources"
    )
    dist = job.distribution
    roles: list[PodRole]
    if isinstance(dist, TensorFlowDistribution):
        from distrun.plan.plan_job import PlanJob
        from distrun.plan.tensorflow_tasks import is_auxiliary, task_counts

        counts = task_counts(PlanJob.of(job))
        ps = dist.parameter_server
        ps_limits, ps_requests = pod_resources(ps.resource_limits if ps else None, "parameter_server.resource_limits")
        roles, first = [], 0
        for role, count in counts.items():
            if not count:
                continue
            is_ps = role == "ps"
            roles.append(
                PodRole(
                    name=role,
                    count=count,
                    first_node=first,
                    image=_role_image(ps.environment, image) if is_ps and ps else image,
                    limits=ps_limits if is_ps else worker_limits,
                    requests=ps_requests if is_ps else worker_requests,
                    env=dict(ps.environment_variables) if is_ps and ps else {},
                    decides_success=not is_auxiliary(role, counts),
                )
            )
            first += count
    elif isinstance(dist, MpiDistribution):
        launcher_limits, launcher_requests = pod_resources(dist.launcher_resources, "launcher resources")
        roles = [
            PodRole("launcher", 1, 0, image, launcher_limits, launcher_requests),
            PodRole(
                "worker",
                job.node_count,
                0,
                image,
                worker_limits,
                worker_requests,
                decides_success=False,
                serves_remote_starts=True,
            ),
        ]
    else:
        roles = [PodRole("worker", job.node_count, 0, image, worker_limits, worker_requests)]
    return PodLayout(object_name(job_name), jobset, tuple(roles))


def pinned_master_port(job: JobSpec) -> int | None:
    value = job.environment_variables.get("MASTER_PORT")
    return int(value) if value and value.isdigit() else None


def placement(job: JobSpec, target: KubernetesSettings, layout: PodLayout, job_name: str) -> Placement:
    """Where the plan's nodes are: pod DNS names, fixed ports (every task its own), the pod's job folder.

    Ports differ per task although each pod has its own address, so a job also runs where pods
    share a network (hostNetwork, or one machine).
    """
    from distrun.plan import task_port_count

    hosts = layout.node_hosts()
    tasks = task_port_count(job)
    return Placement(
        hosts=hosts,
        master_port=pinned_master_port(job) or target.port_base,
        task_ports=tuple(target.port_base + 1 + k for k in range(tasks)),
        job_dir=pod_job_dir(target, job_name),
        run_id=job_name,
    )


def remote_start_port_base(job: JobSpec, target: KubernetesSettings) -> int:
    """MPI: node k's agent takes remote starts on this port + k, after the master and task ports
    (each pod has its own address, but pods may share one network: hostNetwork, one machine)."""
    from distrun.plan import task_port_count

    return target.port_base + 1 + task_port_count(job)


def exchange_port(layout: PodLayout, job: JobSpec, target: KubernetesSettings) -> int:
    """Where node 0's agent serves the pods' exchange (`pod_exchange`): after MPI's remote-start ports."""
    return remote_start_port_base(job, target) + len(layout.node_hosts())


def pod_job_dir(target: KubernetesSettings, job_name: str) -> str:
    """The job's folder in each pod, named after the job as on this machine (AZUREML_RUN_ID, ...)."""
    return f"{target.work_dir.rstrip('/')}/{job_name}"
