"""`--set a.b.c=value` overrides, applied to the raw document before validation.

As in `az ml`, the key is split from the value at the first `=`; the value is typed as a
YAML scalar (`3` is an int, `true` a bool, `"3"` a string, `[1, 2]` a list).
"""

from __future__ import annotations

import re
from typing import Any

from distrun.errors import Position, Problem, ValidationError
from distrun.spec.source_map import KeyPath, SourceMap

_KEY_PART = re.compile(r"^[A-Za-z_$][A-Za-z0-9_\-$]*$|^\d+$")


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`inputs.epochs=3` -> (("inputs", "epochs"), 3); raises ValidationError when malformed."""
    where = Position(f"--set {text}")
    if "=" not in text:
        raise ValidationError(
            [
                Problem(
                    f"override {text!r} has no '='", "", where, "write --set KEY.PATH=VALUE, e.g. --set inputs.epochs=3"
                )
            ]
        )
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not key.strip() or not all(_KEY_PART.match(p) for p in parts):
        raise ValidationError(
            [
                Problem(
                    f"override key {key!r} is not a key path",
                    "",
                    where,
                    "use dotted keys such as resources.instance_count",
                )
            ]
        )
    path: KeyPath = tuple(int(p) if p.isdigit() else p for p in parts)
    return path, _scalar(raw, where)


def _scalar(raw: str, where: Position) -> Any:
    from distrun.spec.yaml_source import parse_yaml_text

    if raw.strip() == "":
        return ""
    try:
        value, _ = parse_yaml_text(raw, where.source)
    except ValidationError:
        return raw  # not YAML: keep the text as it was typed
    return value


def apply_overrides(data: Any, smap: SourceMap, overrides: list[str]) -> Any:
    """Apply each override in order; positions of overridden keys point at the override."""
    if not overrides:
        return data
    if data is None:
        data = {}
    for text in overrides:
        path, value = parse_override(text)
        where = Position(f"--set {text}")
        node = data
        for depth, part in enumerate(path[:-1]):
            if isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
                continue
            if not isinstance(node, dict):
                raise ValidationError(
                    [
                        Problem(
                            f"cannot set {text.split('=', 1)[0]}: {'.'.join(map(str, path[:depth]))} is not a mapping",
                            ".".join(map(str, path[:depth])),
                            where,
                            "override a key inside a mapping",
                        )
                    ]
                )
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        last = path[-1]
        if isinstance(node, list) and isinstance(last, int) and last < len(node):
            node[last] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ValidationError(
                [Problem(f"cannot set {text.split('=', 1)[0]}: its parent is not a mapping", "", where, "")]
            )
        for known in [p for p in smap.positions if p[: len(path)] == path]:
            del smap.positions[known]
        smap.set(path, where)
    return data
