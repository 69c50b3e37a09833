"""The objects a job becomes on Kubernetes: pure functions from the pod layout to plain dicts.

With the JobSet CRD: one ConfigMap (the job's files) and one JobSet with a replicatedJob per
role. Without it: the ConfigMap, a headless Service (stable `<pod>.<service>` names) and one
Indexed Job per role. `distrun plan --compute <kubernetes target> --output yaml` prints these
very objects; `submit` creates them as they are.
"""

from __future__ import annotations

from typing import Any

from distrun.backends.kubernetes.pod_contract import (
    AGENT_MODULE,
    AGENT_ZIP_KEY,
    BUNDLE_KEY,
    FILES_DIR,
    TERMINATION_LOG,
    pod_exit_codes,
)
from distrun.backends.kubernetes.pods import (
    PodLayout,
    PodRole,
    exchange_port,
    pod_job_dir,
    remote_start_port_base,
)
from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.restarts.policy import RestartPolicy
from distrun.spec.models import JobSpec

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
CONTAINER = "distrun"
MANAGED_BY = {"app.kubernetes.io/managed-by": "distrun"}
JOB_LABEL = "distrun.io/job"
ROLE_LABEL = "distrun.io/role"
JOB_NAME_ANNOTATION = "distrun.io/job-name"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# JobSet labels (and annotates) every Job and pod with the JobSet restart it belongs to.
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# The reason a Job fails with when a podFailurePolicy FailJob rule matched.
POD_FAILURE_POLICY_REASON = "PodFailurePolicy"
# The pod condition Kubernetes sets on a pod it evicts, preempts or deletes for a taint.
DISRUPTION_TARGET = "DisruptionTarget"
AGENT_REPORT_S = 10
# Every pod carries this finalizer until distrun has read its report (its final log record or
# termination message): a pod deleted first (a JobSet restart, a cancel) stays until then.
REPORT_FINALIZER = "distrun.io/report"
# MPI: the Secret with the job's remote-start token (mpirun's daemons start through the agents).
TOKEN_KEY = "remote-start-token"
# The ranks' MLflow token, when they log to distrun's server: the pod agent gives it to them.
MLFLOW_TOKEN_KEY = "mlflow-tracking-token"
MLFLOW_TOKEN_VARIABLE = "DISTRUN_K8S_MLFLOW_TOKEN"


def labels(layout: PodLayout, role: str | None = None) -> dict[str, str]:
    out = {**MANAGED_BY, JOB_LABEL: layout.object_name}
    if role:
        out[ROLE_LABEL] = role
    return out


def metadata(name: str, layout: PodLayout, target: KubernetesSettings, job_name: str, **extra: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": target.namespace,
        "labels": {**labels(layout), **extra},
        "annotations": {JOB_NAME_ANNOTATION: job_name},
    }
    return meta


def files_name(layout: PodLayout) -> str:
    return f"{layout.object_name}-files"


def secret_name(layout: PodLayout) -> str:
    return f"{layout.object_name}-token"


def uses_remote_starts(layout: PodLayout) -> bool:
    return any(role.serves_remote_starts for role in layout.roles)


def token_secret(layout: PodLayout, target: KubernetesSettings, job_name: str, token: str) -> dict[str, Any]:
    """The job's token: node 0's exchange asks it of the other pods and of `job stacks`; MPI worker
    pods' agents ask it of whoever wants them to start a command (mpirun)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(secret_name(layout), layout, target, job_name),
        "immutable": True,
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }


def config_map(
    layout: PodLayout, target: KubernetesSettings, job_name: str, bundle_b64: str, agent_b64: str
) -> dict[str, Any]:
    """The job's files and the distrun modules its pods run (the image needs no distrun)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(files_name(layout), layout, target, job_name),
        "immutable": True,
        "binaryData": {BUNDLE_KEY: bundle_b64, AGENT_ZIP_KEY: agent_b64},
    }


