"""An MLTable file read into plain data: which files a table is made of, how they are read,
and the row transformations applied after.

An MLTable is a folder holding a YAML file named `MLTable`:

    paths:
      - file: ./train.csv          # or `folder: ./parts`, or `pattern: ./*.csv`
    transformations:
      - read_delimited: {delimiter: ',', header: all_files_same_headers, encoding: utf8}
      - drop_columns: [Name, Ticket]
      - take: 100

Every problem is an `MLTableError` naming the MLTable file, the line, the key path and a hint,
raised before any data is read. Paths are resolved against the MLTable's folder, as Azure ML
resolves them; remote paths (a datastore, http, abfss) are refused with what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, Position
from distrun.core.safe_files import UnsafeFileError, read_user_file
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

MLTABLE_FILE = "MLTable"
MLTABLE_FILE_LIMIT = 1 << 20  # an MLTable file is a few hundred bytes

HEADERS = ("no_header", "from_first_file", "all_files_same_headers", "all_files_different_headers")
# Azure ML's encoding names -> Python's codecs
ENCODINGS = {
    "utf8": "utf-8",
    "utf8bom": "utf-8-sig",
    "ascii": "ascii",
    "iso88591": "latin-1",
    "latin1": "latin-1",
    "windows1252": "cp1252",
    "utf16": "utf-16",
    "utf32": "utf-32",
}
COLUMN_TYPES = ("int", "float", "string", "boolean", "datetime")
TOP_KEYS = ("$schema", "type", "paths", "transformations", "metadata", "traits")
PATH_KINDS = ("file", "folder", "pattern")


class MLTableError(DistrunError, ValueError):
    """An MLTable that cannot be read; the message names the file, line, key path and a hint."""

    def __init__(self, file: Path | str, line: int | None, key_path: str, message: str, hint: str) -> None:
        where = f"{file}:{line}" if line else str(file)
        key = f" {key_path}:" if key_path else ""
        super().__init__(f"{where}:{key} {message}", hint)
        self.file = str(file)
        self.line = line
        self.key_path = key_path
        self.problem = message

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class TablePath:
    """One `paths` entry: `kind` is file, folder or pattern; `path` is relative to the MLTable folder
    (as written, without a leading ./), or absolute when written so."""

    kind: str
    path: str


@dataclass(frozen=True)
class ReadDelimited:
    delimiter: str = ","
    header: str = "all_files_same_headers"
    encoding: str = "utf8"
    empty_as_string: bool = False
    include_path_column: bool = False
    path_column: str = "Path"
    support_multi_line: bool = False


@dataclass(frozen=True)
class ReadParquet:
    include_path_column: bool = False
    path_column: str = "Path"


@dataclass(frozen=True)
class ReadJsonLines:
    encoding: str = "utf8"
    include_path_column: bool = False
    path_column: str = "Path"
    invalid_lines: str = "error"  # or "drop"


Reader = ReadDelimited | ReadParquet | ReadJsonLines


@dataclass(frozen=True)
class RowStep:
    """A row transformation after the read: take, skip, drop_columns, keep_columns or
    convert_column_types. `value` is an int (take, skip), a tuple of column names (drop, keep),
    or a tuple of (columns, column type) pairs (convert)."""

    name: str
    value: Any


@dataclass(frozen=True)
class MLTableSpec:
    folder: Path  # the MLTable's folder; every relative path is resolved against it
    paths: tuple[TablePath, ...]
    reader: Reader | None = None  # None: the table is the list of its files (one column, Path)
    steps: tuple[RowStep, ...] = field(default_factory=tuple)

    @property
    def source(self) -> Path:
        return self.folder / MLTABLE_FILE


class _Checker:
    """Reads the plain data of an MLTable file; each problem raises with its position."""

    def __init__(self, source: Path, smap: SourceMap) -> None:
        self.source = source
        self.smap = smap

    def fail(self, path: KeyPath, message: str, hint: str) -> MLTableError:
        position: Position = self.smap.find(path)
        return MLTableError(self.source, position.line, format_key_path(path), message, hint)

    def mapping(self, value: Any, path: KeyPath, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"{what} must be a mapping, not {_shown(value)}", f"write `{path[-1]}:` with keys")
        for key in value:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown key {key!r} in {what}", "known keys: " + ", ".join(allowed))
        return value

    def boolean(self, value: Any, path: KeyPath) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, not {_shown(value)}", "write true or false")
        return value

    def text(self, value: Any, path: KeyPath, choices: tuple[str, ...] = ()) -> str:
        if not isinstance(value, str) or (choices and value not in choices):
            hint = ("one of: " + ", ".join(choices)) if choices else "write a string"
            raise self.fail(path, f"{_shown(value)} is not allowed here", hint)
        return value

    def count(self, value: Any, path: KeyPath) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(path, f"expected a count of rows, not {_shown(value)}", "write a whole number >= 0")
        return value

    def columns(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise self.fail(path, f"expected a column name or a list of them, not {_shown(value)}", "write [A, B]")
        return tuple(names)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value)


def parse_mltable(document: Any, smap: SourceMap, folder: Path) -> MLTableSpec:
    """The `MLTableSpec` of an MLTable document already parsed with positions."""
    check = _Checker(folder / MLTABLE_FILE, smap)
    if not isinstance(document, dict):
        raise check.fail((), "an MLTable file must be a mapping with `paths:`", "start the file with `paths:`")
    top = check.mapping(document, (), TOP_KEYS, "an MLTable")
    if top.get("type", "mltable") != "mltable":
        raise check.fail(("type",), f"type {top['type']!r} is not mltable", "write `type: mltable` or leave it out")
    paths = _paths(check, top.get("paths"))
    reader, steps = _transformations(check, top.get("transformations"))
    return MLTableSpec(folder=folder, paths=paths, reader=reader, steps=steps)


def _paths(check: _Checker, value: Any) -> tuple[TablePath, ...]:
    if not isinstance(value, list) or not value:
        raise check.fail(
            ("paths",), "`paths` must be a list of at least one entry", "write `paths:` then `- file: ./data.csv`"
        )
    entries = []
    for index, entry in enumerate(value):
        where: KeyPath = ("paths", index)
        if not isinstance(entry, dict) or len(entry) != 1:
            raise check.fail(where, "each path entry has one key: file, folder or pattern", "write `- file: ./a.csv`")
        ((kind, raw),) = entry.items()
        if kind not in PATH_KINDS:
            raise check.fail(where + (kind,), f"unknown path kind {kind!r}", "use file, folder or pattern")
        text = check.text(raw, where + (kind,))
        entries.append(TablePath(kind, _local_path(check, text, where + (kind,))))
    return tuple(entries)


def _local_path(check: _Checker, text: str, where: KeyPath) -> str:
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text or text.startswith("azureml:"):
        raise check.fail(
            where,
            f"{text!r} is a remote path; distrun reads an MLTable's files from local paths",
            "copy the data next to the MLTable file, or register it as a data asset and give the job that",
        )
    while text.startswith("./"):
        text = text[2:]
    return text or "."


READERS = ("read_delimited", "read_parquet", "read_json_lines")
ROW_STEPS = ("take", "skip", "drop_columns", "keep_columns", "convert_column_types")


def _transformations(check: _Checker, value: Any) -> tuple[Reader | None, tuple[RowStep, ...]]:
    if value is None:
        return None, ()
    if not isinstance(value, list):
        raise check.fail(("transformations",), "`transformations` must be a list", "write `- read_delimited: ...`")
    reader: Reader | None = None
    steps: list[RowStep] = []
    for index, item in enumerate(value):
        where: KeyPath = ("transformations", index)
        name, options = _step_name(check, item, where)
        if name in READERS:
            if reader is not None or steps:
                raise check.fail(
                    where + (name,), f"{name} must be the first and only read transformation", "keep one read_*"
                )
            reader = _reader(check, name, options, where + (name,))
        elif name in ROW_STEPS:
            steps.append(_row_step(check, name, options, where + (name,)))
        else:
            raise check.fail(
                where,
                f"transformation {name!r} is not read by distrun",
                "distrun reads " + ", ".join(READERS + ROW_STEPS) + "; apply the others in the entry script",
            )
    return reader, tuple(steps)


def _step_name(check: _Checker, item: Any, where: KeyPath) -> tuple[str, Any]:
    if isinstance(item, str):
        return item, None  # `- read_parquet` with its defaults
    if isinstance(item, dict) and len(item) == 1:
        ((name, options),) = item.items()
        return name, options
    raise check.fail(where, "each transformation is one key (its name) with its options", "write `- take: 10`")


def _reader(check: _Checker, name: str, options: Any, where: KeyPath) -> Reader:
    if name == "read_parquet":
        found = check.mapping(options, where, ("include_path_column", "path_column"), name)
        return ReadParquet(**_path_column(check, found, where))
    if name == "read_json_lines":
        keys = ("encoding", "include_path_column", "path_column", "invalid_lines")
        found = check.mapping(options, where, keys, name)
        return ReadJsonLines(
            encoding=check.text(found.get("encoding", "utf8"), where + ("encoding",), tuple(ENCODINGS)),
            invalid_lines=check.text(
                found.get("invalid_lines", "error"), where + ("invalid_lines",), ("error", "drop")
            ),
            **_path_column(check, found, where),
        )
    keys = ("delimiter", "header", "encoding", "empty_as_string", "include_path_column", "path_column")
    found = check.mapping(options, where, keys + ("support_multi_line", "infer_column_types"), name)
    delimiter = check.text(found.get("delimiter", ","), where + ("delimiter",))
    if len(delimiter) != 1:
        raise check.fail(where + ("delimiter",), f"delimiter {delimiter!r} is not one character", "write ',' or '\\t'")
    return ReadDelimited(
        delimiter=delimiter,
        header=check.text(found.get("header", "all_files_same_headers"), where + ("header",), HEADERS),
        encoding=check.text(found.get("encoding", "utf8"), where + ("encoding",), tuple(ENCODINGS)),
        empty_as_string=check.boolean(found.get("empty_as_string", False), where + ("empty_as_string",)),
        support_multi_line=check.boolean(found.get("support_multi_line", False), where + ("support_multi_line",)),
        **_path_column(check, found, where),
    )


def _path_column(check: _Checker, found: dict[str, Any], where: KeyPath) -> dict[str, Any]:
    return {
        "include_path_column": check.boolean(found.get("include_path_column", False), where + ("include_path_column",)),
        "path_column": check.text(found.get("path_column", "Path"), where + ("path_column",)),
    }


def _row_step(check: _Checker, name: str, options: Any, where: KeyPath) -> RowStep:
    if name in ("take", "skip"):
        return RowStep(name, check.count(options, where))
    if name in ("drop_columns", "keep_columns"):
        return RowStep(name, check.columns(options, where))
    if not isinstance(options, list) or not options:
        raise check.fail(where, "convert_column_types takes a list", "write `- columns: A` and `column_type: int`")
    pairs = []
    for index, entry in enumerate(options):
        item = check.mapping(entry, where + (index,), ("columns", "column_type"), "a conversion")
        if "columns" not in item or "column_type" not in item:
            raise check.fail(where + (index,), "a conversion needs `columns` and `column_type`", "write both")
        columns = check.columns(item["columns"], where + (index, "columns"))
        pairs.append((columns, _column_type(check, item["column_type"], where + (index, "column_type"))))
    return RowStep(name, tuple(pairs))


def _column_type(check: _Checker, value: Any, where: KeyPath) -> str:
    # `datetime: {formats: [...]}` and `boolean: {true_values: ...}`: their simple form is read
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("datetime", "boolean"):
        return next(iter(value))
    return check.text(value, where, COLUMN_TYPES)


def read_mltable_file(folder: Path) -> tuple[Any, SourceMap]:
    """The MLTable file of `folder` parsed with positions; a missing or unreadable one raises."""
    from distrun.core.errors import ValidationError
    from distrun.spec.yaml_source import parse_yaml_text

    source = folder / MLTABLE_FILE
    if not folder.is_dir():
        raise MLTableError(folder, None, "", "the MLTable folder does not exist", "give the folder holding `MLTable`")
    try:
        text = read_user_file(source, MLTABLE_FILE_LIMIT).decode("utf-8")
    except FileNotFoundError:
        raise MLTableError(
            source, None, "", "the folder has no MLTable file", "an mltable input is a folder with a file named MLTable"
        ) from None
    except (UnsafeFileError, UnicodeDecodeError, OSError) as exc:
        raise MLTableError(source, None, "", f"cannot read the MLTable file: {exc}", "save it as UTF-8 text") from None
    try:
        return parse_yaml_text(text, str(source))
    except ValidationError as exc:
        first = exc.problems[0]
        line = first.position.line if first.position else None
        raise MLTableError(source, line, first.key_path, first.message, first.hint) from None
