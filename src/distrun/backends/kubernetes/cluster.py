"""The Kubernetes operations for one compute target: check, create, observe, stop and delete a job's objects.

What the backend contract (`backend.KubernetesBackend`) asks of a cluster, through the API
client (`client`); the objects themselves are rendered elsewhere (`render`), and what a job's
state is, is decided purely (`state`, `attempts`).
"""

from __future__ import annotations

from typing import Any

from distrun.backends.kubernetes.client import KubernetesClient
from distrun.backends.kubernetes.manifests import (
    JOB_LABEL,
    REPORT_FINALIZER,
    files_name,
    secret_name,
)
from distrun.backends.kubernetes.observe import Seen, observe_job
from distrun.backends.kubernetes.pods import PodLayout
from distrun.backends.kubernetes.render import KubernetesRequest
from distrun.backends.kubernetes.state import pod_view
from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobState, JobStatus
from distrun.restarts.policy import RestartPolicy
from distrun.store.layout import JobFolder


def use_jobset(settings: KubernetesSettings, client: KubernetesClient | None) -> bool:
    """Whether the job runs as a JobSet; with `jobset: auto`, as the cluster says (assumed yes without one)."""
    if settings.jobset != "auto":
        return settings.jobset == "always"
    return client.has_jobset() if client is not None else True


class KubernetesCluster:
    """One compute target's cluster, through its API client."""

    def __init__(self, settings: KubernetesSettings) -> None:
        self.settings = settings
        self.client = KubernetesClient(settings)

    def check(self, target_name: str) -> None:
        """The cluster answers in the target's namespace, and has JobSet when the target asks for it."""
        self.client.check()
        if self.settings.jobset == "always" and not self.client.has_jobset():
            raise DistrunError(
                f"compute target {target_name!r} asks for JobSet (jobset: always) but the cluster has no JobSet CRD",
                "install JobSet (https://jobset.sigs.k8s.io), or set jobset: auto to use Indexed Jobs",
            )

    def uses_jobset(self) -> bool:
        return use_jobset(self.settings, self.client)

    def submit(self, request: KubernetesRequest) -> None:
        """Create every object in order; on a refusal, remove what was created (nothing half-submitted)."""
        created: list[dict[str, Any]] = []
        try:
            for obj in request.objects:
                self.client.create(obj)
                created.append(obj)
        except DistrunError:
            for obj in reversed(created):
                try:
                    self.client.delete(obj["kind"], obj["metadata"]["name"])
                except DistrunError:
                    pass
            raise

    def observe(self, folder: JobFolder, layout: PodLayout, policy: RestartPolicy | None = None) -> Seen:
        return observe_job(self.client, folder, layout, policy)

    def stop_rest(self, layout: PodLayout, state: JobState) -> None:
        """End what still runs: after a failure or a cancel the whole job; after success the auxiliaries."""
        if state.status == JobStatus.COMPLETED:
            live = [pod_view(p) for p in self.client.list("Pod", {JOB_LABEL: layout.object_name})]
            live = [v for v in live if v.phase in ("Pending", "Running") and not v.deleting]
            if layout.jobset:  # the JobSet is Completed: its controller ignores what its Jobs do now
                for view in live:
                    self.client.delete("Pod", view.name)
                return
            # Indexed Jobs: the auxiliary roles' Jobs go with their pods. A pod deleted alone exits
            # non-zero when stopped, and its Job's failure policy would fail the Job (and the job with it).
            for role in sorted({v.role for v in live}):
                self.client.delete("Job", f"{layout.object_name}-{role}")
            return
        self.delete_objects(layout)

    def delete_objects(self, layout: PodLayout) -> None:
        """The JobSet (or the Jobs), which takes the pods with it; the objects beside them go once
        `observe` sees the job ended (`cleanup`)."""
        if layout.jobset:
            self.client.delete("JobSet", layout.object_name)
        else:
            for role in layout.roles:
                self.client.delete("Job", f"{layout.object_name}-{role.name}")

    def cleanup(self, layout: PodLayout) -> None:
        """The ConfigMap, Secret and Service outlive nothing: removed once the job is over. Pods
        still holding distrun's report finalizer (stopped after the last look) are let go: the
        job's record is written, nothing more will be read from them."""
        for pod in self.client.list("Pod", {JOB_LABEL: layout.object_name}):
            if pod_view(pod).held:
                self.client.remove_finalizer(pod, REPORT_FINALIZER)
        self.client.delete("ConfigMap", files_name(layout))
        self.client.delete("Secret", secret_name(layout))
        if not layout.jobset:
            self.client.delete("Service", layout.object_name)
