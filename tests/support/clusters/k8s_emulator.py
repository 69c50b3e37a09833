"""A Kubernetes stand-in for the tests: an in-memory API emulator plus a test-side kubelet.

No Kubernetes API server can run on our machines, so this is a mock, and says so:

- `KubernetesApiEmulator`: kmock's `KubernetesEmulator` (an in-memory Kubernetes API on
  127.0.0.1 that the official `kubernetes` client talks to), with the resources distrun uses
  declared (JobSet only when the test says its CRD is installed) and pod logs served from the
  files the test kubelet writes.
- `TestControllers`: the few controller behaviours the tests rely on, from the Kubernetes and
  JobSet documentation: an Indexed Job creates one pod per completion index (hostname
  `<job>-<index>`, JOB_COMPLETION_INDEX set), fails at the first failed pod (backoffLimit 0 /
  podFailurePolicy FailJob on exit codes or pod conditions, reason PodFailurePolicy and the
  Job controller's message when a rule matched, else BackoffLimitExceeded) and then stops its
  other pods; a JobSet creates one Job per replicatedJob and completes when the
  successPolicy's Jobs are complete, stopping the rest; owned objects are garbage collected.
  A failed Job is handled as JobSet's failure policy documents
  (https://jobset.sigs.k8s.io/docs/concepts/, "Failure Policy"): the first rule whose
  onJobFailureReasons and onJobFailureMessagePatterns match decides (FailJobSet,
  RestartJobSet, RestartJobSetAndIgnoreMaxRestarts); without a match, RestartJobSet;
  RestartJobSet fails the JobSet once status.restartsCountTowardsMax has reached maxRestarts,
  otherwise it increments it and status.restarts (the ignoring action only status.restarts),
  deletes every Job (foreground: their pods end first) and, as restartStrategy
  BlockingRecreate does, creates them again only once every pod of the earlier
  attempt is gone, each Job and pod labelled `jobset.sigs.k8s.io/restart-attempt` with the new
  count.
- `TestKubelet`: one node, whose "image" has no distrun: `image_python` (the target's python) is
  the test Python run with `-I -S` (no site-packages, no PYTHONPATH), so a pod's agent finds only
  the distrun modules its job's ConfigMap carries; the processes it starts (`python ...` from
  PATH) still have the test Python's packages (torch). It schedules a pod when its resource
  requests fit the node (else the pod stays Pending with PodScheduled=False/Unschedulable and the
  scheduler's message), fills its emptyDir and ConfigMap volumes, and runs its container's command
  as a local process in a mount and UTS namespace of its own (`unshare`): its volumes bind-mounted
  at their mount paths, its termination-message file, its hostname, its environment (values, the
  downward API fields distrun uses, Secret keys), and an /etc/hosts that maps every Indexed Job
  pod's hostname and `<hostname>.<subdomain>` to an address of its own in 127.0.0.0/8 (what
  cluster DNS would answer with the pod's IP; Open MPI's mpirun then tells the pods apart as
  hosts). The API's pod proxy (`pods/<name>:<port>/proxy/...`, POST) passes a request on to
  that address, as the API server passes it to the pod's IP. Reports phase, container state
  and termination message; deleting a pod sends SIGTERM, then SIGKILL after its
  terminationGracePeriodSeconds. A pod evicted by a test (DisruptionTarget
  condition, then deleted) is reported Failed before it goes, so its Job fails as the real Job
  controller's pod tracking makes it.

Nothing here is part of distrun.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE_NAME = "test-node-0"
FINALIZER = "test-kubelet.distrun.test/process"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"


class KubernetesApiEmulator:
    """kmock's in-memory Kubernetes API, served on 127.0.0.1 from a thread of its own."""

    def __init__(self, log_dir: Path, jobset_crd: bool = True) -> None:
        self.log_dir = log_dir
        self.jobset_crd = jobset_crd
        self.url = ""
        self._emulator: Any = None
        self._served: list[Any] = []  # every request, for the tests (kmock's own list is kept short)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        # A running pod's address (the test kubelet's), for the pod proxy.
        self.pod_address: Any = lambda name: None

    def start(self) -> str:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(ready, failure), daemon=True)
        self._thread.start()
        if not ready.wait(30) or failure:
            raise RuntimeError(f"the Kubernetes API emulator did not start: {failure}")
        return self.url

    def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        import kmock

        served = self._served
        in_flight: set[Any] = set()

        class ShortMemoryEmulator(kmock.KubernetesEmulator):
            """kmock matches every request against every reaction by walking its whole request
            history (`request in reaction`), which made each request dearer the longer a test ran
            (most of the emulator's CPU time by the end of a test with restarts). The tests read
            the requests from `served`; kmock keeps only those still being handled."""

            async def _handle(self, request: Any) -> Any:
                served.append(request)
                in_flight.add(request)
                try:
                    return await super()._handle(request)
                finally:
                    in_flight.discard(request)
                    self._requests[:] = [r for r in self._requests if r in in_flight]

        async def main() -> None:
            async with ShortMemoryEmulator() as emulator, kmock.Server(emulator) as server:
                info = kmock.ResourceInfo
                emulator.resources["v1/pods"] = info(kind="Pod", namespaced=True, subresources={"log", "status"})
                emulator.resources["v1/services"] = info(kind="Service", namespaced=True)
                emulator.resources["v1/configmaps"] = info(kind="ConfigMap", namespaced=True)
                emulator.resources["v1/secrets"] = info(kind="Secret", namespaced=True)
                emulator.resources["batch/v1/jobs"] = info(kind="Job", namespaced=True, subresources={"status"})
                if self.jobset_crd:
                    emulator.resources["jobset.x-k8s.io/v1alpha2/jobsets"] = info(kind="JobSet", namespaced=True)
                emulator["get", re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/log")] << self._pod_log
                emulator["post", re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+:\d+/proxy(/.*)?")] << self._pod_proxy
                self._emulator = emulator
                self.url = str(server.url).rstrip("/")
                self._loop = asyncio.get_running_loop()
                self._stop = asyncio.Event()
                ready.set()
                await self._stop.wait()

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to start()
            failure.append(exc)
            ready.set()

    def _pod_log(self, request: Any) -> bytes:
        name = request.url.path.rstrip("/").split("/")[-2]
        path = self.log_dir / name / "log"
        return path.read_bytes() if path.exists() else b""

    async def _pod_proxy(self, request: Any) -> Any:
        """`pods/<name>:<port>/proxy/<path>`: the request passed on to the pod's address, as the API
        server does (its own credentials left out), and the pod's answer back."""
        import kmock

        pod, _, rest = request.url.path.split("/pods/", 1)[1].partition("/proxy")
        name, _, port = pod.partition(":")
        address = self.pod_address(name)
        if address is None:
            return kmock.Response(status=503, payload=b'{"message": "no such pod running"}')
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("x-") or k == "Content-Type"}
        forwarded = urllib.request.Request(
            f"http://{address}:{port}{rest or '/'}", data=request.body, method="POST", headers=headers
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def call() -> tuple[int, bytes]:
            try:
                with opener.open(forwarded, timeout=120) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read()
            except OSError as exc:
                return 502, json.dumps({"message": f"error trying to reach service: {exc}"}).encode()

        status, body = await asyncio.to_thread(call)  # the API keeps answering meanwhile
        return kmock.Response(status=status, payload=body)

    def requests(self) -> list[Any]:
        """Every request the emulator served (kmock's records: method, url, data)."""
        return list(self._served)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "tester", "namespace": namespace}}
            ],
            "current-context": "emulator",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path


