"""The Kubernetes backend (`BACKEND`, `KubernetesBackend`: a `distrun.backends.engine.EngineBackend`).

The package's docstring says how a job runs on Kubernetes. Here: the contract, and what it
renders; the calls to the cluster are `cluster`'s, the files in the job folder `job_files`'.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from distrun.backends.base import Observation, RenderedJob
from distrun.backends.engine import EngineBackend
from distrun.backends.kubernetes.attempts import check_restarts
from distrun.backends.kubernetes.client import KubernetesApiError
from distrun.backends.kubernetes.cluster import KubernetesCluster, use_jobset
from distrun.backends.kubernetes.display import objects_yaml, shown_objects
from distrun.backends.kubernetes.job_files import (
    K8sPaths,
    job_limits,
    load_layout,
    note_cancel,
    save_layout,
    stopping_for,
    write_json,
)
from distrun.backends.kubernetes.mlflow_route import planned_uri, pod_tracking
from distrun.backends.kubernetes.observe import node_outcomes
from distrun.backends.kubernetes.pods import build_layout
from distrun.backends.kubernetes.render import KubernetesRequest, render_request
from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.backends.submission_failure import recorded_as_not_submitted
from distrun.core.errors import DistrunError
from distrun.core.file_modes import write_file_beneath
from distrun.core.image_reference import IMAGE_HINT, image_reference_problem
from distrun.core.job_status import JobStatus
from distrun.core.json_encoding import compact_json
from distrun.loading.loader import LoadedJob, local_path
from distrun.metrics.rank_token import read_token
from distrun.prepare.compute import ComputeTarget, submitted_target
from distrun.prepare.submission import PreparedJob, bind
from distrun.restarts.policy import RestartPolicy
from distrun.spec.models import JobSpec
from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import Layout

STOP_WAIT_S = 120.0


def render_job(
    spec: JobSpec,
    settings: KubernetesSettings,
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
        # The ranks' MLflow token: in the job's Secret, never in its ConfigMap (rank_token).
        tracking_token=read_token(job_dir),
    )


def named_image(job: JobSpec, config_path: Path) -> str | None:
    """The image config.yaml's `environments:` gives the job's environment name, if any."""
    from distrun.environments.named import find_named

    if not isinstance(job.environment, str):
        return None
    found = find_named(job.environment, config_path)
    image = found.body.get("image") if found is not None else None
    problem = image_reference_problem(str(image)) if image else None
    if problem:  # it becomes the pods' image: refused as the job's own environment.image is
        raise DistrunError(f"{config_path}: environments.{job.environment}.image: {problem}", IMAGE_HINT)
    return str(image) if image else None


# ---------------------------------------------------------------- the backend contract


@dataclass(frozen=True)
class KubernetesObjects:
    """Kubernetes' request: the objects, exactly as `schedule` creates them, in that order."""

    request: KubernetesRequest

    def display(self) -> dict[str, Any]:
        return {
            "script_name": "Kubernetes objects, created in this order (--output yaml prints them whole)",
            "script": objects_yaml(shown_objects(self.request.objects), abbreviate=True),
            "objects": shown_objects(self.request.objects),
        }


def preview(loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str | None = None) -> RenderedJob:
    """`distrun plan` for a loaded job, its code snapshot included in the ConfigMap as submit makes it."""
    from distrun.store.snapshot import snapshot_code

    spec = loaded.spec
    job_name = name or spec.name or "generated-name"
    folder = layout.job(job_name)
    bindings = bind(loaded, spec, folder, materialize=False, ships_files=True)
    with tempfile.TemporaryDirectory(prefix="distrun-plan-") as tmp:
        code = None
        if spec.code is not None and not BACKEND.target_settings(target).code_in_image:
            source = local_path(loaded, spec.code)
            assert source is not None  # the loader checked it
            code = Path(tmp) / "code"
            snapshot_code(source, code)
        rendered = BACKEND.render(PreparedJob(job_name, spec, folder, target, bindings), layout, code_dir=code)
    return _with_planned_tracking(rendered)


def _with_planned_tracking(rendered: RenderedJob) -> RenderedJob:
    """The plan's word on the pods' MLflow route: the run is made at submit, its URI known here."""
    import dataclasses
    import os

    from distrun.metrics.tracking import mlflow_available

    uri = planned_uri(os.environ, mlflow_available())
    note = pod_tracking({"MLFLOW_TRACKING_URI": uri}).note if uri else None
    return dataclasses.replace(rendered, notes=(*rendered.notes, note)) if note else rendered


