"""Step reuse, as Azure ML does it: the key of what a step computes, and whether it may be reused.

A step's key is a digest of everything that decides its outputs: its command job document (the
component's command, declared inputs and outputs, environment, distribution, resources,
environment variables, the literal values of its inputs) with every local file or folder it names
(its data inputs, an upstream step's output, its code folder, its conda file or image build
folder) replaced by the digest of that path's content. What only describes or places the step
(its name, display name, description, tags, properties, experiment, compute target) is left out:
the same work on another target or under another name is the same work.

A sweep step's key is the same digest over its sweep job document (search space, sampling
algorithm with its seed or rule, objective, early termination, limits, inputs, outputs) with its
`trial` label replaced by the trial component itself (`sweep_key_document`), whose code folder and
conda file count by content as a command step's do: the same search over the same trial and data
is the same work, and its best trial's outputs are the step's.

Pure: the caller reads the files (`distrun.core.content_hash`) and gives their digests by key path.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

KEY_VERSION = "distrun-step-reuse-1"  # changes when what the key covers changes: old keys then never match
# A step's keys that do not change what it computes.
NOT_IN_KEY = ("name", "display_name", "description", "tags", "properties", "experiment_name", "compute")
# A trial component's keys that do not change what its trials compute.
NOT_IN_TRIAL_KEY = (*NOT_IN_KEY, "$schema", "version")
TRIAL = "trial"  # a sweep step's key holds its trial component here
# Where a step's document names a local path that is hashed by content (inputs.NAME.path are the
# rest); a sweep step's trial component names them under `trial` (relative to its own folder).
COMMAND_PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("code",),
    ("environment", "conda_file"),
    ("environment", "build", "path"),
)
PATH_KEYS = COMMAND_PATH_KEYS + tuple((TRIAL, *key_path) for key_path in COMMAND_PATH_KEYS)

KeyPath = tuple[str, ...]


def hashed_paths(document: Mapping[str, Any]) -> dict[KeyPath, str]:
    """The local paths (as written) the key hashes by content: key path -> the path's text."""
    found: dict[KeyPath, str] = {}
    for key_path in PATH_KEYS:
        value: Any = document
        for part in key_path:
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, str):
            found[key_path] = value
    for name, value in (document.get("inputs") or {}).items():
        if isinstance(value, Mapping) and isinstance(value.get("path"), str):
            found[("inputs", str(name), "path")] = value["path"]
    return found


def sweep_key_document(document: Mapping[str, Any], trial: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep step's document as its key covers it: its `trial` label (a file, `azureml:NAME:V`)
    replaced by the trial component's own document, less what only names or describes it."""
    component = {key: value for key, value in trial.items() if key not in NOT_IN_TRIAL_KEY}
    return {**document, TRIAL: component}


def reuse_key(document: Mapping[str, Any], digests: Mapping[KeyPath, str]) -> str:
    """The key of a step's job `document`, its paths at `digests` (key path -> content digest)
    replaced by their digests; a path without a digest (a URL) counts by its text."""
    keyed = {key: copy.deepcopy(value) for key, value in document.items() if key not in NOT_IN_KEY}
    for key_path, digest in digests.items():
        holder: Any = keyed
        for part in key_path[:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and key_path[-1] in holder:
            holder[key_path[-1]] = {"content_sha256": digest}
    text = json.dumps([KEY_VERSION, keyed], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def why_not_reused(is_deterministic: bool, pipeline_force_rerun: bool, step_force_rerun: bool) -> str | None:
    """Why a step runs even when a completed run with its key exists; None: it may be reused."""
    if not is_deterministic:
        return "its component says is_deterministic: false"
    if pipeline_force_rerun:
        return "the pipeline's settings.force_rerun is true"
    if step_force_rerun:
        return "the step's force_rerun is true"
    return None