class Api:
    """The test side's own few REST calls (plain JSON over HTTP), independent of distrun's client."""

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self.writes = 0  # how many creates, patches and deletes were sent (the loop re-reads after one)

    def _path(self, kind: str, name: str = "") -> str:
        ns = self.namespace
        base = {
            "pods": f"/api/v1/namespaces/{ns}/pods",
            "configmaps": f"/api/v1/namespaces/{ns}/configmaps",
            "secrets": f"/api/v1/namespaces/{ns}/secrets",
            "jobs": f"/apis/batch/v1/namespaces/{ns}/jobs",
            "jobsets": f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
        }[kind]
        return f"{base}/{name}" if name else base

    def _call(self, method: str, path: str, body: Any = None, content: str = "application/json") -> Any:
        if method != "GET":
            self.writes += 1
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return json.loads(raw) if raw else {}

    def list(self, kind: str) -> list[dict[str, Any]]:
        found = self._call("GET", self._path(kind))
        return [o for o in (found or {}).get("items", []) if o.get("metadata", {}).get("namespace") == self.namespace]

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self._call("GET", self._path(kind, name))

    def create(self, kind: str, obj: dict[str, Any]) -> None:
        self._call("POST", self._path(kind), obj)

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self._call("PATCH", self._path(kind, name), patch, "application/merge-patch+json")

    def delete(self, kind: str, name: str) -> None:
        self._call("DELETE", self._path(kind, name), {"propagationPolicy": "Foreground"})


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _owner_key(obj: dict[str, Any]) -> tuple[str, str]:
    """A pod's Job, or a Job itself: (name, JobSet restart). A Job recreated under the same name
    after a JobSet restart is another Job (Kubernetes tells them apart by uid)."""
    labels = _labels(obj)
    return labels.get(JOB_NAME_LABEL) or obj["metadata"]["name"], labels.get(RESTART_LABEL, "0")


