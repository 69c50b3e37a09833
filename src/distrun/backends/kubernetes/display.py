"""A job's Kubernetes objects as `distrun plan` prints them: YAML documents, in the order they are created."""

from __future__ import annotations

import base64
import json
from typing import Any


def _bundle_summary(key: str, data: str) -> dict[str, Any]:
    """The ConfigMap's bundle as sizes and a file list: the text plan stays readable (the data is
    up to 1 MiB of base64), and `--output yaml` or `json` still prints every byte that is submitted."""
    import io
    import zipfile

    from distrun.backends.kubernetes.bundle import listing
    from distrun.backends.kubernetes.pod_contract import AGENT_ZIP_KEY

    raw = base64.b64decode(data)
    if key == AGENT_ZIP_KEY:
        count = len(zipfile.ZipFile(io.BytesIO(raw)).namelist())
        return {
            "summary": f"{len(data)} base64 characters: a zip of {len(raw)} bytes, the {count - 1} distrun "
            "modules each pod runs its agent from (the image needs no distrun)"
        }
    return {
        "summary": f"{len(data)} base64 characters: a gzipped tar of {len(raw)} bytes (--output yaml prints it)",
        "files": listing(raw),
    }


TOKEN_SHOWN = "(random, made anew at each submission)"


def shown_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with the Secret's token masked: a plan is printed and shared, the token guards the
    running job's pods (node 0's exchange, MPI's remote starts); each submission makes its own."""
    return [
        {**obj, "stringData": dict.fromkeys(obj.get("stringData") or {}, TOKEN_SHOWN)}
        if obj.get("kind") == "Secret"
        else obj
        for obj in objects
    ]


def objects_yaml(objects: list[dict[str, Any]], abbreviate: bool = False) -> str:
    from io import StringIO

    from ruamel.yaml import YAML

    shown = objects
    if abbreviate:
        shown = []
        for obj in objects:
            if obj.get("binaryData"):
                obj = {**obj, "binaryData": {k: _bundle_summary(k, v) for k, v in obj["binaryData"].items()}}
            shown.append(obj)
    yaml = YAML()
    yaml.default_flow_style = False
    buffer = StringIO()
    yaml.dump_all(json.loads(json.dumps(shown)), buffer)
    return buffer.getvalue()
