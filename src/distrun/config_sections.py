"""One top-level section of `$DISTRUN_HOME/config.yaml` as a mapping, with positions for errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.errors import DistrunError
from distrun.spec.source_map import SourceMap


def read_section(config_path: Path, key: str, example: str) -> tuple[dict[Any, Any], SourceMap]:
    """`{}` when the file or the section is absent; an error naming the line when it is not a mapping."""
    if not config_path.is_file():
        return {}, SourceMap(str(config_path))
    from distrun.spec.yaml_source import read_yaml_file

    data, smap = read_yaml_file(config_path)
    section = data.get(key) if isinstance(data, dict) else None
    if section is None:
        return {}, smap
    if not isinstance(section, dict):
        raise DistrunError(f"{smap.find((key,))}: {key}: expected a mapping of names", f"e.g. {example}")
    return section, smap