def _disrupted(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions)


def _pod_failure_rule(job: dict, pod: dict) -> str:
    """The Job controller's message when a FailJob rule of the Job's podFailurePolicy matches the
    failed pod (its exit code, or a condition such as DisruptionTarget); "" when none does."""
    name = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
    code = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated", {}).get("exitCode")
    conditions = {c.get("type") for c in pod["status"].get("conditions") or [] if c.get("status") == "True"}
    for index, rule in enumerate((job["spec"].get("podFailurePolicy") or {}).get("rules") or []):
        if rule.get("action") != "FailJob":
            continue
        on = rule.get("onExitCodes")
        if on and (code in on.get("values", [])) == (on.get("operator") == "In"):
            what = f"Container {on.get('containerName')} for pod {name} failed with exit code {code}"
            return f"{what} matching FailJob rule at index {index}"
        for wanted in rule.get("onPodConditions") or []:
            if wanted.get("type") in conditions:
                return f"Pod {name} has condition {wanted['type']} matching FailJob rule at index {index}"
    return ""


class TestControllers:
    """The Job, JobSet and garbage-collector behaviours the tests need (see the module docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, api: Api, jobset_crd: bool) -> None:
        self.api = api
        self.jobset_crd = jobset_crd
        self.created_indexes: set[tuple[str, str, int]] = set()

    def reconcile(self, jobsets: list[dict], jobs: list[dict], pods: list[dict]) -> None:
        jobset_names = {j["metadata"]["name"] for j in jobsets}
        for jobset in jobsets:
            name = jobset["metadata"]["name"]
            self._jobset(
                jobset,
                [j for j in jobs if _labels(j).get(JOBSET_LABEL) == name],
                [p for p in pods if _labels(p).get(JOBSET_LABEL) == name],
            )
        owners = set()
        for job in jobs:
            owner = _labels(job).get(JOBSET_LABEL)
            if owner and owner not in jobset_names:
                self.api.delete("jobs", job["metadata"]["name"])  # its JobSet was deleted: garbage
                continue
            owners.add(_owner_key(job))
            self._job(job, [p for p in pods if _owner_key(p) == _owner_key(job)])
        for pod in pods:
            owner = _labels(pod).get(JOB_NAME_LABEL)
            if owner and _owner_key(pod) not in owners and not pod["metadata"].get("deletionTimestamp"):
                self.api.delete("pods", pod["metadata"]["name"])

    # ------------------------------------------------------------ JobSet

    def _jobset(self, jobset: dict, children: list[dict], pods: list[dict]) -> None:
        spec = jobset["spec"]
        if _condition(jobset, "Completed") or _condition(jobset, "Failed"):
            for child in children:
                if not (_condition(child, "Complete") or _condition(child, "Failed")):
                    self.api.delete("jobs", child["metadata"]["name"])
            return
        restarts = int((jobset.get("status") or {}).get("restarts") or 0)
        stale = [c for c in children if _labels(c).get(RESTART_LABEL, "0") != str(restarts)]
        for child in stale:  # an earlier attempt's Jobs: deleted on a restart
            self.api.delete("jobs", child["metadata"]["name"])
        if stale:
            return
        if not children:
            if any(_labels(p).get(RESTART_LABEL, "0") != str(restarts) for p in pods):
                return  # BlockingRecreate: the earlier attempt's pods are still ending
            self._create_jobs(jobset, restarts)
            return
        failed = [c for c in children if _condition(c, "Failed")]
        if failed:
            self._job_failed(jobset, failed[0], restarts)
            return
        targets = (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or [
            r["name"] for r in spec["replicatedJobs"]
        ]
        wanted = [c for c in children if _labels(c).get("jobset.sigs.k8s.io/replicatedjob-name") in targets]
        if wanted and all(_condition(c, "Complete") for c in wanted):
            self._finish(jobset, "Completed", "AllJobsCompleted", "jobset completed successfully")

    def _job_failed(self, jobset: dict, job: dict, restarts: int) -> None:
        """JobSet's failure policy: the first matching rule's action, else RestartJobSet."""
        policy = jobset["spec"].get("failurePolicy") or {}
        failed = next(c for c in job["status"]["conditions"] if c.get("type") == "Failed")
        reason, text = failed.get("reason", ""), failed.get("message", "")
        action = "RestartJobSet"
        for rule in policy.get("rules") or []:
            reasons, patterns = rule.get("onJobFailureReasons"), rule.get("onJobFailureMessagePatterns")
            if (not reasons or reason in reasons) and (not patterns or any(re.search(p, text) for p in patterns)):
                action = rule["action"]
                break
        job_name = job["metadata"]["name"]
        if action == "FailJobSet":
            message = f"jobset failed because job {job_name} failed (failure policy rule, reason {reason})"
            self._finish(jobset, "Failed", "FailurePolicyRuleAction", message)
            return
        counted = int((jobset.get("status") or {}).get("restartsCountTowardsMax") or 0)
        status = {"restarts": restarts + 1}
        if action == "RestartJobSet":
            if counted >= int(policy.get("maxRestarts") or 0):
                message = f"jobset reached its max restarts ({counted}) when job {job_name} failed"
                self._finish(jobset, "Failed", "ReachedMaxRestarts", message)
                return
            status["restartsCountTowardsMax"] = counted + 1
        self.api.patch("jobsets", jobset["metadata"]["name"], {"status": status})

    def _create_jobs(self, jobset: dict, restarts: int) -> None:
        name = jobset["metadata"]["name"]
        spec = jobset["spec"]
        subdomain = (spec.get("network") or {}).get("subdomain") or name
        for rj in spec["replicatedJobs"]:
            for replica in range(rj.get("replicas", 1)):
                template = copy.deepcopy(rj["template"])
                extra = {
                    JOBSET_LABEL: name,
                    "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                    RESTART_LABEL: str(restarts),
                }
                meta = template.get("metadata") or {}
                meta["labels"] = {**(meta.get("labels") or {}), **extra}
                pod_meta = template["spec"]["template"].setdefault("metadata", {})
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **extra}
                template["spec"]["template"]["spec"]["subdomain"] = subdomain
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        **meta,
                        "name": f"{name}-{rj['name']}-{replica}",
                        "namespace": self.api.namespace,
                        "ownerReferences": [
                            {"apiVersion": jobset["apiVersion"], "kind": "JobSet", "name": name, "uid": name}
                        ],
                    },
                    "spec": template["spec"],
                }
                self.api.create("jobs", job)

    def _finish(self, obj: dict, kind: str, reason: str, message: str) -> None:
        condition = {"type": kind, "status": "True", "reason": reason, "message": message}
        plural = "jobsets" if obj["kind"] == "JobSet" else "jobs"
        self.api.patch(plural, obj["metadata"]["name"], {"status": {"conditions": [condition]}})

    # ------------------------------------------------------------ Indexed Job

    def _job(self, job: dict, pods: list[dict]) -> None:
        name = job["metadata"]["name"]
        spec = job["spec"]
        done = _condition(job, "Complete") or _condition(job, "Failed")
        if done:
            for pod in pods:
                if (pod.get("status") or {}).get("phase") in (None, "Pending", "Running") and not pod["metadata"].get(
                    "deletionTimestamp"
                ):
                    self.api.delete("pods", pod["metadata"]["name"])
            return
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Failed":
                message = _pod_failure_rule(job, pod)
                if message:
                    self._finish(job, "Failed", "PodFailurePolicy", message)
                else:  # backoffLimit 0: the first failed pod fails the Job
                    self._finish(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
                return
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        if succeeded >= spec["completions"]:
            self._finish(job, "Complete", "CompletionsReached", "")
            return
        for index in range(spec["completions"]):
            if (*_owner_key(job), index) in self.created_indexes:
                continue  # one pod per index: backoffLimit 0, nothing is retried
            self.created_indexes.add((*_owner_key(job), index))
            template = copy.deepcopy(spec["template"])
            meta = template.get("metadata") or {}
            pod_spec = template["spec"]
            pod_spec["hostname"] = f"{name}-{index}"
            for container in pod_spec["containers"]:
                container.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
            labels = {**(meta.get("labels") or {}), JOB_NAME_LABEL: name, INDEX_ANNOTATION: str(index)}
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{index}-{secrets.token_hex(3)}",
                    "namespace": self.api.namespace,
                    "labels": labels,
                    "annotations": {INDEX_ANNOTATION: str(index)},
                    # The template's own (distrun's report finalizer), as the Job controller copies them.
                    "finalizers": [*(meta.get("finalizers") or []), FINALIZER],
                },
                "spec": pod_spec,
                "status": {"phase": "Pending"},
            }
            self.api.create("pods", pod)


_QUANTITY = re.compile(r"^([0-9.]+)(m|[KMGTPE]i?|[kmgtpe])?$")
_FACTORS = {
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def quantity(text: str) -> float:
    match = _QUANTITY.match(str(text))
    if not match:
        return float("inf")
    return float(match.group(1)) * _FACTORS.get(match.group(2) or "", 1)


@dataclass
class RunningPod:
    name: str
    proc: subprocess.Popen[bytes] | None
    folder: Path
    grace: float
    term_sent_at: float | None = None
    reported: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class TestKubelet:
    """One node that runs each pod's container as a local process (see the module docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, api: Api, root: Path, allowed_mounts: Path, capacity: dict[str, float] | None = None) -> None:
        self.api = api
        self.root = root  # per-pod folders: volumes, log, termination message
        self.allowed = allowed_mounts  # container mount paths must lie here (the target's work_dir)
        self.capacity = capacity or {"cpu": 64, "memory": 256 * 2**30, "nvidia.com/gpu": 0}
        self.hosts_file = root / "hosts"
        self.addresses: dict[str, str] = {}  # pod hostname -> its loopback address, kept once given
        self.pods: dict[str, RunningPod] = {}
        self.base_env: dict[str, str] = dict(os.environ)
        root.mkdir(parents=True, exist_ok=True)
        self.hosts_file.write_text("127.0.0.1 localhost\n")

    def sync(self, pods: list[dict], jobs: list[dict]) -> None:
        self._update_hosts(jobs)
        seen = set()
        for pod in pods:
            name = pod["metadata"]["name"]
            seen.add(name)
            running = self.pods.get(name)
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(pod, running)
                continue
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if running is None and phase == "Pending":
                self._admit(pod)
            elif running is not None and running.proc is not None and not running.reported:
                code = running.proc.poll()
                if code is not None:
                    self._report_exit(pod, running, code)
        for name, running in list(self.pods.items()):
            if name not in seen and running.proc is not None and running.proc.poll() is None:
                self._kill(running)  # gone from the API without the finalizer: stop it anyway

    # ------------------------------------------------------------ DNS

    def _update_hosts(self, jobs: list[dict]) -> None:
        names = set()
        for job in jobs:
            spec = job["spec"]
            subdomain = spec["template"]["spec"].get("subdomain")
            if spec.get("completionMode") != "Indexed" or not subdomain:
                continue
            for index in range(spec["completions"]):
                hostname = f"{job['metadata']['name']}-{index}"
                host = f"{hostname}.{subdomain}"
                address = self._address(hostname)
                names.add(f"{address} {host} {host}.{self.api.namespace}.svc.cluster.local {hostname}")
        text = "127.0.0.1 localhost\n" + "".join(f"{line}\n" for line in sorted(names))
        if self.hosts_file.read_text() != text:
            # Rewritten in place: every pod's bind mount of this file sees the change, as DNS would.
            with open(self.hosts_file, "r+") as handle:
                handle.truncate(0)
                handle.write(text)

    def _address(self, hostname: str) -> str:
        if hostname not in self.addresses:
            n = len(self.addresses)
            self.addresses[hostname] = f"127.0.{1 + n // 250}.{1 + n % 250}"  # never 127.0.0.1 (this machine)
        return self.addresses[hostname]

    def pod_address(self, name: str) -> str | None:
        """The address of a running pod (that of its hostname, as cluster DNS answers)."""
        running = self.pods.get(name)
        if running is None or running.proc is None or running.proc.poll() is not None:
            return None
        return self.addresses.get(running.extra.get("hostname", ""))

    # ------------------------------------------------------------ start

    def _fits(self, pod: dict) -> str:
        wanted: dict[str, float] = {}
        for container in pod["spec"]["containers"]:
            resources = container.get("resources") or {}
            for key, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
                wanted[key] = wanted.get(key, 0) + quantity(value)
        short = sorted(k for k, v in wanted.items() if v > self.capacity.get(k, 0))
        if short:
            return "0/1 nodes are available: " + ", ".join(f"1 Insufficient {k}" for k in short) + "."
        return ""

    def _admit(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        short = self._fits(pod)
        if short:
            conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": short}]
            if (pod.get("status") or {}).get("conditions") != conditions:
                self.api.patch("pods", name, {"status": {"phase": "Pending", "conditions": conditions}})
            return
        folder = self.root / name
        volumes = self._volumes(pod, folder)
        if volumes is None:
            return  # a ConfigMap it mounts does not exist yet: ContainerCreating, try again
        container = pod["spec"]["containers"][0]
        mounts = [(volumes[m["name"]], m["mountPath"]) for m in container.get("volumeMounts") or []]
        message_path = container.get("terminationMessagePath", "/dev/termination-log")
        (folder / "termination-log").touch()
        mounts.append((folder / "termination-log", message_path))
        for _, target in mounts:
            if not Path(target).is_relative_to(self.allowed):
                raise RuntimeError(f"test kubelet: mount path {target} is outside {self.allowed}")
        for source, target in mounts:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            if Path(source).is_dir():
                Path(target).mkdir(exist_ok=True)
            else:
                Path(target).touch()
        env = dict(self.base_env)
        for item in container.get("env") or []:
            secret_key = item.get("valueFrom", {}).get("secretKeyRef")
            if "value" in item:
                env[item["name"]] = item["value"]
            elif secret_key:
                value = self._secret_value(secret_key["name"], secret_key["key"])
                if value is None:
                    return  # the Secret is not there yet: CreateContainerConfigError, try again
                env[item["name"]] = value
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[item["name"]] = name
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                env[item["name"]] = NODE_NAME
            elif found := re.fullmatch(
                r"metadata\.labels\['(.+)'\]", item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
            ):
                env[item["name"]] = _labels(pod).get(found.group(1), "")  # the downward API: "" when unset
        hostname = pod["spec"].get("hostname") or name
        script = "set -e\n"
        args: list[str] = []
        for source, target in [(self.hosts_file, "/etc/hosts"), *mounts]:
            args += [str(source), str(target)]
        script += 'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift\n'
        script += f"hostname {hostname}\n"
        script += 'exec "$@"\n'
        command = [*container.get("command", []), *container.get("args", [])]
        argv = [
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "pod",
            *args,
            "--",
            *command,
        ]
        log = open(folder / "log", "ab")
        with log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        self.pods[name] = RunningPod(name, proc, folder, grace, extra={"hostname": hostname})
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.api.patch(
            "pods",
            name,
            {
                "spec": {"nodeName": NODE_NAME},
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "PodScheduled", "status": "True"}],
                    "containerStatuses": [{"name": container["name"], "state": {"running": {"startedAt": now}}}],
                },
            },
        )

    def _secret_value(self, name: str, key: str) -> str | None:
        import base64

        found = self.api.get("secrets", name)
        if found is None:
            return None
        if key in (found.get("data") or {}):
            return base64.b64decode(found["data"][key]).decode()
        # The emulator stores objects as given; an API server would have merged stringData into data.
        value = (found.get("stringData") or {}).get(key)
        return None if value is None else str(value)

    def _volumes(self, pod: dict, folder: Path) -> dict[str, Path] | None:
        out = {}
        for volume in pod["spec"].get("volumes") or []:
            path = folder / "volumes" / volume["name"]
            if "configMap" in volume:
                found = self.api.get("configmaps", volume["configMap"]["name"])
                if found is None:
                    return None
                path.mkdir(parents=True, exist_ok=True)
                import base64

                for key, value in (found.get("data") or {}).items():
                    (path / key).write_text(value)
                for key, value in (found.get("binaryData") or {}).items():
                    (path / key).write_bytes(base64.b64decode(value))
            else:
                path.mkdir(parents=True, exist_ok=True)
            out[volume["name"]] = path
        return out

    # ------------------------------------------------------------ end

    def _report_exit(self, pod: dict, running: RunningPod, code: int) -> None:
        running.reported = True
        exit_code = code if code >= 0 else 128 - code
        message = (running.folder / "termination-log").read_bytes()[:4096].decode("utf-8", "replace")
        terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "message": message}
        self.api.patch(
            "pods",
            pod["metadata"]["name"],
            {
                "status": {
                    "phase": "Succeeded" if exit_code == 0 else "Failed",
                    "containerStatuses": [
                        {"name": pod["spec"]["containers"][0]["name"], "state": {"terminated": terminated}}
                    ],
                }
            },
        )

    def _terminate(self, pod: dict, running: RunningPod | None) -> None:
        name = pod["metadata"]["name"]
        if running is not None and running.proc is not None and running.proc.poll() is None:
            now = time.monotonic()
            if running.term_sent_at is None:
                running.term_sent_at = now
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(running.proc.pid, signal.SIGTERM)
            elif now - running.term_sent_at > running.grace:
                self._kill(running)
            return
        if running is not None and running.proc is not None and not running.reported:
            self._report_exit(pod, running, running.proc.returncode)
            if _disrupted(pod):
                # Kept until the next sync, so the Job controller sees the evicted pod's failure (the
                # real one's tracking finalizer makes sure it does).
                return
        # Read again just before: distrun may have taken its own finalizer off since this sync's list.
        current = self.api.get("pods", name) or {}
        finalizers = (current.get("metadata") or {}).get("finalizers") or []
        if FINALIZER in finalizers:  # gone now, unless another finalizer (distrun's) still holds it
            self.api.patch("pods", name, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER]}})

    def _kill(self, running: RunningPod) -> None:
        if running.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.proc.pid, signal.SIGKILL)
            running.proc.wait(30)

    def stop(self) -> list[str]:
        """Kill every pod still running; returns the names of those that were."""
        left = []
        for running in self.pods.values():
            if running.proc is not None and running.proc.poll() is None:
                left.append(running.name)
                self._kill(running)
        return left


