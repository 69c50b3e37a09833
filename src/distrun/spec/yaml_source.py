"""Read a YAML job document into plain data plus a `SourceMap` of positions.

ruamel.yaml's round-trip loader keeps the line and column of every key and item; we copy
them out once and hand the rest of distrun plain dicts, lists and scalars (YAML 1.2:
`yes`/`no` stay strings, as Azure ML reads them).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from distrun.errors import Position, Problem, ValidationError
from distrun.spec.source_map import KeyPath, SourceMap


def _yaml():  # type: ignore[no-untyped-def]
    from ruamel.yaml import YAML

    loader = YAML(typ="rt")
    loader.allow_duplicate_keys = False
    return loader


def _plain(node: Any, path: KeyPath, smap: SourceMap, source: str) -> Any:
    """Copy a ruamel node tree into plain Python values, recording positions."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        result: dict[Any, Any] = {}
        for key, value in node.items():
            line, col = node.lc.key(key)
            key_text = key if isinstance(key, str) else str(key)
            child = path + (key_text,)
            smap.set(child, Position(source, line + 1, col + 1))
            result[key_text] = _plain(value, child, smap, source)
        return result
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            line, col = node.lc.item(index)
            child = path + (index,)
            smap.set(child, Position(source, line + 1, col + 1))
            items.append(_plain(value, child, smap, source))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, (datetime.date, datetime.datetime)):
        return node.isoformat()
    # Tagged scalars and other exotic nodes: keep their text so validation can say so.
    return str(getattr(node, "value", node))


def parse_yaml_text(text: str, source: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; a syntax error becomes a `ValidationError` with its position."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    smap = SourceMap(source)
    smap.set((), Position(source, 1, 1))
    try:
        node = _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Position(source, mark.line + 1, mark.column + 1) if mark else Position(source)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        if "duplicate key" in what or type(exc).__name__ == "DuplicateKeyError":
            what = "duplicate key " + (exc.problem or "").split('"')[1] if '"' in (exc.problem or "") else what
            hint = "each key may appear once in a mapping: remove or merge the repeated key"
        else:
            hint = "fix the YAML syntax (indentation, quotes, brackets) at this position"
        raise ValidationError([Problem(f"YAML syntax error: {what}", "", pos, hint)]) from None
    except YAMLError as exc:
        raise ValidationError([Problem(f"YAML error: {exc}", "", Position(source), "")]) from None
    return _plain(node, (), smap, source), smap


def read_yaml_file(path: Path) -> tuple[Any, SourceMap]:
    """Read a job file; a missing or unreadable file is a clear `ValidationError`."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError(
            [Problem(f"job file {path} does not exist", "", Position(source), "check the path given to --file")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError([Problem(f"cannot read job file: {exc}", "", Position(source), "")]) from None
    return parse_yaml_text(text, source)
