"""The Kubernetes API as distrun uses it, through the official `kubernetes` Python client.

Objects stay plain dicts end to end (rendered dicts go in, API dicts come out): the REST
paths are called through the client's ApiClient, with its configuration, authentication
and TLS, so any object kind (JobSet included) takes the same road.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.core.errors import DistrunError

INSTALL_HINT = "install the Kubernetes extra: pip install 'distrun[kubernetes]'"
JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
REQUEST_TIMEOUT = (10, 30)


class KubernetesApiError(DistrunError):
    def __init__(self, status: int, message: str, hint: str = "") -> None:
        super().__init__(message, hint)
        self.status = status


def _kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise DistrunError("the Kubernetes backend needs the `kubernetes` Python package", INSTALL_HINT) from None
    return kubernetes


def api_client(target: KubernetesSettings) -> Any:
    """A configured ApiClient: the target's kubeconfig/context, else the default one, else in-cluster."""
    k8s = _kubernetes()
    from kubernetes.config.config_exception import ConfigException

    config_file = target.kubeconfig
    try:
        if config_file or target.context or Path(k8s.config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser().exists():
            return k8s.config.new_client_from_config(config_file=config_file, context=target.context)
        configuration = k8s.client.Configuration()
        k8s.config.load_incluster_config(client_configuration=configuration)
        return k8s.client.ApiClient(configuration)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        where = config_file or "$KUBECONFIG / ~/.kube/config"
        raise DistrunError(
            f"compute target {target.name!r}: cannot load the Kubernetes configuration ({where}"
            + (f", context {target.context}" if target.context else "")
            + f"): {exc}",
            "check the target's kubeconfig and context settings (kubectl config get-contexts lists contexts)",
        ) from None


def _plural(kind: str) -> str:
    return {
        "ConfigMap": "configmaps",
        "Secret": "secrets",
        "Service": "services",
        "Job": "jobs",
        "JobSet": "jobsets",
        "Pod": "pods",
    }[kind]


def collection_path(kind: str, namespace: str) -> str:
    if kind in ("ConfigMap", "Secret", "Service", "Pod"):
        return f"/api/v1/namespaces/{namespace}/{_plural(kind)}"
    if kind == "Job":
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{namespace}/jobsets"


class KubernetesClient:
    """One namespace of one cluster."""

    def __init__(self, target: KubernetesSettings, api: Any | None = None) -> None:
        self.target = target
        self.namespace = target.namespace
        self.api = api if api is not None else api_client(target)

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
    ) -> Any:
        k8s = _kubernetes()
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json, */*", **(headers or {})}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            _, url, header_params, serialized, _ = self.api.param_serialize(
                method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"]
            )
            response = self.api.call_api(
                method, url, header_params=header_params, body=serialized, _request_timeout=timeout
            )
            response.read()
            data = response.data
        except k8s.client.exceptions.ApiException as exc:
            raise self._error(exc.status or 0, exc.body or exc.reason or "", method, path) from None
        except Exception as exc:  # urllib3's connection errors: the cluster cannot be reached
            if isinstance(exc, DistrunError):
                raise
            raise KubernetesApiError(
                0,
                f"cannot reach the Kubernetes API of compute target {self.target.name!r}: {exc}",
                "check the cluster is up and the target's context (and that kubectl can reach it)",
            ) from None
        if response.status >= 400:
            raise self._error(response.status, data.decode("utf-8", "replace") if data else "", method, path)
        if path.endswith("/log"):
            return data or b""
        return json.loads(data) if data else {}

    def _error(self, status: int, body: Any, method: str, path: str) -> KubernetesApiError:
        message = str(body)
        try:
            message = json.loads(body).get("message") or message
        except (ValueError, AttributeError, TypeError):
            pass
        hint = {
            401: "the credentials in the kubeconfig were refused",
            403: "your account may not do this in the namespace",
        }.get(status, "")
        return KubernetesApiError(status, f"Kubernetes API {method} {path}: {status} {message[:500]}", hint)

    # ------------------------------------------------------------ what distrun asks

    def check(self) -> None:
        """Raise unless the namespace can be reached and its pods listed."""
        self._call("GET", collection_path("Pod", self.namespace), query={"limit": 1})

    def has_jobset(self) -> bool:
        try:
            found = self._call("GET", f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}")
        except KubernetesApiError as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == "jobsets" for r in found.get("resources", []))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", collection_path(obj["kind"], self.namespace), body=obj)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return self._call("GET", f"{collection_path(kind, self.namespace)}/{name}")
        except KubernetesApiError as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, kind: str, name: str) -> bool:
        """Delete one object and, first, everything it owns (foreground propagation)."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
        try:
            self._call("DELETE", f"{collection_path(kind, self.namespace)}/{name}", body=body)
        except KubernetesApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def remove_finalizer(self, pod: dict[str, Any], finalizer: str) -> bool:
        """Take `finalizer` off a pod as it was read (`pod`); False when the pod changed since or is gone.

        A merge patch with the read `resourceVersion`: the API server refuses it (409) when another
        writer changed the pod meanwhile, so no one else's finalizer is put back; the next look retries.
        """
        meta = pod.get("metadata") or {}
        kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
        patch: dict[str, Any] = {"metadata": {"finalizers": kept}}
        if meta.get("resourceVersion"):
            patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
        path = f"{collection_path('Pod', self.namespace)}/{meta.get('name', '')}"
        try:
            self._call("PATCH", path, body=patch, content_type="application/merge-patch+json")
        except KubernetesApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def list(self, kind: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        found = self._call("GET", collection_path(kind, self.namespace), query={"labelSelector": selector})
        items = found.get("items") or []
        # The selector again here: what comes back is only ever the job's own objects.
        return [
            i for i in items if all((i.get("metadata", {}).get("labels") or {}).get(k) == v for k, v in labels.items())
        ]

    def pod_log(self, name: str) -> bytes:
        try:
            return self._call("GET", f"{collection_path('Pod', self.namespace)}/{name}/log")
        except KubernetesApiError as exc:
            if exc.status in (400, 404):
                return b""  # the container has not started, or the pod is gone
            raise

    def pod_proxy_post(
        self, pod: str, port: int, path: str, body: dict[str, Any], headers: dict[str, str], wait: float
    ) -> Any:
        """POST to a pod's port through the API server's pod proxy (`pods/proxy`: what `kubectl
        proxy` uses); the pod's JSON answer. No exec, no port-forward, nothing else to reach."""
        where = f"{collection_path('Pod', self.namespace)}/{pod}:{port}/proxy{path}"
        return self._call("POST", where, body=body, headers=headers, timeout=(REQUEST_TIMEOUT[0], wait))