class EmulatedCluster:
    """The emulator, the controllers and the kubelet, driven by one thread every 0.1 s."""

    def __init__(self, root: Path, namespace: str = "ml", jobset_crd: bool = True) -> None:
        self.root = root
        self.namespace = namespace
        self.jobset_crd = jobset_crd
        self.pod_root = root / "pods"
        self.work_dir = root / "podroot"  # the target's work_dir: where pods mount their volumes
        # The image's python3 without distrun: only the standard library and what sys.path is given.
        self.image_python = root / "image-python3"
        self.emulator = KubernetesApiEmulator(self.pod_root, jobset_crd)
        self.kubeconfig = root / "kubeconfig.json"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self) -> EmulatedCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        url = self.emulator.start()
        self.emulator.write_kubeconfig(self.kubeconfig, self.namespace)
        self.api = Api(url, self.namespace)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.image_python.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
        self.image_python.chmod(0o755)
        self.controllers = TestControllers(self.api, self.jobset_crd)
        self.kubelet = TestKubelet(self.api, self.pod_root, self.work_dir)
        self.emulator.pod_address = self.kubelet.pod_address
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                jobsets = self.api.list("jobsets") if self.jobset_crd else []
                jobs = self.api.list("jobs")
                pods = self.api.list("pods")
                writes = self.api.writes
                self.controllers.reconcile(jobsets, jobs, pods)
                if self.api.writes != writes:  # the kubelet sees the pods the controllers made or deleted
                    pods = self.api.list("pods")
                self.kubelet.sync(pods, jobs)
            except Exception as exc:  # kept for the test to see; the loop goes on
                self.errors.append(repr(exc))
            self._stop.wait(0.1)

    def settings(self, **extra: Any) -> dict[str, Any]:
        """The distrun compute target's settings for this cluster."""
        return {
            "kubeconfig": str(self.kubeconfig),
            "context": "emulator",
            "namespace": self.namespace,
            "work_dir": str(self.work_dir),
            "python": str(self.image_python),
            **extra,
        }

    def pods(self) -> list[dict[str, Any]]:
        return self.api.list("pods")

    def live_pods(self) -> list[str]:
        """The names of the pods still Pending or Running."""
        live = ("Pending", "Running")
        return [p["metadata"]["name"] for p in self.pods() if (p.get("status") or {}).get("phase") in live]

    def stop(self) -> list[str]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        left = self.kubelet.stop() if hasattr(self, "kubelet") else []
        self.emulator.stop()
        return left
