"""Turn pydantic's validation errors into distrun `Problem`s a user can act on.

pydantic reports a location inside its own schema (union branches, tags, validator names);
we map that back onto the document's key path, look up where the key was written, and say in
plain words what was expected and how to fix it. The wording here is what users see: keep it
stable.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import pydantic

from distrun.core.errors import Problem
from distrun.spec import models, pipeline_models
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

# A model refused a document: pydantic's ValidationError, what `translate` takes. Named apart from
# distrun's own ValidationError (the problems said to the user), which the loaders raise and catch too.
ModelError = pydantic.ValidationError

# Custom error types raised by validators in `models`, whose ctx names the offending key.
KEY_NAMING_ERRORS = ("io_name",)

# What to add when a required key is missing, by the key's name.
_MISSING_HINTS = {
    "command": "add `command:` with the shell command each process runs, e.g. `command: python train.py`",
    "path": "add `path:` with a local file or folder (relative paths start at the job file's folder)",
}

# How to write a value of the right shape, by the key that holds it.
_SHAPE_HINTS = {
    "command": "write the command as one string; a long one can be folded over lines with `command: >-`",
    "distribution": "write `distribution:` with `type: pytorch` (or tensorflow, mpi, ray) indented under it",
    "resources": "write `resources:` with keys such as `instance_count: 2` indented under it",
    "limits": "write `limits:` with `timeout: 3600` (seconds) indented under it",
    "environment": "write a reference such as `azureml:NAME@latest`, or `image:` indented under `environment:`",
    "environment_variables": "write one `NAME: value` per line, indented under `environment_variables:`",
    "inputs": "write one `NAME: value` per input, indented under `inputs:`",
    "outputs": "write one `NAME:` per output, indented under `outputs:`",
    "tags": "write one `name: value` per tag, indented under `tags:`",
    "compute": "write `compute: local` or `compute: azureml:NAME`",
}


# Frameworks users name as a distribution type, though they run under one of ours.
LAUNCHER_NOTE = {
    "horovod": "; Horovod jobs use type: mpi",
    "deepspeed": "; DeepSpeed jobs use type: pytorch (or mpi)",
    "torchrun": "; for torchrun use type: pytorch with process_count_per_instance: 1",
}


class _MappingOf:
    """A field that maps names of the user's choosing to one model (a component's `inputs`)."""

    def __init__(self, item: Any) -> None:
        self.item = item


def fields_at(path: KeyPath, data: Any, root: type[models.StrictModel] = models.JobSpec) -> list[str]:
    """The keys the model allows at `path` (for 'did you mean'); `root` is the document's model."""
    model: Any = root
    node = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
        job_like = model in (models.JobSpec, pipeline_models.PipelineJob)
        if job_like and part == "distribution":
            kind = str(node.get("type", "")).lower() if isinstance(node, dict) else ""
            model = models.DISTRIBUTION_MODELS.get(kind)
        elif job_like and part in ("inputs", "outputs"):
            model = part
        elif model == "inputs":
            model = models.LiteralInput if models._input_kind(node) == "literal_object" else models.DataInput
        elif model == "outputs":
            model = models.OutputSpec
        elif isinstance(model, _MappingOf):
            model = model.item
        elif isinstance(model, type) and issubclass(model, models.StrictModel):
            field = model.model_fields.get(str(part))
            model = _model_of(field.annotation) if field else None
            if field and typing.get_origin(field.annotation) is dict and model is not None:
                model = _MappingOf(model)
        else:
            model = None
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, models.StrictModel):
        return [f.alias or name for name, f in model.model_fields.items()]
    return []


def _model_of(annotation: Any) -> Any:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, models.StrictModel):
            return candidate
    return None


def _data_path(err: dict[str, Any], data: Any) -> KeyPath:
    """The document key path of an error: drop the union tags and branch names pydantic adds."""
    loc = tuple(err["loc"])
    kind = err["type"]
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif last and kind in ("missing", "extra_forbidden"):
            path.append(part)
        # else: a union tag such as 'pytorch', 'data', 'str' or 'function-after[...]'
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        path.append("type")  # the discriminator is the key at fault, present or not
    if kind in KEY_NAMING_ERRORS:
        path.append(str((err.get("ctx") or {}).get("name", "")))
    return tuple(path)


def _shown(value: Any) -> str:
    """A value as an error message quotes it: short, and its kind when it is a container."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _choices(expected: str) -> list[str]:
    """pydantic's "'a', 'b' or 'c'" as a list."""
    return re.findall(r"'([^']*)'", expected)