def headless_service(layout: PodLayout, target: KubernetesSettings, job_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(layout.object_name, layout, target, job_name),
        "spec": {
            "clusterIP": "None",
            "selector": labels(layout),
            # Ranks look each other up before they are "ready": names must resolve at once.
            "publishNotReadyAddresses": True,
        },
    }


def _token_ref(layout: PodLayout) -> dict[str, Any]:
    return {"secretKeyRef": {"name": secret_name(layout), "key": TOKEN_KEY}}


def _remote_start_env(layout: PodLayout, job: JobSpec, target: KubernetesSettings) -> list[dict[str, Any]]:
    return [
        {"name": "DISTRUN_K8S_REMOTE_START_PORT", "value": str(remote_start_port_base(job, target))},
        {"name": "DISTRUN_K8S_REMOTE_START_TOKEN", "valueFrom": _token_ref(layout)},
    ]


def _container(
    role: PodRole, layout: PodLayout, job: JobSpec, target: KubernetesSettings, job_name: str
) -> dict[str, Any]:
    work = target.work_dir.rstrip("/")
    job_dir = pod_job_dir(target, job_name)
    env = [
        {"name": "DISTRUN_K8S_ROLE", "value": role.name},
        {"name": "DISTRUN_K8S_FIRST_NODE", "value": str(role.first_node)},
        {"name": "DISTRUN_K8S_WORK_DIR", "value": work},
        {"name": "DISTRUN_K8S_JOB_DIR", "value": job_dir},
        {"name": "DISTRUN_K8S_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "DISTRUN_K8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    if target.code_in_image:
        env.append({"name": "DISTRUN_K8S_CODE_IN_IMAGE", "value": target.code_in_image})
    if uses_remote_starts(layout):
        env += _remote_start_env(layout, job, target)
    # Node 0's agent relays the pods' progress and stack requests, and answers `job stacks` (pod_exchange).
    env += [
        {"name": "DISTRUN_K8S_EXCHANGE_PORT", "value": str(exchange_port(layout, job, target))},
        {"name": "DISTRUN_K8S_EXCHANGE_TOKEN", "valueFrom": _token_ref(layout)},
    ]
    if RestartPolicy.of(job.limits).on:
        # The attempt (JobSet's restart count) reaches the agent, which gives it to every rank.
        field = f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"
        env.append({"name": "DISTRUN_K8S_RESTART_ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": field}}})
    # The job's own variables (and the role's) are on the container too, for the image's own
    # start-up; each process still gets exactly its plan environment from the agent.
    for key, value in {**job.environment_variables, **role.env}.items():
        env.append({"name": key, "value": value})
    # The image's Python runs distrun's zip (its __main__.py checks the Python, then runs the agent).
    command = [target.python, f"{work}/{FILES_DIR}/{AGENT_ZIP_KEY}", AGENT_MODULE]
    mounts = [
        {"name": "job", "mountPath": job_dir},
        {"name": "files", "mountPath": f"{work}/{FILES_DIR}", "readOnly": True},
    ]
    if job.resources.shm_size:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": role.image,
        "command": command,
        "env": env,
        "volumeMounts": mounts,
        "terminationMessagePath": f"{work}/{TERMINATION_LOG}",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if target.stacks or job.limits.hang_timeout:
        # py-spy reads the processes' stacks with ptrace, which a container may do only with
        # this capability (docs/hangs.md).
        container["securityContext"] = {"capabilities": {"add": ["SYS_PTRACE"]}}
    resources: dict[str, Any] = {}
    if role.limits:
        resources["limits"] = dict(role.limits)
    if role.requests:
        resources["requests"] = dict(role.requests)
    if resources:
        container["resources"] = resources
    return container


def _shm_size(text: str) -> str:
    """Azure ML's `shm_size` (2g, 512m) as a Kubernetes quantity (2Gi, 512Mi)."""
    unit = text[-1].lower()
    return text[:-1] + {"g": "Gi", "m": "Mi", "k": "Ki"}[unit] if unit in "gmk" else text.rstrip("bB")


