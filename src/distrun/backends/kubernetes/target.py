"""A Kubernetes compute target's settings.

Written in `$DISTRUN_HOME/config.yaml` or with `distrun compute create --type kubernetes --set
K=V`. Every mistake is reported in distrun's words with the known keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class KubernetesSettings(BaseModel):
    """Where and how distrun's jobs are submitted to a Kubernetes cluster."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "kubernetes"
    type: str = Field("kubernetes", pattern="^kubernetes$")
    context: str | None = Field(None, description="kubeconfig context (default: the current one, or in-cluster)")
    kubeconfig: str | None = Field(None, description="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    namespace: str = Field("default", pattern=DNS_LABEL, max_length=63)
    image: str | None = Field(None, description="image for jobs whose environment names none")
    service_account: str | None = Field(None, pattern=DNS_SUBDOMAIN, max_length=253)
    image_pull_secrets: list[str] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    priority_class: str | None = Field(None, pattern=DNS_SUBDOMAIN, max_length=253)
    queue: str | None = Field(None, description="Kueue LocalQueue (label kueue.x-k8s.io/queue-name)")
    jobset: str = Field("auto", pattern="^(auto|always|never)$", description="use JobSet when its CRD is installed")
    python: str = Field("python3", description="the image's Python (3.10 or newer; it needs no distrun)")
    code_in_image: str | None = Field(
        None, description="code folder already in the image (for code over the ConfigMap limit)"
    )
    work_dir: str = Field("/distrun", pattern=r"^/", description="folder in each pod for the job and its logs")
    stacks: bool = Field(
        False,
        description="give every pod SYS_PTRACE so that py-spy can read its processes' stacks "
        "(always so for a job with limits.hang_timeout)",
    )
    port_base: int = Field(
        29500, ge=1024, le=65000, description="MASTER_PORT and TensorFlow task ports count up from here"
    )

    @field_validator("image_pull_secrets", mode="before")
    @classmethod
    def _split_secrets(cls, value: Any) -> Any:
        return [v for v in value.split(",") if v] if isinstance(value, str) else value

    @field_validator("node_selector", "tolerations", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        # `--set node_selector='{"pool": "gpu"}'` arrives as text when it is not YAML already.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    @field_validator("tolerations", mode="before")
    @classmethod
    def _one_toleration(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> KubernetesSettings:
        from distrun.backends.settings import validated_settings

        return validated_settings(cls, "kubernetes", name, settings)
