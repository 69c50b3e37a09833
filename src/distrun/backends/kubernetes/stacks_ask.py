"""`distrun job stacks` on Kubernetes: node 0's pod agent asked through the API server's pod proxy.

The pods share no folder with this machine, so the request cannot be a file here. Node 0's agent
serves the job's exchange (`pod_exchange`), which already relays stack requests and answers
between the pods; the client POSTs `/stacks` to it through `pods/<pod>:<port>/proxy` (plain
API access: the account needs `create` on `pods/proxy` in the namespace, nothing else) with the
job's token, read from the job's Secret, and gets every node's answer in one reply.
"""

from __future__ import annotations

import base64
from typing import Any

from distrun.backends.kubernetes.client import KubernetesClient
from distrun.backends.kubernetes.manifests import CONTAINER, TOKEN_KEY, labels, secret_name
from distrun.backends.kubernetes.pod_exchange import STACKS_PATH, TOKEN_HEADER
from distrun.backends.kubernetes.pods import PodLayout
from distrun.backends.kubernetes.state import pod_view
from distrun.core.errors import DistrunError

EXCHANGE_PORT_ENV = "DISTRUN_K8S_EXCHANGE_PORT"
PROXY_MARGIN = 10.0  # seconds beyond the agents' own wait: the API server's and the pod's hops


def node0_pod(layout: PodLayout, pods: list[dict[str, Any]]) -> tuple[str, int] | None:
    """(name, exchange port) of the running pod of plan node 0, as the pods' specs say; None when none runs."""
    first = {role.name: role.first_node for role in layout.roles}
    for pod in pods:
        view = pod_view(pod)
        if view.phase != "Running" or view.deleting or first.get(view.role, -1) + view.index != 0:
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            if container.get("name") != CONTAINER:
                continue
            for item in container.get("env") or []:
                if item.get("name") == EXCHANGE_PORT_ENV and str(item.get("value", "")).isdigit():
                    return view.name, int(item["value"])
    return None


def secret_token(secret: dict[str, Any] | None) -> str | None:
    """The token of the job's Secret (`data`, base64, as the API server keeps it; or `stringData`)."""
    if secret is None:
        return None
    value = (secret.get("data") or {}).get(TOKEN_KEY)
    if isinstance(value, str):
        try:
            return base64.b64decode(value).decode()
        except ValueError:
            return None
    value = (secret.get("stringData") or {}).get(TOKEN_KEY)
    return value if isinstance(value, str) else None


def ask_pods(
    client: KubernetesClient, layout: PodLayout, job_name: str, native: bool, wait: float
) -> tuple[list[dict[str, Any]], list[int]]:
    """Every node's answer through node 0's agent: (processes as dicts, nodes that did not answer)."""
    found = node0_pod(layout, client.list("Pod", labels(layout)))
    if found is None:
        raise DistrunError(
            f"job {job_name}: the pod of node 0 is not running, or was submitted without the pods' exchange",
            "ask again once every pod runs (a job submitted by an earlier distrun cannot be asked)",
        )
    token = secret_token(client.get("Secret", secret_name(layout)))
    if not token:
        raise DistrunError(
            f"job {job_name}: its Secret {secret_name(layout)} is gone or has no token",
            "the job's objects were changed by hand; `kubectl get secret` shows what is left",
        )
    pod, port = found
    # Node 0's agent waits `wait` for the other pods' answers itself: the reply comes after that.
    reply = client.pod_proxy_post(
        pod, port, STACKS_PATH, {"native": native}, {TOKEN_HEADER: token}, wait + PROXY_MARGIN
    )
    if not isinstance(reply, dict) or not isinstance(reply.get("processes"), list):
        raise DistrunError(f"job {job_name}: node 0's pod answered with something that is not a stacks answer")
    missing = [n for n in reply.get("missing_nodes") or [] if isinstance(n, int)]
    return [p for p in reply["processes"] if isinstance(p, dict)], missing