def pod_template(
    role: PodRole, layout: PodLayout, job: JobSpec, target: KubernetesSettings, subdomain: str | None, job_name: str
) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": "job", "emptyDir": {}},
        {"name": "files", "configMap": {"name": files_name(layout)}},
    ]
    if job.resources.shm_size:
        volumes.append(
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _shm_size(job.resources.shm_size)}}
        )
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # Time for the agent to stop its processes (SIGTERM, the job's grace period, SIGKILL)
        # and report, after Kubernetes asks the pod to end.
        "terminationGracePeriodSeconds": int(job.limits.grace_seconds) + AGENT_REPORT_S,
        # Service links would add variables that a local run does not have.
        "enableServiceLinks": False,
        "containers": [_container(role, layout, job, target, job_name)],
        "volumes": volumes,
    }
    if subdomain:
        spec["subdomain"] = subdomain
    if target.service_account:
        spec["serviceAccountName"] = target.service_account
    if target.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in target.image_pull_secrets]
    if target.node_selector:
        spec["nodeSelector"] = dict(target.node_selector)
    if target.tolerations:
        spec["tolerations"] = [dict(t) for t in target.tolerations]
    if target.priority_class:
        spec["priorityClassName"] = target.priority_class
    return {"metadata": {"labels": labels(layout, role.name), "finalizers": [REPORT_FINALIZER]}, "spec": spec}


def _job_spec(
    role: PodRole, layout: PodLayout, job: JobSpec, target: KubernetesSettings, subdomain: str | None, job_name: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": role.count,
        "parallelism": role.count,
        # No retries: a failed rank fails the gang, as on every other compute.
        "backoffLimit": 0,
        "template": pod_template(role, layout, job, target, subdomain, job_name),
    }
    if job.limits.timeout is not None:
        # The node agents enforce limits.timeout; this is only a backstop behind them.
        spec["activeDeadlineSeconds"] = int(job.limits.timeout + job.limits.grace_seconds + 60)
    return spec


def _queue_labels(target: KubernetesSettings) -> dict[str, str]:
    return {QUEUE_LABEL: target.queue} if target.queue else {}


def no_restart_codes(job: JobSpec) -> list[int]:
    return pod_exit_codes(RestartPolicy.of(job.limits))


def failure_policy(job: JobSpec) -> dict[str, Any]:
    """JobSet's failurePolicy: any failed Job fails the set, or restarts it while limits.max_restarts allows.

    With restarts, two rules come first (the first that matches a failed Job decides): a Job
    failed because its pod was disrupted (evicted, preempted: the podFailurePolicy rule on the
    DisruptionTarget condition) restarts the set without counting against maxRestarts, as
    preemptions are unlimited when max_restarts is set; a Job failed through the no-restart
    exit-code rule fails the set at once. Any other failed Job restarts it (JobSet's default).
    """
    policy: dict[str, Any] = {"maxRestarts": RestartPolicy.of(job.limits).max_restarts}
    if not policy["maxRestarts"]:
        return policy
    # Every pod of an attempt has ended before the next attempt's pods start, as on every
    # compute: no rank of the old attempt still holds the ports or answers on the pod names.
    policy["restartStrategy"] = "BlockingRecreate"
    policy["rules"] = [
        {
            "name": "preempted",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": [POD_FAILURE_POLICY_REASON],
            # The Job controller's message for a FailJob rule on a pod condition.
            "onJobFailureMessagePatterns": [f"has condition {DISRUPTION_TARGET}"],
        }
    ]
    if no_restart_codes(job):
        policy["rules"].append(
            {"name": "noRestartExitCodes", "action": "FailJobSet", "onJobFailureReasons": [POD_FAILURE_POLICY_REASON]}
        )
    return policy


