"""distrun's one MLTable reader: `load_mltable(folder)` checks an MLTable folder and says what it
holds (a frozen `MLTableSpec`), `table_files(spec)` lists its files, `read_dataframe(folder or
spec)` reads it into a pandas DataFrame (pandas imported only then).

The forms read are those of Azure ML's examples: `paths` of `file`, `folder` and `pattern`
entries; one of `read_delimited`, `read_parquet` or `read_json_lines` with their usual
options; then `take`, `skip`, `drop_columns`, `keep_columns` and `convert_column_types`.
Anything else is an `MLTableError` (a `ValueError`) naming the MLTable file, line, key path and
a hint, before any data is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.data.mltable_files import table_files
from distrun.data.mltable_frames import frame_of
from distrun.data.mltable_spec import (
    MLTABLE_FILE,
    MLTableError,
    MLTableSpec,
    ReadDelimited,
    ReadJsonLines,
    ReadParquet,
    RowStep,
    TablePath,
    parse_mltable,
    read_mltable_file,
)

__all__ = [
    "MLTABLE_FILE",
    "MLTableError",
    "MLTableSpec",
    "ReadDelimited",
    "ReadJsonLines",
    "ReadParquet",
    "RowStep",
    "TablePath",
    "is_mltable_folder",
    "load_mltable",
    "read_dataframe",
    "table_files",
]


def load_mltable(folder: Path) -> MLTableSpec:
    """The MLTable in `folder`, checked (its files are not read)."""
    folder = Path(folder)
    document, smap = read_mltable_file(folder)
    return parse_mltable(document, smap, folder)


def is_mltable_folder(folder: Path) -> bool:
    return (Path(folder) / MLTABLE_FILE).is_file()


def read_dataframe(folder_or_spec: Path | str | MLTableSpec) -> Any:
    """The whole table as a pandas DataFrame."""
    spec = folder_or_spec if isinstance(folder_or_spec, MLTableSpec) else load_mltable(Path(folder_or_spec))
    return frame_of(spec)
