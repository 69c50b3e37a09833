"""An MLTable read into a pandas DataFrame: its files read as the read transformation says,
then its row transformations in order.

pandas (and pyarrow for parquet) are imported only here, when a table is read; without them
the error says what to install.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.data.mltable_files import table_files
from distrun.data.mltable_spec import (
    ENCODINGS,
    MLTableError,
    MLTableSpec,
    ReadDelimited,
    ReadJsonLines,
    ReadParquet,
    RowStep,
)

INSTALL_HINT = "pip install 'distrun[parallel]' (pandas and pyarrow)"


def pandas_module() -> Any:
    try:
        import pandas
    except ImportError:
        raise DistrunError("reading an MLTable needs pandas, which is not installed", INSTALL_HINT) from None
    return pandas


def frame_of(spec: MLTableSpec, files: Sequence[Path] | None = None) -> Any:
    """The table as a DataFrame; `files` (a subset of the table's files, a mini-batch) when given."""
    pd = pandas_module()
    chosen = list(files) if files is not None else table_files(spec)
    reader = spec.reader
    if reader is None:
        frame = pd.DataFrame({"Path": [str(f) for f in chosen]})
    elif not chosen:
        frame = pd.DataFrame()
    else:
        frame = _read(pd, spec, reader, chosen)
    for index, step in enumerate(spec.steps):
        frame = _apply(pd, spec, frame, step, index)
    return frame


def _read(pd: Any, spec: MLTableSpec, reader: Any, files: list[Path]) -> Any:
    frames = []
    for position, path in enumerate(files):
        try:
            frame = _read_one(pd, reader, path, position)
        except ImportError as exc:
            raise MLTableError(
                spec.source, None, "transformations", f"cannot read {path}: {exc}", INSTALL_HINT
            ) from None
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            raise MLTableError(
                spec.source,
                None,
                "transformations",
                f"cannot read {path}: {exc}",
                "check the file and the read options",
            ) from None
        if reader.include_path_column:
            frame[reader.path_column] = str(path)
        frames.append(frame)
    if isinstance(reader, ReadDelimited) and reader.header == "from_first_file":
        for frame in frames[1:]:
            frame.columns = frames[0].columns[: len(frame.columns)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _read_one(pd: Any, reader: Any, path: Path, position: int) -> Any:
    if isinstance(reader, ReadParquet):
        return pd.read_parquet(path)
    if isinstance(reader, ReadJsonLines):
        return pd.DataFrame(_json_records(path, reader))
    assert isinstance(reader, ReadDelimited)
    headerless = reader.header == "no_header" or (reader.header == "from_first_file" and position > 0)
    frame = pd.read_csv(
        path,
        sep=reader.delimiter,
        header=None if headerless else 0,
        encoding=ENCODINGS[reader.encoding],
        keep_default_na=False,
        na_filter=not reader.empty_as_string,
        na_values=[""],
    )
    if reader.header == "no_header":
        frame.columns = [f"Column{n + 1}" for n in range(len(frame.columns))]
    return frame


def _json_records(path: Path, reader: ReadJsonLines) -> list[Any]:
    records = []
    with open(path, encoding=ENCODINGS[reader.encoding]) as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                if reader.invalid_lines == "drop":
                    continue
                raise ValueError(f"line {number} is not JSON ({exc}); invalid_lines: drop skips such lines") from None
    return records


def _apply(pd: Any, spec: MLTableSpec, frame: Any, step: RowStep, index: int) -> Any:
    if step.name == "take":
        return frame.head(step.value).reset_index(drop=True)
    if step.name == "skip":
        return frame.iloc[step.value :].reset_index(drop=True)
    where = f"transformations.{step.name}"
    if step.name in ("drop_columns", "keep_columns"):
        _known_columns(spec, frame, step.value, where)
        if step.name == "drop_columns":
            return frame.drop(columns=list(step.value))
        return frame[list(step.value)]
    for columns, column_type in step.value:
        _known_columns(spec, frame, columns, where)
        for column in columns:
            try:
                frame[column] = _converted(pd, frame[column], column_type)
            except (ValueError, TypeError) as exc:
                raise MLTableError(
                    spec.source,
                    None,
                    where,
                    f"column {column!r} cannot be read as {column_type}: {exc}",
                    "convert it to another type, or leave it as read",
                ) from None
    return frame


def _known_columns(spec: MLTableSpec, frame: Any, columns: Sequence[str], where: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise MLTableError(
            spec.source,
            None,
            where,
            "no column " + ", ".join(repr(c) for c in missing),
            "the table's columns are " + ", ".join(str(c) for c in frame.columns),
        )


def _converted(pd: Any, column: Any, column_type: str) -> Any:
    if column_type == "int":
        return pd.to_numeric(column).astype("Int64")
    if column_type == "float":
        return pd.to_numeric(column).astype(float)
    if column_type == "string":
        return column.astype("string")
    if column_type == "boolean":
        text = column.astype("string").str.strip().str.lower()
        return text.map({"true": True, "1": True, "false": False, "0": False}).astype("boolean")
    return pd.to_datetime(column)
