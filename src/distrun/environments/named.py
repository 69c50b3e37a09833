"""Environments named in `$DISTRUN_HOME/config.yaml`, so that `azureml:NAME@latest` means one here.

    environments:
      pt-old:                       # azureml:pt-old@latest, azureml:pt-old:3
        conda_file: envs/pt.yml     # built and cached like an inline conda_file (path from this file)
      site-python:
        python: /opt/py310/bin/python   # an existing interpreter or virtual environment, used as is
      trainer:
        image: myregistry/trainer:1 # for backends that run images

`distrun env create` writes these entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, Position
from distrun.core.user_paths import expand_user
from distrun.spec.config_sections import write_entry
from distrun.spec.source_map import SourceMap

ENV_KEYS = ("conda_file", "python", "image", "description")


@dataclass(frozen=True)
class NamedEnvironment:
    name: str
    body: dict[str, Any]
    base_dir: Path  # the config file's folder: relative conda_file paths start there
    source_map: SourceMap = field(default_factory=lambda: SourceMap("config.yaml"))

    def position(self, *path: str | int) -> Position:
        return self.source_map.find(("environments", self.name, *path))


def reference_name(reference: str) -> tuple[str, str | None]:
    """`azureml:NAME@latest` / `azureml:NAME:3` / `NAME` -> (NAME, version or None)."""
    text = reference.removeprefix("azureml:").strip()
    if text.startswith("//registries/"):
        text = text.rsplit("/environments/", 1)[-1].replace("/versions/", ":").replace("/labels/", "@")
    if "@" in text:
        return text.split("@", 1)[0], None
    if ":" in text:
        name, version = text.split(":", 1)
        return name, version
    return text, None


def read_named(config_path: Path) -> dict[str, NamedEnvironment]:
    from distrun.spec.config_sections import read_section

    section, smap = read_section(config_path, "environments", "environments: {my-env: {conda_file: env.yml}}")
    named = {}
    for name, body in section.items():
        if not isinstance(body, dict) or not body or set(body) - set(ENV_KEYS):
            raise DistrunError(
                f"{smap.find(('environments', name))}: environments.{name}: expected a mapping with "
                + ", ".join(ENV_KEYS[:3]),
                "e.g. environments: {my-env: {conda_file: env.yml}}",
            )
        named[str(name)] = NamedEnvironment(str(name), dict(body), config_path.parent, smap)
    return named


def find_named(reference: str, config_path: Path) -> NamedEnvironment | None:
    """The entry for `reference`: `NAME:VERSION` first, then `NAME`; None when it is not mapped."""
    name, version = reference_name(reference)
    named = read_named(config_path)
    if version is not None and f"{name}:{version}" in named:
        return named[f"{name}:{version}"]
    return named.get(name)


def named_or_none(reference: str, config_path: Path) -> NamedEnvironment | None:
    """`find_named`, where a config.yaml that cannot be read counts as no mapping: it is reported
    where the job is validated, not by every reader that only asks whether a name is the user's."""
    try:
        return find_named(reference, config_path)
    except Exception:
        return None


def add_named(config_path: Path, name: str, body: dict[str, Any]) -> None:
    """Add or replace one environment in config.yaml, keeping the rest of the file."""
    if not name or any(c.isspace() for c in name) or "/" in name:
        raise DistrunError(f"environment name {name!r} is not allowed", "use letters, digits, '-', '_', '.'")
    write_entry(config_path, "environments", name, body)


def environment_body(
    base_dir: Path,
    conda_file: Any = None,
    python: Any = None,
    image: Any = None,
    description: Any = None,
) -> dict[str, Any]:
    """A config.yaml entry: paths made absolute (relative to `base_dir`), what was not given left out."""
    body: dict[str, Any] = {}
    if isinstance(conda_file, dict):
        body["conda_file"] = conda_file
    elif conda_file is not None:
        body["conda_file"] = str((base_dir / expand_user(Path(str(conda_file)))).resolve())
    if python is not None:
        text = str(python)
        body["python"] = text if text[:1].isdigit() else str((base_dir / expand_user(Path(text))).absolute())
    if image:
        body["image"] = str(image)
    if description:
        body["description"] = str(description)
    if not set(body) & {"conda_file", "python", "image"}:
        raise DistrunError("say what the environment is", "a conda file, a Python (path or version) or an image")
    return body


def latest_version(config_path: Path, name: str) -> str | None:
    """The highest numbered version of `name` in config.yaml (`NAME:3`), or None."""
    numbers = [
        int(version)
        for key in read_named(config_path)
        for found, version in [reference_name(key)]
        if found == name and version is not None and version.isdigit()
    ]
    return str(max(numbers)) if numbers else None


def next_version(config_path: Path, name: str) -> str:
    """The version a registration without one gets: one more than the highest, "1" for the first."""
    latest = latest_version(config_path, name)
    return "1" if latest is None else str(int(latest) + 1)


def register_environment(config_path: Path, name: str, version: str | None, body: dict[str, Any]) -> None:
    """`NAME` (what @latest finds) and, with a version, `NAME:VERSION` too."""
    add_named(config_path, name, body)
    if version is not None:
        add_named(config_path, f"{name}:{version}", body)
