"""One top-level section of `$DISTRUN_HOME/config.yaml` as a mapping, with positions for errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.file_modes import FILE_MODE, make_home
from distrun.core.safe_files import read_user_file
from distrun.spec.source_map import SourceMap

CONFIG_LIMIT = 1 << 20  # as for a job file


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


def write_entry(config_path: Path, key: str, name: str, body: dict[str, Any] | str) -> None:
    """Add or replace `name` in section `key`, keeping the rest of the file (comments too), and
    replace the file whole: a reader sees the old file or the new one, never half of one."""
    data = _load(config_path)
    data.setdefault(key, {})
    data[key][name] = body
    _replace(config_path, data)


def remove_entry(config_path: Path, key: str, name: str) -> bool:
    """Remove `name` from section `key` as `write_entry` writes; False when it is not there."""
    data = _load(config_path)
    section = data.get(key) if isinstance(data, dict) else None
    if not isinstance(section, dict) or name not in section:
        return False
    del section[name]
    _replace(config_path, data)
    return True


def _load(config_path: Path) -> Any:
    from ruamel.yaml import YAML

    if not config_path.is_file():
        return {}
    return YAML().load(read_user_file(config_path, CONFIG_LIMIT).decode("utf-8")) or {}


def _replace(config_path: Path, data: Any) -> None:
    from ruamel.yaml import YAML

    yaml = YAML()
    make_home(config_path.parent)
    tmp = config_path.with_suffix(f".yaml.{os.getpid()}.tmp")
    # Explicit mode: under umask 000 a plain open would make config.yaml writable by everyone.
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE), "w") as handle:
        yaml.dump(data, handle)
    tmp.replace(config_path)
