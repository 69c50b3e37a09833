"""A pipeline step's local paths made absolute against the file that wrote them, so that a step's
paths from two files (the pipeline and its component) resolve as each file meant. A binding
(`${{parent...}}`) is no path and stays as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.spec import paths
from distrun.spec.pipeline_bindings import Binding, NotABinding, binding_of


def binding_of_or_none(value: object) -> Binding | None:
    try:
        return binding_of(value)
    except NotABinding:
        return None


def absolute(text: Any, base_dir: Path) -> Any:
    """A local relative path made absolute against `base_dir` (the folder of the file that wrote it)."""
    if not isinstance(text, str) or not text or binding_of_or_none(text) is not None:
        return text
    local = paths.local_path(base_dir, text)
    return str(local) if local is not None else text


def absolute_environment(env: Any, base_dir: Path) -> Any:
    """An environment's `conda_file` and `build.path` made absolute."""
    if not isinstance(env, dict):
        return env
    env = dict(env)
    if isinstance(env.get("conda_file"), str):
        env["conda_file"] = absolute(env["conda_file"], base_dir)
    if isinstance(env.get("build"), dict) and isinstance(env["build"].get("path"), str):
        env["build"] = {**env["build"], "path": absolute(env["build"]["path"], base_dir)}
    return env


def absolute_input(value: Any, base_dir: Path) -> Any:
    """A data input's `path` made absolute."""
    if isinstance(value, dict) and isinstance(value.get("path"), str):
        return {**value, "path": absolute(value["path"], base_dir)}
    return value
