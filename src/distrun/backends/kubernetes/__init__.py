"""The Kubernetes backend: a job becomes a JobSet (or Indexed Jobs and a headless Service).

distrun does not replace Kubernetes' controllers: it renders the objects purely from the plan
(`render`: `distrun plan --compute <kubernetes target> --output yaml` prints them), creates
them with the official `kubernetes` client, and reads pods, their logs and their agents'
outcomes back. In every pod, distrun's node agent (`pod_agent`) runs that pod's processes
with the same gang supervisor as local compute. Nothing needs a shared filesystem: the job's
files travel in a ConfigMap, the outcomes in the pods' termination messages and logs.

Modules: `target` (settings), `pods` (roles, pod names, placement: pure), `manifests` (the
objects: pure), `bundle` (the job's files as one ConfigMap), `render` (all of it for one job),
`client` (the API), `state` (pods -> distrun's status: pure), `collect` (logs and outcomes
into the job folder), `pod_agent` (runs in each pod). This module is the backend interface the
CLI calls: `validate_settings`, `preflight`, `dry_run`, `submit_detached`, `run_streaming`,
`refresh`, `cancel`.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from distrun.backends.kubernetes.client import KubernetesApiError, KubernetesClient
from distrun.backends.kubernetes.collect import (
    K8sPaths,
    collect_pod_log,
    collecting,
    keep_outcome,
    label_files,
    read_outcomes,
)
from distrun.backends.kubernetes.manifests import JOB_LABEL
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.render import KubernetesRequest, render_request
from distrun.backends.kubernetes.state import JobState, job_state, pod_view, termination_outcome
from distrun.backends.kubernetes.target import KubernetesTarget
from distrun.backends.targets import ComputeTarget, resolve_target
from distrun.errors import DistrunError
from distrun.follow import follow_logs
from distrun.report import execution_summary, stream_header
from distrun.spec.loader import LoadedJob, local_path
from distrun.spec.models import JobSpec
from distrun.store.index import CANCELED, FAILED, QUEUED, JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout
from distrun.submission import PreparedJob, bind

POLL_S = 0.5
CANCEL_WAIT_S = 60.0
STOP_WAIT_S = 120.0
FINALIZING = "Finalizing"


def kubernetes_target(target: ComputeTarget) -> KubernetesTarget:
    return KubernetesTarget.from_settings(target.name, target.settings)


def validate_settings(name: str, settings: Mapping[str, Any]) -> None:
    """`distrun compute create --type kubernetes`: refuse settings a job could not use."""
    KubernetesTarget.from_settings(name, settings)


def use_jobset(target: KubernetesTarget, client: KubernetesClient | None) -> bool:
    if target.jobset != "auto":
        return target.jobset == "always"
    return client.has_jobset() if client is not None else True


def preflight(target: ComputeTarget, job: JobSpec) -> None:
    """Before anything is recorded: the job has an image, and the cluster answers in the namespace."""
    from distrun.backends.kubernetes.pods import build_layout

    settings = kubernetes_target(target)
    build_layout(job, settings, job.name or "job", jobset=True)  # image and per-role resources
    client = KubernetesClient(settings)
    client.check()
    if settings.jobset == "always" and not client.has_jobset():
        raise DistrunError(
            f"compute target {target.name!r} asks for JobSet (jobset: always) but the cluster has no JobSet CRD",
            "install JobSet (https://jobset.sigs.k8s.io), or set jobset: auto to use Indexed Jobs",
        )


def render_job(
    spec: JobSpec,
    settings: KubernetesTarget,
    name: str,
    bindings: Any,
    job_dir: Path,
    code_dir: Path | None,
    jobset: bool,
) -> KubernetesRequest:
    return render_request(
        spec, settings, job_name=name, bindings=bindings, local_job_dir=str(job_dir), code_dir=code_dir, jobset=jobset
    )


def dry_run(loaded: LoadedJob, layout: Layout, target: ComputeTarget) -> dict[str, Any]:
    """`distrun plan --compute <kubernetes target>`: the objects as they would be created, and the plan."""
    from distrun.store.snapshot import snapshot_code

    spec = loaded.spec
    name = spec.name or "generated-name"
    settings = kubernetes_target(target)
    folder = layout.job(name)
    notes = []
    try:
        jobset = use_jobset(settings, KubernetesClient(settings) if settings.jobset == "auto" else None)
    except DistrunError as exc:
        jobset = True
        notes.append(f"the cluster could not be asked whether JobSet is installed ({exc.message}): JobSet assumed")
    bindings = bind(loaded, spec, folder, materialize=False)
    with tempfile.TemporaryDirectory(prefix="distrun-plan-") as tmp:
        code = None
        if spec.code is not None and not settings.code_in_image:
            source = local_path(loaded, spec.code)
            assert source is not None  # the loader checked it
            snapshot_code(source, Path(tmp) / "code")
            code = Path(tmp) / "code"
        request = render_job(spec, settings, name, bindings, folder.root, code, jobset)
    return {
        "compute": target.name,
        "type": "kubernetes",
        "notes": [*notes, *request.notes],
        "script_name": "Kubernetes objects, created in this order (--output yaml prints them whole)",
        "script": objects_yaml(request.objects, abbreviate=True),
        "objects": request.objects,
        "plan": request.plan.to_dict(),
    }


def objects_yaml(objects: list[dict[str, Any]], abbreviate: bool = False) -> str:
    from io import StringIO

    from ruamel.yaml import YAML

    shown = objects
    if abbreviate:
        shown = []
        for obj in objects:
            if obj.get("binaryData"):
                sizes = {
                    k: f"<{len(v)} base64 characters: the job's files, code snapshot included>"
                    for k, v in obj["binaryData"].items()
                }
                obj = {**obj, "binaryData": sizes}
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


def submit_detached(prepared: PreparedJob, layout: Layout) -> JobRecord:
    """Create the job's objects and return the record (Queued); Kubernetes runs it from here on."""
    index = JobIndex(layout.db_path)
    folder = prepared.folder
    paths = K8sPaths(folder.root)
    try:
        settings = kubernetes_target(prepared.target)
        client = KubernetesClient(settings)
        jobset = use_jobset(settings, client)
        request = render_job(
            prepared.spec, settings, prepared.name, prepared.bindings, folder.root, folder.code, jobset
        )
        folder.plan_json.write_text(json.dumps(request.plan.to_dict(), indent=2), encoding="utf-8")
        _write_json(paths.layout, _layout_dict(request.layout))
        _write_json(paths.objects, request.objects)
        submit(client, request)
    except (DistrunError, OSError) as exc:
        message = exc.message if isinstance(exc, DistrunError) else f"could not write the job's Kubernetes files: {exc}"
        index.update(prepared.name, status=FAILED, reason=f"not submitted: {message}", ended_at=time.time())
        if isinstance(exc, DistrunError):
            raise
        raise DistrunError(f"not submitted: {message}") from None
    index.update(prepared.name, status=QUEUED, backend_id=f"{settings.namespace}/{request.layout.object_name}")
    return index.get(prepared.name)


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


