"""Read a YAML job document into plain data plus a `SourceMap` of positions.

ruamel.yaml's round-trip loader keeps the line and column of every key and item; we copy
them out once and hand the rest of distrun plain dicts, lists and scalars (YAML 1.2:
`yes`/`no` stay strings, as Azure ML reads them).

A job file is small. Aliases that expand a few lines into millions of values, and nesting
deeper than any job needs, are refused with a positioned error instead of exhausting memory
or the interpreter's stack.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from distrun.core.errors import Position, Problem, ValidationError
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

MAX_DEPTH = 64  # nesting levels; real jobs use fewer than ten
MAX_VALUES = 100_000  # scalars, mappings and lists after expanding aliases
# A job file is a few KB; the largest real ones (inline conda environments) stay far below.
# Refused before parsing: a YAML parser takes minutes and gigabytes on millions of keys.
MAX_FILE_BYTES = 1 << 20


def _yaml(allow_duplicate_keys: bool = False):  # type: ignore[no-untyped-def]
    from ruamel.yaml import YAML

    loader = YAML(typ="rt")
    loader.allow_duplicate_keys = allow_duplicate_keys
    return loader


class _Copier:
    """Copies a ruamel node tree into plain Python values, recording positions."""

    def __init__(self, smap: SourceMap, source: str) -> None:
        self.smap = smap
        self.source = source
        self.count = 0

    def copy(self, node: Any, path: KeyPath, where: Position) -> Any:
        from ruamel.yaml.comments import CommentedMap, CommentedSeq

        self.count += 1
        if self.count > MAX_VALUES:
            raise ValidationError(
                [
                    Problem(
                        f"the document holds more than {MAX_VALUES} values once its aliases are expanded",
                        format_key_path(path),
                        where,
                        "a job file does not need that much data: remove the repeated `*alias` references",
                    )
                ]
            )
        if len(path) > MAX_DEPTH:
            raise ValidationError(
                [
                    Problem(
                        f"the document is nested more than {MAX_DEPTH} levels deep",
                        format_key_path(path),
                        where,
                        "flatten the data, or keep it in a file the job reads instead",
                    )
                ]
            )
        if isinstance(node, CommentedMap):
            result: dict[str, Any] = {}
            for key, value in node.items():
                pos = self._position(node.lc.key, key, where)
                key_text = _key_text(key)
                child = path + (key_text,)
                self.smap.set(child, pos)
                result[key_text] = self.copy(value, child, pos)
            return result
        if isinstance(node, CommentedSeq):
            items = []
            for index, value in enumerate(node):
                pos = self._position(node.lc.item, index, where)
                child = path + (index,)
                self.smap.set(child, pos)
                items.append(self.copy(value, child, pos))
            return items
        return _scalar(node)

    def _position(self, lookup: Any, key: Any, fallback: Position) -> Position:
        try:
            line, col = lookup(key)
        except (KeyError, IndexError, TypeError, AttributeError):  # keys built by merges (`<<:`) have none
            return fallback
        return Position(self.source, line + 1, col + 1)


def _key_text(key: Any) -> str:
    """Keys are strings in a job; `1:` or `true:` become their text so validation can name them."""
    if isinstance(key, str):
        return str(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, tuple):  # a complex key `? [a, b]`
        return "[" + ", ".join(_key_text(k) for k in key) + "]"
    return str(_scalar(key))


def _scalar(node: Any) -> Any:
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
    if isinstance(node, (set, frozenset)) or type(node).__name__ == "CommentedSet":
        return [_scalar(member) for member in node]  # `!!set {a, b}`: validation says a list is not allowed
    # Tagged scalars (`!foo 3`), sets and other exotic nodes: keep their text so validation can say so.
    value = getattr(node, "value", None)
    return str(value) if value is not None else str(node)


def _syntax_help(problem: str, context: str) -> tuple[str, str]:
    """(what is wrong in plain words, how to fix it) for a ruamel.yaml error text."""
    text = f"{context} {problem}"
    if "'\\t'" in text:
        return "a tab character is not allowed here", "YAML indents with spaces only: replace the tab with spaces"
    if "mapping values are not allowed here" in text:
        return (
            "unexpected ':' (a key indented deeper than the keys before it, or a value containing ': ')",
            "indent keys of one mapping by the same number of spaces, and quote values that contain ': '",
        )
    if "block mapping" in text or "block collection" in text or "block end" in text:
        return (
            "this line's indentation does not fit the lines above it",
            "indent keys of one mapping by the same number of spaces; start list items with '- ' at one level",
        )
    if "flow sequence" in text:
        return "a '[' list is not closed", "close the list with ']' and separate its items with ','"
    if "flow mapping" in text:
        return "a '{' mapping is not closed", "close the mapping with '}' and separate its entries with ','"
    if "quoted scalar" in text:
        return "a quoted string is not closed or holds a bad escape", "end the string with its opening quote"
    if "another document" in text:
        return "the file holds more than one YAML document", "keep one job per file: remove the `---` line"
    if "cannot start any token" in text:
        return "a character that cannot start a YAML value", "quote the value"
    if "for merging" in text:
        return (
            "`<<:` must merge a mapping, or a list of mappings, defined elsewhere with &name",
            "write `<<: *name` where `name: &name {...}` is a mapping",
        )
    if "anchor" in text or "alias" in text:
        return "an alias (*name) refers to an anchor (&name) that is not defined", "define the anchor first"
    return "the text is not valid YAML", "fix the YAML syntax (indentation, quotes, brackets) at this position"


def _duplicate_key_problem(text: str, source: str, exc: Any) -> Problem:
    """Name the repeated key by its key path, with both positions."""
    problem = exc.problem or ""
    key = problem.split('"')[1] if problem.count('"') >= 2 else "?"
    mark = exc.problem_mark
    where = Position(source, mark.line + 1, mark.column + 1) if mark else Position(source)
    parent = exc.context_mark
    # Parse again keeping the first value of each key, to find the mapping and the first position.
    path: KeyPath = (key,)
    first = ""
    try:
        tree = _yaml(allow_duplicate_keys=True).load(text)
        found = _find_mapping(tree, (), parent.line, parent.column) if parent else None
    except Exception:  # the document has further errors; report the duplicate without its path
        found = None
    if found is not None:
        mapping, mapping_path = found
        path = mapping_path + (key,)
        for candidate in mapping:
            if _key_text(candidate) == key:
                try:
                    line, _ = mapping.lc.key(candidate)
                    first = f" (first at line {line + 1})"
                except (KeyError, TypeError, AttributeError):
                    pass
                break
    return Problem(
        f"duplicate key {key!r}: it is already set in this mapping{first}",
        format_key_path(path),
        where,
        "each key may appear once in a mapping: remove one of them or merge their values",
    )


def _find_mapping(node: Any, path: KeyPath, line: int, column: int, depth: int = 0) -> tuple[Any, KeyPath] | None:
    """The mapping that starts at (line, column), and its key path."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if depth > MAX_DEPTH:
        return None
    if isinstance(node, CommentedMap):
        if (node.lc.line, node.lc.col) == (line, column) or _first_key_at(node, line, column):
            return node, path
        children = [(_key_text(k), v) for k, v in node.items()]
    elif isinstance(node, CommentedSeq):
        children = list(enumerate(node))
    else:
        return None
    for part, child in children:
        found = _find_mapping(child, path + (part,), line, column, depth + 1)
        if found is not None:
            return found
    return None