def pod_failure_policy(job: JobSpec) -> dict[str, Any]:
    """With restarts: a disrupted pod, or one exiting with a no-restart code, fails its Job through a
    rule (reason PodFailurePolicy), which the JobSet's failure policy rules tell apart."""
    rules: list[dict[str, Any]] = [
        {"action": "FailJob", "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}]}
    ]
    if no_restart_codes(job):
        codes = {"containerName": CONTAINER, "operator": "In", "values": no_restart_codes(job)}
        rules.append({"action": "FailJob", "onExitCodes": codes})
    return {"rules": rules}


def jobset(layout: PodLayout, job: JobSpec, target: KubernetesSettings, job_name: str) -> dict[str, Any]:
    replicated = []
    restarts = RestartPolicy.of(job.limits).max_restarts > 0
    for role in layout.roles:
        spec = _job_spec(role, layout, job, target, None, job_name)
        if restarts:
            spec["podFailurePolicy"] = pod_failure_policy(job)
        replicated.append(
            {
                "name": role.name,
                "replicas": 1,
                "template": {"metadata": {"labels": labels(layout, role.name)}, "spec": spec},
            }
        )
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": metadata(layout.object_name, layout, target, job_name, **_queue_labels(target)),
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": layout.object_name, "publishNotReadyAddresses": True},
            # Parameter servers (and MPI's worker pods) never end on their own: the job is done
            # when the roles that train are, and JobSet then stops the rest.
            "successPolicy": {
                "operator": "All",
                "targetReplicatedJobs": [r.name for r in layout.roles if r.decides_success],
            },
            # Gang: any failed Job fails (or, with limits.max_restarts, restarts) the whole set.
            "failurePolicy": failure_policy(job),
            "replicatedJobs": replicated,
        },
    }


def indexed_jobs(layout: PodLayout, job: JobSpec, target: KubernetesSettings, job_name: str) -> list[dict[str, Any]]:
    out = []
    for role in layout.roles:
        spec = _job_spec(role, layout, job, target, layout.object_name, job_name)
        spec["podFailurePolicy"] = {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "NotIn", "values": [0]}}
            ]
        }
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": metadata(
                    f"{layout.object_name}-{role.name}",
                    layout,
                    target,
                    job_name,
                    **{ROLE_LABEL: role.name},
                    **_queue_labels(target),
                ),
                "spec": spec,
            }
        )
    return out


def render_objects(
    layout: PodLayout,
    job: JobSpec,
    target: KubernetesSettings,
    job_name: str,
    bundle_b64: str,
    token: str,
    agent_b64: str,
    tracking_token: str | None = None,
) -> list[dict[str, Any]]:
    """Every object of the job, in the order they are created (files and token first: pods use them).

    `token` (random per submission) guards the pods' exchange and MPI's remote starts;
    `tracking_token` is what the ranks send distrun's MLflow server, if the pods log to it.
    """
    objects = [config_map(layout, target, job_name, bundle_b64, agent_b64)]
    objects.append(token_secret(layout, target, job_name, token))
    if layout.jobset:
        objects.append(jobset(layout, job, target, job_name))
    else:
        objects.append(headless_service(layout, target, job_name))
        objects += indexed_jobs(layout, job, target, job_name)
    if tracking_token:
        _give_tracking_token(objects, layout, tracking_token)
    return objects


def _give_tracking_token(objects: list[dict[str, Any]], layout: PodLayout, tracking_token: str) -> None:
    """The ranks' MLflow token in the Secret, and each pod's agent given it from there (never in
    the ConfigMap, whose job files any reader of the namespace's ConfigMaps sees)."""
    variable = {
        "name": MLFLOW_TOKEN_VARIABLE,
        "valueFrom": {"secretKeyRef": {"name": secret_name(layout), "key": MLFLOW_TOKEN_KEY}},
    }
    for obj in objects:
        if obj["kind"] == "Secret":
            obj["stringData"][MLFLOW_TOKEN_KEY] = tracking_token
        else:
            for container in _containers(obj):
                container["env"].append(variable)


def _containers(tree: Any) -> list[dict[str, Any]]:
    """Every container of the pod templates in `tree` (a Job's, or each of a JobSet's Jobs')."""
    if isinstance(tree, list):
        return [c for item in tree for c in _containers(item)]
    if not isinstance(tree, dict):
        return []
    if isinstance(tree.get("containers"), list):
        return list(tree["containers"])
    return [c for value in tree.values() for c in _containers(value)]
