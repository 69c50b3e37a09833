"""A parallel step's input split into mini-batches, the same way in every process of the gang
(each process splits it itself; the split depends on the input alone).

- a folder (uri_folder): its files, sorted, `files_per_batch` to a mini-batch; `run` gets paths;
- an MLTable of files (no read transformation): the same over the table's files;
- a table: its rows, read by distrun's MLTable reader, either `files_per_batch` rows to a
  mini-batch, or as many rows as make about `bytes_per_batch` of the table's files, or one
  mini-batch per value of `partition_keys`; `run` gets a DataFrame.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.data.mltable import is_mltable_folder, load_mltable, read_dataframe, table_files


@dataclass(frozen=True)
class MiniBatch:
    index: int
    files: tuple[str, ...] = ()  # a folder's or a file table's mini-batch
    rows: tuple[int, int] | None = None  # a table's: rows [start, stop) of `Split.frame`
    partition: dict[str, Any] = field(default_factory=dict)  # partition_keys -> values
    size: int = 0  # items: files or rows


@dataclass
class Split:
    batches: list[MiniBatch]
    frame: Any = None  # the table, when the mini-batches are its rows
    kind: str = "files"  # "files" or "rows"
    source: str = ""


def split_input(
    path: Path,
    input_type: str,
    files_per_batch: int | None,
    bytes_per_batch: int | None,
    partition_keys: tuple[str, ...] = (),
) -> Split:
    if not path.exists():
        raise DistrunError(f"the parallel step's input_data {path} does not exist", "check the step's input")
    table = input_type == "mltable" or (input_type == "auto" and path.is_dir() and is_mltable_folder(path))
    if table:
        spec = load_mltable(path)
        if spec.reader is None and not partition_keys:
            return _file_batches([str(f) for f in table_files(spec)], files_per_batch or 10, str(path))
        frame = read_dataframe(spec)
        total = sum(f.stat().st_size for f in table_files(spec))
        return _row_batches(frame, files_per_batch, bytes_per_batch, total, partition_keys, str(path))
    if path.is_file():
        return _file_batches([str(path)], 1, str(path))
    files = sorted(str(Path(root) / name) for root, _, names in os.walk(path) for name in names)
    return _file_batches(files, files_per_batch or 10, str(path))


def _file_batches(files: list[str], per_batch: int, source: str) -> Split:
    batches = [
        MiniBatch(index, files=tuple(files[start : start + per_batch]), size=len(files[start : start + per_batch]))
        for index, start in enumerate(range(0, len(files), per_batch))
    ]
    return Split(batches, kind="files", source=source)


def _row_batches(
    frame: Any,
    rows_per_batch: int | None,
    bytes_per_batch: int | None,
    total_bytes: int,
    partition_keys: tuple[str, ...],
    source: str,
) -> Split:
    if partition_keys:
        missing = [key for key in partition_keys if key not in frame.columns]
        if missing:
            raise DistrunError(
                f"partition_keys {', '.join(missing)} are not columns of the table {source}",
                "its columns: " + ", ".join(str(c) for c in frame.columns),
            )
        frame = frame.sort_values(list(partition_keys), kind="stable").reset_index(drop=True)
        batches = []
        for index, (values, group) in enumerate(frame.groupby(list(partition_keys), sort=False, dropna=False)):
            values = values if isinstance(values, tuple) else (values,)
            start = int(group.index[0])
            partition = {k: _plain(v) for k, v in zip(partition_keys, values, strict=True)}
            batches.append(MiniBatch(index, rows=(start, start + len(group)), partition=partition, size=len(group)))
        return Split(batches, frame, "rows", source)
    rows = len(frame)
    if rows_per_batch is None:
        # As many rows as hold about `bytes_per_batch` of the table's files.
        per_row = total_bytes / rows if rows else 1
        rows_per_batch = max(1, math.floor((bytes_per_batch or 1 << 20) / max(per_row, 1e-9)))
    batches = [
        MiniBatch(index, rows=(start, min(start + rows_per_batch, rows)), size=min(rows_per_batch, rows - start))
        for index, start in enumerate(range(0, rows, rows_per_batch))
    ]
    return Split(batches, frame, "rows", source)


def _plain(value: Any) -> Any:
    """A partition's value as JSON writes it (numpy scalars have `.item()`)."""
    return value.item() if hasattr(value, "item") else value