def _did_you_mean(got: Any, choices: list[str]) -> str:
    if not isinstance(got, str):
        return ""
    import difflib  # error paths only: not loaded by a valid job's run

    close = difflib.get_close_matches(got.lower(), choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def _number(limit: Any) -> str:
    return f"{limit:g}" if isinstance(limit, float) else str(limit)


def describe(err: dict[str, Any], path: KeyPath) -> tuple[str, str]:
    """(what is wrong, how to fix it) for one pydantic error at `path`."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    shown = _shown(got)
    last = str(path[-1]) if path else ""
    if kind == "missing":
        return f"`{last}` is required", _MISSING_HINTS.get(last, f"add `{last}:`")
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {shown}", "write a whole number such as 2, without quotes"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number, got {shown}", "write a number such as 3600, without quotes"
    if kind == "finite_number":
        return f"expected a finite number, got {shown}", "write a number such as 3600 (not .inf or .nan)"
    if kind == "string_type":
        return f"expected a string, got {shown}", _SHAPE_HINTS.get(last, "write text, quoted if it looks like a number")
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {shown}", "write true or false"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping (key: value), got {shown}", _SHAPE_HINTS.get(
            last, f"write the keys of `{last}` indented under it, one `key: value` per line"
        )
    if kind == "list_type":
        return f"expected a list, got {shown}", "write [a, b] or one '- item' per line"
    if kind == "literal_error":
        choices = _choices(str(ctx.get("expected", "")))
        listed = ", ".join(choices)
        if len(choices) == 1:
            return f"expected {choices[0]!r}, got {shown}", f"write {last}: {choices[0]}, or leave `{last}` out"
        return f"expected one of {listed}; got {shown}", f"{_did_you_mean(got, choices)}use one of {listed}"
    if kind in ("greater_than_equal", "greater_than"):
        limit = _number(ctx.get("ge", ctx.get("gt")))
        rel = "at least" if kind == "greater_than_equal" else "more than"
        return f"must be {rel} {limit}, got {shown}", f"use a value {rel} {limit}"
    if kind in ("less_than_equal", "less_than"):
        limit = _number(ctx.get("le", ctx.get("lt")))
        rel = "at most" if kind == "less_than_equal" else "less than"
        return f"must be {rel} {limit}, got {shown}", f"use a value {rel} {limit}"
    if kind == "string_pattern_mismatch":
        return f"{shown} is not in the allowed form {ctx.get('pattern')}", "write a value of that form"
    if kind == "string_too_short":
        return f"`{last}` must not be empty", f"give `{last}` a value"
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        listed = ", ".join(models.DISTRIBUTION_TYPES)
        hint = f"{_did_you_mean(tag, list(models.DISTRIBUTION_TYPES))}use one of {listed} (any letter case)"
        return f"unknown distribution type {tag!r}", hint + LAUNCHER_NOTE.get(str(tag).lower(), "")
    if kind == "union_tag_not_found":
        listed = ", ".join(models.DISTRIBUTION_TYPES)
        return "`distribution` has no `type`", f"add `type:` with one of {listed}"
    if kind == "input_shape":
        return (
            f"{err['msg']}, got {shown}",
            "write e.g. `epochs: 3`, or `data: {type: uri_folder, path: ./data}`",
        )
    if kind in KEY_NAMING_ERRORS or kind in models.CUSTOM_ERRORS:
        return err["msg"], models.CUSTOM_ERRORS.get(kind, "")
    message = str(err["msg"]).removeprefix("Value error, ")
    return message, ""


def _type_names(errs: list[dict[str, Any]]) -> list[str]:
    names = {"dict": "mapping", "model": "mapping", "model_attributes": "mapping", "int": "whole number"}
    return sorted({names.get(e["type"].removesuffix("_type"), e["type"].removesuffix("_type")) for e in errs})


def _closest(word: str, allowed: list[str]) -> str | None:
    """The allowed key most like `word` (by its own similarity, not difflib's ordering, which
    put 'max_preemptions' before 'max_restarts' for 'max_retries'), if any is close."""
    import difflib  # error paths only: not loaded by a valid job's run

    scored = [(difflib.SequenceMatcher(None, word, key).ratio(), key) for key in allowed]
    best = max(scored, default=(0.0, ""))
    return best[1] if best[0] >= 0.6 else None


def _other_branch_went_deeper(
    path: KeyPath, errs: list[dict[str, Any]], by_path: dict[KeyPath, list[dict[str, Any]]]
) -> bool:
    """A union's wrong-shape complaint (`environment`: not a string) when another branch took the
    mapping and found what is wrong inside it (`environment.version`): only the inner one is said."""
    if not all(e["type"].endswith("_type") and isinstance(e.get("input"), (dict, list)) for e in errs):
        return False
    return any(len(other) > len(path) and other[: len(path)] == path for other in by_path)


def translate(exc: Any, data: Any, smap: SourceMap, root: type[models.StrictModel] = models.JobSpec) -> list[Problem]:
    """One `Problem` per document key pydantic found wrong (a key's several union errors are one)."""
    by_path: dict[KeyPath, list[dict[str, Any]]] = {}
    for err in exc.errors():
        by_path.setdefault(_data_path(err, data), []).append(err)
    problems = []
    for path, errs in by_path.items():
        if _other_branch_went_deeper(path, errs, by_path):
            continue
        key = format_key_path(path)
        where = smap.find(path)
        if any(e["type"] == "extra_forbidden" for e in errs):
            allowed = fields_at(path[:-1], data, root)
            close = _closest(str(path[-1]), allowed)
            if close:
                hint = f"did you mean {close!r}?"
            elif allowed:
                hint = f"remove it; allowed keys here: {', '.join(allowed)}"
            else:
                hint = "remove it"
            problems.append(Problem(f"unknown key {str(path[-1])!r}", key, where, hint))
            continue
        if len(errs) > 1 and all(e["type"].endswith("_type") for e in errs):
            kinds = _type_names(errs)
            last = str(path[-1]) if path else ""
            hint = _SHAPE_HINTS.get(last, f"write `{last}` as a {' or a '.join(kinds)}")
            shown = _shown(errs[0].get("input"))
            problems.append(Problem(f"expected a {' or a '.join(kinds)}, got {shown}", key, where, hint))
            continue
        message, hint = describe(errs[0], path)
        problems.append(Problem(message, key, where, hint))
    return problems
