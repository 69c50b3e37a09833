"""The Kubernetes backend (`BACKEND`, `KubernetesBackend`: the contract of `distrun.backends.base`).

The package's docstring says how a job runs on Kubernetes.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from distrun.agent.attempt_logs import attempt_folder, keep_attempt_logs
from distrun.agent.node_facts import NodeOutcome
from distrun.backends.base import Backend, Observation, RenderedJob
from distrun.backends.kubernetes.attempts import current_attempt, of_attempt, preemption_restarts, with_restarts
from distrun.backends.kubernetes.client import KubernetesApiError, KubernetesClient
from distrun.backends.kubernetes.collect import (
    K8sPaths,
    collect_pod_log,
    collecting,
    keep_outcome,
    label_files,
    read_outcomes,
)
from distrun.backends.kubernetes.manifests import JOB_LABEL, files_name, secret_name, uses_remote_starts
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.render import KubernetesRequest, render_request
from distrun.backends.kubernetes.state import JobState, job_state, pod_view, termination_outcome
from distrun.backends.kubernetes.target import KubernetesTarget
from distrun.backends.submission_failure import recorded_as_not_submitted
from distrun.compute import ComputeTarget, resolve_target
from distrun.errors import DistrunError
from distrun.file_modes import write_file
from distrun.job_status import JobStatus
from distrun.json_encoding import compact_json
from distrun.restarts import Attempt, RestartPolicy
from distrun.spec.loader import LoadedJob, local_path
from distrun.spec.models import JobLimits, JobSpec
from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout
from distrun.submission import PreparedJob, bind

STOP_WAIT_S = 120.0


def kubernetes_target(target: ComputeTarget) -> KubernetesTarget:
    return KubernetesTarget.from_settings(target.name, target.settings)


def validate_settings(name: str, settings: Mapping[str, Any]) -> None:
    """`distrun compute create --type kubernetes`: refuse settings a job could not use."""
    KubernetesTarget.from_settings(name, settings)


def use_jobset(target: KubernetesTarget, client: KubernetesClient | None) -> bool:
    if target.jobset != "auto":
        return target.jobset == "always"
    return client.has_jobset() if client is not None else True


def check_restarts(target_name: str, job: JobSpec, jobset: bool) -> None:
    """Restarts are JobSet's: refuse what Kubernetes cannot honour, before anything is submitted."""
    limits = job.limits
    if not RestartPolicy.of(limits).on:
        return
    if limits.max_preemptions is not None:
        raise DistrunError(
            f"compute target {target_name!r} (Kubernetes) cannot honour limits.max_preemptions: JobSet restarts "
            "a job for evicted or preempted pods without limit (or counts them against maxRestarts), never "
            "up to a separate limit",
            "remove limits.max_preemptions (preemptions are then unlimited, not counted against "
            "limits.max_restarts), or raise limits.max_restarts",
        )
    if not jobset:
        raise DistrunError(
            f"compute target {target_name!r} runs jobs as Indexed Jobs (no JobSet CRD, or jobset: never), which "
            "cannot restart a whole job: limits.max_restarts needs JobSet",
            "install JobSet in the cluster (https://jobset.sigs.k8s.io) and set jobset: auto or always, "
            "or remove limits.max_restarts (or --max-restarts) to run the job once",
        )


def preflight(target: ComputeTarget, job: JobSpec) -> None:
    """Before anything is recorded: the job has an image, and the cluster answers in the namespace."""
    from distrun.backends.kubernetes.pods import build_layout

    settings = kubernetes_target(target)
    check_restarts(target.name, job, settings.jobset != "never")
    named = named_image(job, Layout().config_path)
    build_layout(job, settings, job.name or "job", jobset=True, named_image=named)  # image, per-role resources
    client = KubernetesClient(settings)
    client.check()
    if settings.jobset == "always" and not client.has_jobset():
        raise DistrunError(
            f"compute target {target.name!r} asks for JobSet (jobset: always) but the cluster has no JobSet CRD",
            "install JobSet (https://jobset.sigs.k8s.io), or set jobset: auto to use Indexed Jobs",
        )
    check_restarts(target.name, job, use_jobset(settings, client))


def render_job(
    spec: JobSpec,
    settings: KubernetesTarget,
    name: str,
    bindings: Any,
    job_dir: Path,
    code_dir: Path | None,
    jobset: bool,
    named: str | None = None,
) -> KubernetesRequest:
    import secrets

    return render_request(
        spec,
        settings,
        job_name=name,
        bindings=bindings,
        local_job_dir=str(job_dir),
        code_dir=code_dir,
        jobset=jobset,
        # A new one at every render: the submitted objects carry their own (MPI jobs only use it).
        token=secrets.token_hex(16),
        named_image=named,
    )