def observe(client: KubernetesClient, folder: JobFolder, layout: PodLayout) -> JobState:
    """Pods, their logs and outcomes -> distrun's state; the logs land in the job folder on the way.

    An outcome read once (a pod's final log record, else its termination message) is kept in
    the job folder: pods are removed when their job ends, their reports must not go with them.
    """
    paths = K8sPaths(folder.root)
    pods = client.list("Pod", {JOB_LABEL: layout.object_name})
    labels = label_files(folder)
    views = [pod_view(p) for p in pods]
    with collecting(paths):
        for view in views:
            serves_ssh = any(r.serves_ssh and r.name == view.role for r in layout.roles)
            if serves_ssh or (view.phase == "Pending" and not view.deleting):
                continue
            collect_pod_log(folder, paths, view.name, client.pod_log(view.name), labels)
            from_status = termination_outcome(view)
            if from_status is not None and not (paths.outcomes / f"{view.name}.json").exists():
                keep_outcome(paths, view.name, from_status)
        outcomes = read_outcomes(paths)
    return job_state(
        layout,
        views,
        outcomes,
        planned=planned_processes(folder),
        engine_failed=_engine_failure(client, layout),
        canceled=paths.cancel.exists(),
    )


def planned_processes(folder: JobFolder) -> list[dict[str, Any]]:
    try:
        plan = json.loads(folder.plan_json.read_text(encoding="utf-8"))
        return [p for node in plan["nodes"] for p in node["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def stop_rest(client: KubernetesClient, layout: PodLayout, state: JobState) -> None:
    """End what still runs: after a failure or a cancel the whole job; after success the auxiliaries."""
    if state.status == "Completed" or state.status == FINALIZING:
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
    """The ConfigMap and Service outlive nothing: removed once the job is over."""
    client.delete("ConfigMap", f"{layout.object_name}-files")
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


def load_layout(folder: JobFolder) -> PodLayout:
    return _layout_from(json.loads(K8sPaths(folder.root).layout.read_text(encoding="utf-8")))


def refresh(index: JobIndex, record: JobRecord) -> JobRecord:
    """Bring a live record up to date from the cluster; a cluster that does not answer changes nothing."""
    if record.terminal or not record.backend_id:
        return record
    home = index.db_path.parent
    folder = Layout(home).job(record.name)
    try:
        settings = kubernetes_target(resolve_target(record.compute, Layout(home).config_path))
        client = KubernetesClient(settings)
        layout = load_layout(folder)
        state = observe(client, folder, layout)
        status, terminal = state.status, state.terminal
        if state.stop_the_rest:
            # Gang stop after a failure or a cancel, parameter servers after success: the
            # record ends when the pods have (their last lines and outcomes come back), or
            # after STOP_WAIT_S when a cluster does not end them.
            stop_rest(client, layout, state)
            if _stopping_for(K8sPaths(folder.root)) > STOP_WAIT_S:
                terminal = True
            else:
                status = FINALIZING
        if terminal:
            cleanup(client, layout)
    except (DistrunError, OSError):
        return record
    now = time.time()
    fields: dict[str, Any] = {}
    if status != record.status:
        fields["status"] = status
    if state.reason != (record.reason or ""):
        fields["reason"] = state.reason
    if record.started_at is None and status in ("Running", FINALIZING, "Completed", "Failed"):
        fields["started_at"] = now
    if state.processes:
        fields["processes"] = state.processes
    if state.root_cause is not None or terminal:
        fields["root_cause"] = state.root_cause
    if terminal:
        fields["ended_at"] = now
    if fields:
        index.update(record.name, **fields)
        record = dataclasses.replace(record, **fields)
    return record


# ---------------------------------------------------------------- cancel


def request_cancel(record: JobRecord, layout: Layout) -> None:
    folder = layout.job(record.name)
    paths = K8sPaths(folder.root)
    paths.folder.mkdir(parents=True, exist_ok=True)
    if not paths.cancel.exists():
        paths.cancel.write_text(f"{time.time()}\n", encoding="utf-8")
    settings = kubernetes_target(resolve_target(record.compute, layout.config_path))
    delete_job_objects(KubernetesClient(settings), load_layout(folder), keep_files=True)


def cancel(record: JobRecord, layout: Layout) -> JobRecord:
    """`distrun job cancel`: delete the job's objects (foreground), then wait (bounded) for Canceled."""
    index = JobIndex(layout.db_path)
    if not record.backend_id:
        index.update(record.name, status=CANCELED, reason="canceled before it was submitted", ended_at=time.time())
        return index.get(record.name)
    request_cancel(record, layout)
    give_up = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < give_up:
        record = refresh(index, index.get(record.name))
        if record.terminal:
            return record
        time.sleep(0.25)
    return index.get(record.name)


# ---------------------------------------------------------------- run


def run_streaming(prepared: PreparedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    """`distrun run --compute <kubernetes target>`: submit, stream every rank's lines, summarize.

    Ctrl-C (or SIGTERM) cancels the job (its objects are deleted), and the stream goes on until
    the pods are gone; a second Ctrl-C stops waiting.
    """
    index = JobIndex(layout.db_path)
    record = submit_detached(prepared, layout)
    plan = json.loads(prepared.folder.plan_json.read_text(encoding="utf-8"))
    processes = sum(len(n["processes"]) for n in plan["nodes"])
    head, rule = stream_header(record, processes, len(plan["nodes"])).rsplit("\n", 1)
    out.write(f"{head}\nKubernetes {record.backend_id} on compute {prepared.target.name}\n{rule}\n".encode())
    out.flush()
    watch = _Watch(index, layout, prepared, out)
    previous = {sig: signal.signal(sig, watch.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        follow_logs(prepared.folder, out, watch.finished, color=color)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    record = index.get(prepared.name)
    out.write((execution_summary(record) + "\n").encode())
    out.flush()
    return record


class _Watch:
    """The log follower's "is it over?": refreshes from the cluster every POLL_S, says why a job
    waits, and turns an interrupt into a cancel without leaving the log stream."""

    def __init__(self, index: JobIndex, layout: Layout, prepared: PreparedJob, out: BinaryIO) -> None:
        self.index, self.layout, self.prepared, self.out = index, layout, prepared, out
        self.last_check = 0.0
        self.done = False
        self.shown = ("", "")
        self.interrupted = 0
        self.signal_name = ""
        self.canceled = False

    def interrupt(self, signum: int, frame: object) -> None:
        self.interrupted += 1
        self.signal_name = signal.Signals(signum).name
        if self.interrupted > 1:
            raise KeyboardInterrupt

    def finished(self) -> bool:
        if self.interrupted and not self.canceled:
            self.canceled = True
            self._say(f"{self.signal_name} received, canceling the job (deleting its Kubernetes objects)")
            record = self.index.get(self.prepared.name)
            if not record.terminal:
                try:
                    request_cancel(record, self.layout)
                except DistrunError as exc:
                    self._say(f"cancel failed: {exc.message}")
        now = time.monotonic()
        if self.done or now - self.last_check < POLL_S:
            return self.done
        self.last_check = now
        record = refresh(self.index, self.index.get(self.prepared.name))
        self.done = record.terminal
        seen = (record.status, record.reason or "")
        if not self.done and seen != self.shown and record.status not in ("Running", FINALIZING):
            self._say(f"{record.status}" + (f" ({seen[1]})" if seen[1] else ""))
        self.shown = seen
        return self.done

    def _say(self, text: str) -> None:
        self.out.write(f"distrun: {text}\n".encode())
        self.out.flush()


__all__ = [
    "KubernetesApiError",
    "cancel",
    "dry_run",
    "preflight",
    "refresh",
    "run_streaming",
    "submit_detached",
    "validate_settings",
]
