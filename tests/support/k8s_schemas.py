"""Offline schema checks for rendered Kubernetes objects (test helper).

Core kinds (ConfigMap, Service, Job) go through kubernetes-validate in strict mode (unknown
fields are errors) against a recent Kubernetes version's official schemas. A JobSet is checked
against the JobSet CRD's openAPIV3Schema with jsonschema, after the schema's defaults are
applied (as the API server does) and with unknown fields refused (as strict field validation
does); its Job templates are also checked as core Jobs, strictly. CEL rules
(x-kubernetes-validations) are not evaluated this way.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "1.32.0"
CRD = Path(__file__).resolve().parents[1] / "data" / "k8s" / "jobset.x-k8s.io_jobsets.yaml"


@functools.lru_cache(maxsize=1)
def jobset_schema() -> dict[str, Any]:
    from ruamel.yaml import YAML

    crd = YAML(typ="safe").load(CRD.read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    return strict_schema(version["schema"]["openAPIV3Schema"])


def strict_schema(schema: Any) -> Any:
    """Objects with declared properties refuse others, unless the schema preserves unknown fields."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The schema's `default`s filled in where the value lacks them, depth first."""
    if isinstance(value, dict) and schema.get("type") == "object":
        value = dict(value)
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(value[key], sub)
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


def validate_jobset(obj: dict[str, Any]) -> None:
    import jsonschema

    schema = jobset_schema()
    jsonschema.validate(apply_defaults(obj, schema), schema)
    for rj in obj["spec"]["replicatedJobs"]:
        validate_core(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{obj['metadata']['name']}-{rj['name']}-0", **rj["template"].get("metadata", {})},
                "spec": rj["template"]["spec"],
            }
        )


def validate_core(obj: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def validate_object(obj: dict[str, Any]) -> None:
    if obj["kind"] == "JobSet":
        validate_jobset(obj)
    else:
        validate_core(obj)
