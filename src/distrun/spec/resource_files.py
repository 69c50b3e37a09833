"""Azure ML's YAML files for resources other than jobs, as `az ml data create -f` and
`az ml compute create -f` read them: a mapping, `--set KEY=VALUE` applied first, then every key
checked against what distrun knows, each problem with its file:line and a hint.

    data.yml       $schema, name, version, type, path, description, tags, properties
    compute.yml    $schema, name, type, description, the target's settings; Azure ML's
                   sizing and network keys (size, min_instances, ...) are dropped and named
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.spec.overrides import apply_overrides
from distrun.spec.yaml_source import read_yaml_file

DATA_KEYS = ("name", "version", "type", "path", "description")
DATA_IGNORED = ("$schema", "tags", "properties")
COMPUTE_IGNORED = ("$schema", "description", "tags")
# What Azure ML's compute files size or wire up in Azure; a distrun target has its own settings.
AZURE_COMPUTE_KEYS = (
    "size",
    "min_instances",
    "max_instances",
    "idle_time_before_scale_down",
    "tier",
    "location",
    "identity",
    "ssh_public_access_enabled",
    "ssh_settings",
    "network_settings",
    "enable_node_public_ip",
    "resource_id",
)
# Azure ML's cluster type: a file of this type names a local target (its jobs run on this machine,
# each node simulated), as the SDK's AmlCompute(...) does.
AZURE_CLUSTER_TYPE = "amlcompute"
# Azure ML's other compute types, which only Azure runs.
AZURE_COMPUTE_TYPES = ("computeinstance", "virtualmachine", "synapsespark", "attachedcompute")


@dataclass(frozen=True)
class ResourceFile:
    """A resource file's keys after `--set`, the folder its relative paths start at, and its notes."""

    values: dict[str, Any]
    base_dir: Path
    notes: tuple[str, ...] = ()


def _read(path: Path, overrides: list[str], what: str, example: str) -> tuple[dict[str, Any], Any]:
    data, smap = read_yaml_file(path)
    data = apply_overrides(data, smap, overrides)
    if not isinstance(data, dict):
        raise ValidationError([Problem(f"a {what} file is a mapping of keys", "", smap.find(()), f"e.g. {example}")])
    return data, smap


def _key_problems(
    data: dict[str, Any], smap: Any, what: str, known: tuple[str, ...], ignored: tuple[str, ...], left_out: str
) -> list[Problem]:
    """A resource file's unknown keys and its missing `name` and `path` (data assets, models)."""
    problems = [
        Problem(
            f"{key}: unknown key of {what}",
            str(key),
            smap.find((key,)),
            f"{what} file has {', '.join(known)} (and {', '.join(ignored)}, which distrun {left_out})",
        )
        for key in data
        if key not in known and key not in ignored
    ]
    for key in ("name", "path"):
        if data.get(key) in (None, ""):
            problems.append(
                Problem(f"{key}: missing", key, smap.find(()), f"add `{key}:` to the file, or give --set {key}=...")
            )
    return problems


def read_data_file(path: Path, overrides: list[str]) -> ResourceFile:
    """A data asset's YAML; `path` in it is relative to the file's folder, as in `az ml`."""
    data, smap = _read(path, overrides, "data asset", "name: cifar10, version: 1, type: uri_folder, path: ./data")
    problems = _key_problems(data, smap, "a data asset", DATA_KEYS, DATA_IGNORED, "keeps out")
    if problems:
        raise ValidationError(problems)
    values = {key: data[key] for key in DATA_KEYS if data.get(key) is not None}
    return ResourceFile({k: str(v) for k, v in values.items()}, path.parent.absolute())


def read_compute_file(path: Path, overrides: list[str]) -> ResourceFile:
    """A compute target's YAML: name, type and the target's settings (checked by its backend later)."""
    data, smap = _read(path, overrides, "compute", "name: hpc, type: slurm, partition: debug")
    kind = str(data.get("type") or "").lower()
    problems = []
    if not data.get("name"):
        problems.append(Problem("name: missing", "name", smap.find(()), "add `name:` to the file, or --set name=..."))
    if kind in AZURE_COMPUTE_TYPES:
        problems.append(
            Problem(
                f"type: {data['type']} is Azure ML's own compute, which only Azure runs",
                "type",
                smap.find(("type",)),
                "jobs run on local compute without a target (`--compute local`); for a cluster give "
                "type slurm, ray or kubernetes with its settings, e.g. --set type=slurm --set partition=debug",
            )
        )
    if problems:
        raise ValidationError(problems)
    dropped = [key for key in data if key in AZURE_COMPUTE_KEYS]
    settings = {k: v for k, v in data.items() if k not in ("name", "type", *COMPUTE_IGNORED, *AZURE_COMPUTE_KEYS)}
    notes = (f"{path}: {', '.join(dropped)} size Azure ML's clusters; not used by distrun",) if dropped else ()
    return ResourceFile({"name": str(data["name"]), "type": kind, "settings": settings}, path.parent.absolute(), notes)


MODEL_KEYS = ("name", "version", "type", "path", "description", "tags", "properties")
MODEL_IGNORED = ("$schema", "stage", "flavors", "datastore", "job_name", "intellectual_property")
MODEL_TYPES = ("custom_model", "mlflow_model", "triton_model")


def read_model_file(path: Path, overrides: list[str]) -> ResourceFile:
    """A model's YAML (Azure ML's model schema); its `path` is relative to the file's folder."""
    data, smap = _read(path, overrides, "model", "name: my-model, version: 1, type: mlflow_model, path: ./model")
    problems = _key_problems(data, smap, "a model", MODEL_KEYS, MODEL_IGNORED, "leaves out")
    if data.get("type") is not None and data["type"] not in MODEL_TYPES:
        problems.append(
            Problem(
                f"type: {data['type']!r} is not a model type",
                "type",
                smap.find(("type",)),
                f"use one of {', '.join(MODEL_TYPES)}",
            )
        )
    for key in ("tags", "properties"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            problems.append(
                Problem(f"{key}: not a mapping", key, smap.find((key,)), f"write {key}: as KEY: VALUE lines")
            )
    if problems:
        raise ValidationError(problems)
    values: dict[str, Any] = {key: str(data[key]) for key in MODEL_KEYS[:5] if data.get(key) is not None}
    for key in ("tags", "properties"):
        values[key] = {str(k): str(v) for k, v in (data.get(key) or {}).items()}
    notes = tuple(f"{path}: {key} is left out by distrun" for key in data if key in MODEL_IGNORED[1:])
    return ResourceFile(values, path.parent.absolute(), notes)