def named_image(job: JobSpec, config_path: Path) -> str | None:
    """The image config.yaml's `environments:` gives the job's environment name, if any."""
    from distrun.environments.named import find_named

    if not isinstance(job.environment, str):
        return None
    found = find_named(job.environment, config_path)
    image = found.body.get("image") if found is not None else None
    return str(image) if image else None


def _bundle_summary(data: str) -> dict[str, Any]:
    """The ConfigMap's bundle as sizes and a file list: the text plan stays readable (the data is
    up to 1 MiB of base64), and `--output yaml` or `json` still prints every byte that is submitted."""
    from distrun.backends.kubernetes.bundle import listing

    raw = base64.b64decode(data)
    return {
        "summary": f"{len(data)} base64 characters: a gzipped tar of {len(raw)} bytes (--output yaml prints it)",
        "files": listing(raw),
    }


def objects_yaml(objects: list[dict[str, Any]], abbreviate: bool = False) -> str:
    from io import StringIO

    from ruamel.yaml import YAML

    shown = objects
    if abbreviate:
        shown = []
        for obj in objects:
            if obj.get("binaryData"):
                obj = {**obj, "binaryData": {k: _bundle_summary(v) for k, v in obj["binaryData"].items()}}
            shown.append(obj)
    yaml = YAML()
    yaml.default_flow_style = False
    buffer = StringIO()
    yaml.dump_all(json.loads(json.dumps(shown)), buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------- submit


def _layout_dict(layout: PodLayout) -> dict[str, Any]:
    return dataclasses.asdict(layout)


def _layout_from(data: Mapping[str, Any]) -> PodLayout:
    roles = tuple(PodRole(**role) for role in data["roles"])
    return PodLayout(data["object_name"], bool(data["jobset"]), roles)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


def submit(client: KubernetesClient, request: KubernetesRequest) -> None:
    """Create every object in order; on a refusal, remove what was created (nothing half-submitted)."""
    created: list[dict[str, Any]] = []
    try:
        for obj in request.objects:
            client.create(obj)
            created.append(obj)
    except DistrunError:
        for obj in reversed(created):
            try:
                client.delete(obj["kind"], obj["metadata"]["name"])
            except DistrunError:
                pass
        raise


# ---------------------------------------------------------------- observe


def _engine_failure(client: KubernetesClient, layout: PodLayout) -> str:
    """The message of a Failed condition on the JobSet or one of the Jobs, if any."""
    if layout.jobset:
        tops = [client.get("JobSet", layout.object_name) or {}]
    else:
        tops = client.list("Job", {JOB_LABEL: layout.object_name})
    for top in tops:
        for cond in (top.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                return (
                    f"{top.get('kind', 'Job')} {top['metadata']['name']}: {cond.get('message') or cond.get('reason')}"
                )
    return ""


@dataclass(frozen=True)
class Seen:
    """What one look at the cluster found: the job's state, the outcomes of its current attempt,
    and (with restarts) every attempt so far."""

    state: JobState
    outcomes: dict[str, dict[str, Any]]
    attempts: list[Attempt] | None = None


def _shown_attempt(paths: K8sPaths) -> int:
    """The attempt whose logs user_logs/ holds: the latest seen (the JobSet and its pods may be gone since)."""
    try:
        return int(paths.attempt.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0


def _kept_preemptions(paths: K8sPaths, seen: int | None) -> int:
    """The JobSet's count of restarts for disrupted pods, kept in the job folder for when it is gone."""
    kept = paths.folder / "preemptions"
    if seen is None:
        try:
            return int(kept.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0
    with contextlib.suppress(OSError):
        kept.write_text(f"{seen}\n", encoding="utf-8")
    return seen


def _next_attempt_logs(folder: JobFolder, paths: K8sPaths, current: int) -> None:
    """JobSet restarted the job: the ended attempt's logs move to user_logs/attempt_<k>/ (under `collecting`)."""
    shown = _shown_attempt(paths)
    if current <= shown:
        return
    if folder.user_logs.is_dir():
        keep_attempt_logs(folder.user_logs, shown)
    paths.attempt.write_text(f"{current}\n", encoding="utf-8")


def observe(
    client: KubernetesClient, folder: JobFolder, layout: PodLayout, policy: RestartPolicy | None = None
) -> Seen:
    """Pods, their logs and outcomes -> distrun's state; the logs land in the job folder on the way.

    An outcome read once (a pod's final log record, else its termination message) is kept in
    the job folder: pods are removed when their job ends, their reports must not go with them.
    With restarts (`policy`, JobSet only), pods are told apart by their JobSet restart: the
    latest attempt's logs are in user_logs/, earlier ones' in user_logs/attempt_<k>/.
    """
    paths = K8sPaths(folder.root)
    pods = client.list("Pod", {JOB_LABEL: layout.object_name})
    labels = label_files(folder)
    views = [pod_view(p) for p in pods]
    restarts = policy is not None and policy.on and layout.jobset
    top = client.get("JobSet", layout.object_name) if restarts else None
    current = max(current_attempt(top, views), _shown_attempt(paths)) if restarts else 0
    with collecting(paths):
        if restarts:
            _next_attempt_logs(folder, paths, current)
        for view in views:
            # MPI's worker pods only start mpirun's daemons: their ranks' output is in the launcher's log.
            serves = any(r.serves_remote_starts and r.name == view.role for r in layout.roles)
            if serves or (view.phase == "Pending" and not view.deleting):
                continue
            logs = folder.user_logs if view.attempt >= current else attempt_folder(folder.user_logs, view.attempt)
            collect_pod_log(folder, paths, view.name, client.pod_log(view.name), labels, logs, view.attempt)
            from_status = termination_outcome(view)
            if from_status is not None and not (paths.outcomes / f"{view.name}.json").exists():
                keep_outcome(paths, view.name, from_status, view.attempt)
        outcomes = read_outcomes(paths)
    mine = of_attempt(outcomes, current)
    engine_failed = _engine_failure(client, layout)
    state = job_state(
        layout,
        [v for v in views if v.attempt == current],
        mine,
        planned=planned_processes(folder),
        engine_failed=engine_failed,
        canceled=paths.cancel.exists(),
    )
    if not restarts or policy is None:
        return Seen(state, mine)
    active = top is not None and not engine_failed and not _condition(top, "Completed")
    live = any(v.phase in ("Pending", "Running") for v in views)
    preemptions = _kept_preemptions(paths, preemption_restarts(top))
    state, attempts = with_restarts(
        state, layout, policy, outcomes, current, jobset_active=active, live=live, preemptions=preemptions
    )
    return Seen(state, mine, attempts)


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def planned_processes(folder: JobFolder) -> list[dict[str, Any]]:
    try:
        plan = json.loads(folder.plan_json.read_text(encoding="utf-8"))
        return [p for node in plan["nodes"] for p in node["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def stop_rest(client: KubernetesClient, layout: PodLayout, state: JobState) -> None:
    """End what still runs: after a failure or a cancel the whole job; after success the auxiliaries."""
    if state.status == "Completed":
        for pod in client.list("Pod", {JOB_LABEL: layout.object_name}):
            view = pod_view(pod)
            if view.phase in ("Pending", "Running") and not view.deleting:
                client.delete("Pod", view.name)
        return
    delete_job_objects(client, layout, keep_files=True)


def delete_job_objects(client: KubernetesClient, layout: PodLayout, keep_files: bool = False) -> None:
    if layout.jobset:
        client.delete("JobSet", layout.object_name)
    else:
        for role in layout.roles:
            client.delete("Job", f"{layout.object_name}-{role.name}")
    if not keep_files:
        cleanup(client, layout)


def cleanup(client: KubernetesClient, layout: PodLayout) -> None:
    """The ConfigMap, Secret and Service outlive nothing: removed once the job is over."""
    client.delete("ConfigMap", files_name(layout))
    if uses_remote_starts(layout):
        client.delete("Secret", secret_name(layout))
    if not layout.jobset:
        client.delete("Service", layout.object_name)


def _stopping_for(paths: K8sPaths) -> float:
    """Seconds since distrun first began stopping the job's remaining pods."""
    try:
        since = float(paths.stopping.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        since = time.time()
        paths.folder.mkdir(parents=True, exist_ok=True)
        paths.stopping.write_text(f"{since}\n", encoding="utf-8")
    return time.time() - since


def _job_limits(folder: JobFolder) -> JobLimits:
    """The job's limits from its job.json; the defaults (no restarts) when it cannot be read."""
    try:
        return JobSpec.model_validate(json.loads(folder.job_json.read_text(encoding="utf-8"))).limits
    except (OSError, ValueError):
        return JobLimits()


def load_layout(folder: JobFolder) -> PodLayout:
    return _layout_from(json.loads(K8sPaths(folder.root).layout.read_text(encoding="utf-8")))


# ---------------------------------------------------------------- the backend contract


@dataclass(frozen=True)
class KubernetesObjects:
    """Kubernetes' request: the objects, exactly as `schedule` creates them, in that order."""

    request: KubernetesRequest

    def display(self) -> dict[str, Any]:
        return {
            "script_name": "Kubernetes objects, created in this order (--output yaml prints them whole)",
            "script": objects_yaml(self.request.objects, abbreviate=True),
            "objects": self.request.objects,
        }


def preview(loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str | None = None) -> RenderedJob:
    """`distrun plan` for a loaded job, its code snapshot included in the ConfigMap as submit makes it."""
    from distrun.store.snapshot import snapshot_code

    spec = loaded.spec
    job_name = name or spec.name or "generated-name"
    folder = layout.job(job_name)
    bindings = bind(loaded, spec, folder, materialize=False)
    with tempfile.TemporaryDirectory(prefix="distrun-plan-") as tmp:
        code = None
        if spec.code is not None and not kubernetes_target(target).code_in_image:
            source = local_path(loaded, spec.code)
            assert source is not None  # the loader checked it
            code = Path(tmp) / "code"
            snapshot_code(source, code)
        return BACKEND.render(PreparedJob(job_name, spec, folder, target, bindings), layout, code_dir=code)


def _node_outcomes(state: JobState, outcomes: Mapping[str, dict[str, Any]]) -> tuple[NodeOutcome, ...]:
    out = [NodeOutcome.from_dict({"node_rank": -1, **o}) for o in outcomes.values()]
    known = {p.get("name") for o in out for p in o.processes}
    stopped = [p for p in state.processes if p.get("name") not in known]
    if stopped:  # helpers whose pods were removed before their last report came back
        now = time.time()
        out.append(
            NodeOutcome(-1, "", JobStatus.CANCELED, "stopped when the training completed", now, now, processes=stopped)
        )
    return tuple(out)


class KubernetesBackend(Backend):
    """Jobs as a JobSet (or Indexed Jobs and a headless Service); one distrun node agent per pod."""

    kind: ClassVar[str] = "kubernetes"
    engine: ClassVar[str] = "Kubernetes"
    cancel_command: ClassVar[str] = "deleting its objects"
    cancel_wait_s: ClassVar[float] = 60.0
    # JobSet's failurePolicy restarts the whole job (limits.max_restarts); Indexed Jobs and
    # limits.max_preemptions are refused with a reason (`check_restarts`).
    restarts: ClassVar[bool] = True

    def validate_settings(self, target_name: str, settings: Mapping[str, Any]) -> None:
        KubernetesTarget.from_settings(target_name, settings)

    def plan(self, loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str) -> RenderedJob:
        return preview(loaded, layout, target, name)

    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        preflight(target, spec)

    def render(self, job: PreparedJob, layout: Layout, code_dir: Path | None = None) -> RenderedJob:
        """The objects and the plan; no cluster is asked (`distrun plan` works offline). With
        `jobset: auto` the JobSet form is rendered; schedule asks the cluster and renders the
        Indexed Jobs form instead when the JobSet CRD is not installed."""
        settings = kubernetes_target(job.target)
        notes: list[str] = []
        jobset = use_jobset(settings, None)
        if settings.jobset == "auto":
            notes.append(
                "jobset: auto - shown as one JobSet; when submitted, a cluster without the JobSet CRD gets "
                "a headless Service and Indexed Jobs instead (set jobset: always or never to fix the form)"
            )
        code = code_dir if code_dir is not None else (job.folder.code if job.folder.code.is_dir() else None)
        if code is None and job.spec.code is not None and not settings.code_in_image:
            notes.append("the code snapshot is added to the ConfigMap when the job is submitted")
        named = named_image(job.spec, layout.config_path)
        check_restarts(job.target.name, job.spec, jobset)
        request = render_job(job.spec, settings, job.name, job.bindings, job.folder.root, code, jobset, named)
        return RenderedJob(
            job=job,
            plan=request.plan,
            request=KubernetesObjects(request),
            kind=self.kind,
            notes=(*notes, *request.notes),
        )

    def schedule(self, rendered: RenderedJob, layout: Layout) -> JobRecord:
        """Create the job's objects and return the record (Queued); Kubernetes runs the job from here on."""
        job = rendered.job
        assert isinstance(rendered.request, KubernetesObjects)
        request = rendered.request.request
        index = JobIndex(layout.db_path)
        paths = K8sPaths(job.folder.root)
        with recorded_as_not_submitted(index, job.name, "the job's files"):
            client = KubernetesClient(kubernetes_target(job.target))
            request = _for_cluster(rendered, request, client, layout)
            write_file(job.folder.plan_json, compact_json(request.plan.to_dict()))
            _write_json(paths.layout, _layout_dict(request.layout))
            _write_json(paths.objects, request.objects)
            submit(client, request)
        namespace = kubernetes_target(job.target).namespace
        index.update(job.name, status=JobStatus.QUEUED, backend_id=f"{namespace}/{request.layout.object_name}")
        return index.get(job.name)

    def observe(self, record: JobRecord, layout: Layout) -> Observation | None:
        """Pods, logs and outcomes -> the job's state. Also ends what must end, since no controller
        does it for Indexed Jobs: the whole gang after a failure or a cancel, parameter servers
        after success (Finalizing until their pods are gone, at most STOP_WAIT_S)."""
        if not record.backend_id:
            return None
        folder = layout.job(record.name)
        settings = kubernetes_target(resolve_target(record.compute, layout.config_path))
        client = KubernetesClient(settings)
        pod_layout = load_layout(folder)
        policy = RestartPolicy.of(_job_limits(folder))
        seen = observe(client, folder, pod_layout, policy)
        state = seen.state
        status, terminal = JobStatus.of(state.status), state.terminal
        if state.stop_the_rest:
            stop_rest(client, pod_layout, state)
            if _stopping_for(K8sPaths(folder.root)) > STOP_WAIT_S:
                terminal = True
            else:
                status = JobStatus.FINALIZING
        if terminal:
            cleanup(client, pod_layout)
        return Observation(
            status=status,
            reason=state.reason,
            root_cause=state.root_cause,
            outcomes=_node_outcomes(state, seen.outcomes),
            attempts=None if seen.attempts is None else [a.to_dict() for a in seen.attempts],
        )

    def cancel(self, record: JobRecord, layout: Layout) -> None:
        """Delete the JobSet (or Jobs) with foreground propagation, after noting the request."""
        if not record.backend_id:
            JobIndex(layout.db_path).update(
                record.name, status=JobStatus.CANCELED, reason="canceled before it was submitted", ended_at=time.time()
            )
            return
        request_cancel(record, layout)

    def fetch_logs(self, record: JobRecord, layout: Layout) -> None:
        """Bring the pods' logs into user_logs/ (only what is new); a cluster that does not answer changes nothing."""
        if not record.backend_id:
            return
        folder = layout.job(record.name)
        try:
            settings = kubernetes_target(resolve_target(record.compute, layout.config_path))
            observe(KubernetesClient(settings), folder, load_layout(folder), RestartPolicy.of(_job_limits(folder)))
        except (DistrunError, OSError):
            pass


def _for_cluster(
    rendered: RenderedJob, request: KubernetesRequest, client: KubernetesClient, layout: Layout
) -> KubernetesRequest:
    """With `jobset: auto`, the form the cluster can run: render assumed JobSet without asking;
    here the cluster is asked, and the job is rendered again as Indexed Jobs when it has no JobSet CRD."""
    job = rendered.job
    settings = kubernetes_target(job.target)
    jobset = use_jobset(settings, client if settings.jobset == "auto" else None)
    if jobset == request.layout.jobset:
        return request
    check_restarts(job.target.name, job.spec, jobset)
    code = job.folder.code if job.folder.code.is_dir() else None
    named = named_image(job.spec, layout.config_path)
    return render_job(job.spec, settings, job.name, job.bindings, job.folder.root, code, jobset, named)


def request_cancel(record: JobRecord, layout: Layout) -> None:
    folder = layout.job(record.name)
    paths = K8sPaths(folder.root)
    paths.folder.mkdir(parents=True, exist_ok=True)
    if not paths.cancel.exists():
        paths.cancel.write_text(f"{time.time()}\n", encoding="utf-8")
    settings = kubernetes_target(resolve_target(record.compute, layout.config_path))
    delete_job_objects(KubernetesClient(settings), load_layout(folder), keep_files=True)


BACKEND = KubernetesBackend()

__all__ = ["BACKEND", "KubernetesApiError", "KubernetesBackend", "preview"]