def _first_key_at(node: Any, line: int, column: int) -> bool:
    """A block mapping's construction mark is where its first key starts."""
    for key in node:
        try:
            return tuple(node.lc.key(key)) == (line, column)
        except (KeyError, TypeError, AttributeError):
            return False
    return False


def parse_yaml_text(text: str, source: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; a syntax error becomes a `ValidationError` with its position."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    smap = SourceMap(source)
    smap.set((), Position(source, 1, 1))
    try:
        node = _yaml().load(text)
    except MarkedYAMLError as exc:
        if type(exc).__name__ == "DuplicateKeyError":
            raise ValidationError([_duplicate_key_problem(text, source, exc)]) from None
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or ""
        if exc.context_mark is not None and ("end of stream" in problem or "<stream end>" in problem):
            # An unclosed bracket or quote: where it was opened helps more than the end of the file.
            mark = exc.context_mark
        pos = Position(source, mark.line + 1, mark.column + 1) if mark else Position(source)
        what, hint = _syntax_help(exc.problem or "", exc.context or "")
        raw = " ".join(part for part in (exc.context, exc.problem) if part)
        raise ValidationError([Problem(f"YAML syntax error: {what} ({raw})", "", pos, hint)]) from None
    except YAMLError as exc:
        raise ValidationError([_reader_problem(text, source, exc)]) from None
    except RecursionError:
        raise ValidationError(
            [
                Problem(
                    "YAML syntax error: the document is nested too deeply to read",
                    "",
                    Position(source, 1, 1),
                    "flatten the data; a job file needs only a few levels",
                )
            ]
        ) from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        # ruamel.yaml's constructors raise these for a value that its explicit tag cannot build (`!!int x`).
        raise ValidationError(
            [
                Problem(
                    f"YAML error: a value cannot be read as its tag says ({exc})",
                    "",
                    Position(source, 1, 1),
                    "remove explicit tags such as `!!int` or `!!float`, or fix the value they tag",
                )
            ]
        ) from None
    return _Copier(smap, source).copy(node, (), Position(source, 1, 1)), smap


def _reader_problem(text: str, source: str, exc: Exception) -> Problem:
    """Errors before parsing: characters YAML does not allow (control characters, lone surrogates)."""
    offset = getattr(exc, "position", None)
    character = getattr(exc, "character", None)
    if isinstance(offset, int) and 0 <= offset <= len(text):
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        where = Position(source, line, column)
    else:
        where = Position(source, 1, 1)
    if isinstance(character, int):
        return Problem(
            f"YAML error: the character #x{character:04x} is not allowed in YAML text",
            "",
            where,
            "remove it; inside a double-quoted string a control character can be written as an escape such as \\t",
        )
    return Problem(f"YAML error: {exc}", "", where, "fix the YAML at this position")


class _NotAJobFile(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _read_job_file(path: Path) -> bytes:
    """The job file's bytes: a regular file (a link to one is fine) of bounded size and content.

    A named pipe would block the open until some writer came, a device (/dev/zero) would be
    read forever: the open does not block, and the descriptor is checked before any read.
    """
    import os
    import stat

    from distrun.core.safe_files import kind_of

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(info.st_mode):
            raise _NotAJobFile(
                f"job file {path} is {kind_of(info.st_mode)}, not a regular file",
                "give the path of the job's YAML file",
            )
        data = os.read(fd, MAX_FILE_BYTES + 1) if info.st_size <= MAX_FILE_BYTES else b""
        if info.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
            raise _NotAJobFile(
                f"job file is larger than {MAX_FILE_BYTES} bytes ({max(info.st_size, len(data))} bytes)",
                "a job file does not need that much data: keep data in files the job reads (inputs), "
                "not in the job file",
            )
    finally:
        os.close(fd)
    # Each value needs a line or a comma of its own: a cheap upper bound on the count, taken
    # before the parser builds millions of nodes.
    if data.count(b"\n") + data.count(b",") > MAX_VALUES:
        raise _NotAJobFile(
            f"job file holds more than {MAX_VALUES} values (lines and comma-separated items)",
            "a job file does not need that much data: keep data in files the job reads (inputs), not in the job file",
        )
    return data


def read_yaml_file(path: Path) -> tuple[Any, SourceMap]:
    """Read a job file; a missing or unreadable file is a clear `ValidationError`."""
    source = str(path)
    try:
        text = _read_job_file(path).decode("utf-8")
    except _NotAJobFile as exc:
        raise ValidationError([Problem(str(exc), "", Position(source), exc.hint)]) from None
    except FileNotFoundError:
        raise ValidationError(
            [Problem(f"job file {path} does not exist", "", Position(source), "check the path of the job file")]
        ) from None
    except IsADirectoryError:
        raise ValidationError(
            [Problem(f"job file {path} is a folder", "", Position(source), "give the path of the job's YAML file")]
        ) from None
    except UnicodeDecodeError as exc:
        raise ValidationError(
            [Problem(f"job file is not UTF-8 text: {exc.reason}", "", Position(source), "save the file as UTF-8")]
        ) from None
    except OSError as exc:
        raise ValidationError(
            [Problem(f"cannot read job file: {exc.strerror or exc}", "", Position(source), "")]
        ) from None
    return parse_yaml_text(text, source)
