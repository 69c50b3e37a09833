"""`--set a.b.c=value` overrides, applied to the raw document before validation.

As in `az ml`, the key is split from the value at the first `=`. The value is typed as a
YAML scalar (`3` is an int, `true` a bool, `"3"` a string, `null` nothing); a flow list or
mapping (`[1, 2]`, `{a: 1}`) is taken as one. Anything else stays the text as typed, so
`--set command=echo a: b` or `--set inputs.tag=#1` mean what they say.

Every position at or under an overridden key points at the override, so a later error
names the `--set` that caused it.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from distrun.core.errors import Position, Problem, ValidationError
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

_KEY_PART = re.compile(r"[A-Za-z_$][A-Za-z0-9_\-$]*|[0-9]+")
_NULLS = ("null", "Null", "NULL", "~")
_KEY_HINT = "write --set KEY.PATH=VALUE with dotted keys such as resources.instance_count=2 (list items by number)"


def override_position(text: str) -> Position:
    return Position(f"--set {text}")


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`inputs.epochs=3` -> (("inputs", "epochs"), 3); raises ValidationError when malformed."""
    where = override_position(text)
    if "=" not in text:
        raise ValidationError([Problem(f"override {text!r} has no '='", "", where, _KEY_HINT)])
    key, raw = text.split("=", 1)
    key = key.strip()
    parts = key.split(".")
    if not key:
        raise ValidationError([Problem(f"override {text!r} has no key before '='", "", where, _KEY_HINT)])
    bad = [part for part in parts if not _KEY_PART.fullmatch(part)]
    if bad:
        what = "an empty part" if bad[0] == "" else f"the part {bad[0]!r}"
        raise ValidationError([Problem(f"override key {key!r} is not a key path: it has {what}", "", where, _KEY_HINT)])
    path: KeyPath = tuple(int(p) if p.isdecimal() and p.isascii() else p for p in parts)
    return path, _typed_value(raw, where)


def _typed_value(raw: str, where: Position) -> Any:
    from distrun.spec.yaml_source import parse_yaml_text

    text = raw.strip()
    if text == "":
        return ""
    try:
        value, _ = parse_yaml_text(raw, where.source)
    except ValidationError:
        return raw  # not YAML: keep the text as it was typed
    if isinstance(value, dict) and not text.startswith("{"):
        return raw  # `echo a: b` is a command, not a mapping
    if isinstance(value, list) and not text.startswith("["):
        return raw  # `- x` is text, not a block list
    if value is None and text not in _NULLS:
        return raw  # `#1` is text, not a YAML comment
    return value


def _refuse(text: str, message: str, at: KeyPath, hint: str) -> ValidationError:
    return ValidationError([Problem(message, format_key_path(at), override_position(text), hint)])


def apply_overrides(data: Any, smap: SourceMap, overrides: list[str]) -> Any:
    """Apply each override in order to a copy of `data`; positions of overridden keys point at the override."""
    if not overrides:
        return data
    data = {} if data is None else copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        where = override_position(text)
        key = text.split("=", 1)[0].strip()
        node = data
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            if isinstance(node, list):
                if not isinstance(part, int):
                    raise _refuse(
                        text,
                        f"cannot set {key}: {format_key_path(path[:depth]) or 'the document'} is a list",
                        path[:depth],
                        "address list items by number, e.g. resources.locations.0=westus",
                    )
                if part >= len(node):
                    raise _refuse(
                        text,
                        f"cannot set {key}: item {part} is past the end of the list ({len(node)} items)",
                        path[:depth],
                        f"use an index below {len(node)}, or set the whole list, e.g. {key.rsplit('.', 1)[0]}=[a, b]",
                    )
            elif not isinstance(node, dict):
                raise _refuse(
                    text,
                    f"cannot set {key}: {format_key_path(path[:depth]) or 'the document'} is not a mapping",
                    path[:depth],
                    "override a key inside a mapping, or set the parent key itself",
                )
            else:
                part = str(part)  # a number names a mapping key as text
            if last:
                node[part] = value
                break
            child = node[part] if isinstance(node, list) else node.get(part)
            if child is None:
                child = {}
                node[part] = child
            elif not isinstance(child, (dict, list)):
                here = format_key_path(path[: depth + 1])
                raise _refuse(
                    text,
                    f"cannot set {key}: {here} is {_kind(child)}, not a mapping",
                    path[: depth + 1],
                    f"set {here} itself, or change it into a mapping in the job file",
                )
            node = child
        full = _document_path(path, data)
        for known in [p for p in smap.positions if p[: len(full)] == full]:
            del smap.positions[known]
        smap.set(full, where)
        for depth in range(1, len(full)):
            if full[:depth] not in smap.positions:  # keys the override created
                smap.set(full[:depth], where)
    return data


def _document_path(path: KeyPath, data: Any) -> KeyPath:
    """The override's path as the document spells it: numbers are mapping keys unless they index a list."""
    out: list[str | int] = []
    node = data
    for part in path:
        if isinstance(node, list) and isinstance(part, int):
            out.append(part)
            node = node[part] if part < len(node) else None
        else:
            out.append(str(part))
            node = node.get(str(part)) if isinstance(node, dict) else None
    return tuple(out)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a value"


def overridden_mapping(
    data: Any, smap: SourceMap, overrides: list[str] | tuple[str, ...], what: str, keys: str
) -> dict[str, Any]:
    """A document of top-level keys (a pipeline, a sweep) with its `--set` overrides applied;
    anything else is a problem: `what` it must be, with the `keys` it starts with."""
    data = apply_overrides(data, smap, list(overrides))
    if not isinstance(data, dict):
        raise ValidationError(
            [Problem(f"{what} is a mapping of keys ({keys}, ...)", "", smap.find(()), f"start the file with {keys}")]
        )
    return data
