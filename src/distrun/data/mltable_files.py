"""The files an MLTable's `paths` name: a file, every file under a folder, or a glob pattern."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from distrun.data.mltable_spec import MLTABLE_FILE, MLTableError, MLTableSpec, TablePath


def table_files(spec: MLTableSpec) -> list[Path]:
    """The files of the table, sorted (by path), each once; an entry that names nothing raises.

    The MLTable file itself is never one of them (a `folder: .` names the table's own folder).
    """
    found: set[Path] = set()
    for index, entry in enumerate(spec.paths):
        files = _entry_files(spec.folder, entry)
        if not files:
            raise MLTableError(
                spec.source,
                None,
                f"paths[{index}].{entry.kind}",
                f"{entry.kind} {entry.path!r} names no file (resolved against {spec.folder})",
                "paths are relative to the folder that holds the MLTable file",
            )
        found.update(files)
    found.discard(spec.source)
    return sorted(found)


def _entry_files(folder: Path, entry: TablePath) -> list[Path]:
    where = folder / entry.path
    if entry.kind == "file":
        return [where] if where.is_file() else []
    if entry.kind == "folder":
        if not where.is_dir():
            return []
        return [
            Path(root) / name
            for root, _dirs, names in os.walk(where)
            for name in names
            if name != MLTABLE_FILE or Path(root) != folder
        ]
    return [Path(hit) for hit in glob.glob(str(where), recursive=True) if os.path.isfile(hit)]