class KubernetesBackend(EngineBackend):
    """Jobs as a JobSet (or Indexed Jobs and a headless Service); one distrun node agent per pod."""

    kind: ClassVar[str] = "kubernetes"
    engine: ClassVar[str] = "Kubernetes"
    cancel_command: ClassVar[str] = "deleting its objects"
    cancel_wait_s: ClassVar[float] = 60.0
    # JobSet's failurePolicy restarts the whole job (limits.max_restarts); Indexed Jobs and
    # limits.max_preemptions are refused with a reason (`check_restarts`).
    restarts: ClassVar[bool] = True
    settings_model: ClassVar[type[KubernetesSettings]] = KubernetesSettings

    def plan(self, loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str) -> RenderedJob:
        return preview(loaded, layout, target, name)

    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        """Before anything is recorded: the job has an image, and the cluster answers in the namespace.

        What can be told without the cluster is checked first, before an API client is made.
        """
        settings: KubernetesSettings = self.target_settings(target)
        check_restarts(target.name, spec, settings.jobset != "never")
        named = named_image(spec, Layout().config_path)
        build_layout(spec, settings, spec.name or "job", jobset=True, named_image=named)  # image, per-role resources
        cluster = KubernetesCluster(settings)
        cluster.check(target.name)
        check_restarts(target.name, spec, cluster.uses_jobset())

    def render(self, job: PreparedJob, layout: Layout, code_dir: Path | None = None) -> RenderedJob:
        """The objects and the plan; no cluster is asked (`distrun plan` works offline). With
        `jobset: auto` the JobSet form is rendered; schedule asks the cluster and renders the
        Indexed Jobs form instead when the JobSet CRD is not installed."""
        settings: KubernetesSettings = self.target_settings(job.target)
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
            cluster = KubernetesCluster(self.target_settings(job.target))
            request = _for_cluster(rendered, request, cluster, layout)
            write_file_beneath(job.folder.root, job.folder.plan_json, compact_json(request.plan.to_dict()))
            save_layout(paths, request.layout)
            write_json(paths, paths.objects, request.objects)
            cluster.submit(request)
        unreached = pod_tracking(job.bindings.environment)
        if not unreached.reached and unreached.note:
            from distrun.metrics.tracking import note_metrics  # sqlite3 and the server's client: only here

            note_metrics(job.folder, f"distrun: {unreached.note}")  # also on stderr, as the run's other notes
        namespace = self.target_settings(job.target).namespace
        index.update(job.name, status=JobStatus.QUEUED, backend_id=f"{namespace}/{request.layout.object_name}")
        return index.get(job.name)

    def observe_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        """Pods, logs and outcomes -> the job's state. Also ends what must end, since no controller
        does it for Indexed Jobs: the whole gang after a failure or a cancel, parameter servers
        after success (Finalizing until their pods are gone, at most STOP_WAIT_S)."""
        folder = layout.job(record.name)
        cluster = KubernetesCluster(self.target_settings(target))
        pod_layout = load_layout(folder)
        seen = cluster.observe(folder, pod_layout, RestartPolicy.of(job_limits(folder)))
        state = seen.state
        status, terminal = state.status, state.terminal
        if state.stop_the_rest:
            cluster.stop_rest(pod_layout, state)
            if stopping_for(K8sPaths(folder.root)) > STOP_WAIT_S:
                terminal = True
            else:
                status = JobStatus.FINALIZING
        if terminal:
            cluster.cleanup(pod_layout)
        return Observation(
            status=status,
            reason=state.reason,
            root_cause=state.root_cause,
            outcomes=node_outcomes(state, seen.outcomes),
            attempts=None if seen.attempts is None else [a.to_dict() for a in seen.attempts],
        )

    def cancel_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """Delete the JobSet (or Jobs) with foreground propagation, after noting the request."""
        folder = layout.job(record.name)
        note_cancel(K8sPaths(folder.root))
        cluster = KubernetesCluster(self.target_settings(target))
        cluster.delete_objects(load_layout(folder))

    def fetch_logs(self, record: JobRecord, layout: Layout) -> None:
        """Bring the pods' logs into user_logs/ (only what is new); a cluster that does not answer changes nothing."""
        if not record.backend_id:
            return
        folder = layout.job(record.name)
        try:
            cluster = _cluster_of(record, layout)
            cluster.observe(folder, load_layout(folder), RestartPolicy.of(job_limits(folder)))
        except (DistrunError, OSError):
            pass

    def ask_stacks(
        self, record: JobRecord, layout: Layout, native: bool, wait: float
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """Through node 0's pod agent, reached by the API server's pod proxy (`stacks_ask`)."""
        from distrun.backends.kubernetes.stacks_ask import ask_pods

        cluster = _cluster_of(record, layout)
        return ask_pods(cluster.client, load_layout(layout.job(record.name)), record.name, native, wait)


def _for_cluster(
    rendered: RenderedJob, request: KubernetesRequest, cluster: KubernetesCluster, layout: Layout
) -> KubernetesRequest:
    """With `jobset: auto`, the form the cluster can run: render assumed JobSet without asking;
    here the cluster is asked, and the job is rendered again as Indexed Jobs when it has no JobSet CRD."""
    job = rendered.job
    jobset = cluster.uses_jobset()
    if jobset == request.layout.jobset:
        return request
    check_restarts(job.target.name, job.spec, jobset)
    code = job.folder.code if job.folder.code.is_dir() else None
    named = named_image(job.spec, layout.config_path)
    return render_job(job.spec, cluster.settings, job.name, job.bindings, job.folder.root, code, jobset, named)


def _cluster_of(record: JobRecord, layout: Layout) -> KubernetesCluster:
    """The cluster a submitted job runs on: its record's compute target, as it was when the job was submitted."""
    return KubernetesCluster(BACKEND.target_settings(submitted_target(record, layout.config_path)))


BACKEND = KubernetesBackend()

__all__ = ["BACKEND", "KubernetesApiError", "KubernetesBackend", "preview"]
