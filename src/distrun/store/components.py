"""Registered command components: what `distrun component create` records, so that a pipeline
step can name one as `component: azureml:NAME:VERSION` (or `azureml:NAME@latest`, `azureml:NAME`).

    $DISTRUN_HOME/components/<name>/<version>/component.yml   the component, `code: ./code`
    $DISTRUN_HOME/components/<name>/<version>/code/           a snapshot of its code folder
    $DISTRUN_HOME/components/<name>/<version>/<conda file>    its conda file, when it names one
    $DISTRUN_HOME/components/<name>/<version>/created         written last: the version is complete

A version is made once, as Azure ML makes it: its folder is created by one mkdir (two
registrations of one version cannot both succeed) and never changes after; a later edit of
the component's file or code folder changes nothing a pipeline runs. A version without
`created` (being made, or its making failed) is not listed. `@latest` is the newest version.
"""

from __future__ import annotations

import copy
import io
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, make_dirs, make_home
from distrun.core.registered_versions import pick_version
from distrun.core.safe_files import read_text

COMPONENT_FILE = "component.yml"
CREATED = "created"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
# azureml:NAME:VERSION, azureml:NAME@LABEL, azureml:NAME (the newest)
_REFERENCE = re.compile(r"^azureml:(?!//)(?P<name>[^:@/]+)(?::(?P<version>[^:@/]+)|@(?P<label>[^:@/]+))?$")


@dataclass(frozen=True)
class RegisteredComponent:
    name: str
    version: str
    folder: Path
    created_at: float

    @property
    def file(self) -> Path:
        return self.folder / COMPONENT_FILE

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "version": self.version, "path": str(self.file), "created_at": self.created_at}


def components_dir(home: Path) -> Path:
    return home / "components"


def parse_reference(text: str) -> tuple[str, str | None, str | None] | None:
    """`azureml:NAME:VERSION` -> (NAME, VERSION, None), `azureml:NAME@latest` -> (NAME, None, "latest"),
    `azureml:NAME` -> (NAME, None, None); None for any other text."""
    match = _REFERENCE.match(text)
    if match is None:
        return None
    return match.group("name"), match.group("version"), match.group("label")


def register_component(
    home: Path,
    data: dict[str, Any],
    text: str,
    base_dir: Path,
    name: str,
    version: str | None,
    overrides: dict[str, Any] | None = None,
) -> RegisteredComponent:
    """Record a validated component (`data`: the YAML `text` in `base_dir` with `overrides`, dotted
    key -> value, applied) as NAME:VERSION (VERSION: the next whole number when None). Its code
    folder and conda file are copied in."""
    from distrun.store.snapshot import snapshot_code

    _check_name(name, "name")
    version = version or _next_version(home, name)
    _check_name(version, "version")
    folder = components_dir(home) / name / version
    make_home(home)
    make_dirs(folder.parent)
    try:
        folder.mkdir(mode=DIR_MODE)
    except FileExistsError:
        raise DistrunError(
            f"component {name} already has version {version}",
            "versions never change: give a new --version (or none for the next number)",
        ) from None
    try:
        if data.get("type") == "pipeline":
            # A pipeline component (registered from Python): its steps' components are kept inline,
            # each with its code folder and conda file copied in, so the version never changes.
            document = _with_files_kept(copy.deepcopy(data), base_dir, folder, Path(), home)
            document.update(name=name, version=version)  # no overrides: `component create` takes command components
            (folder / COMPONENT_FILE).write_text(_yaml_text(document), encoding="utf-8")
            (folder / CREATED).write_text(str(time.time()), encoding="utf-8")
            return get_component(home, name, version)
        changes: dict[str, Any] = {**(overrides or {}), "name": name, "version": version}
        # A parallel component's code and environment are its task's.
        task = data.get("task") if data.get("type") == "parallel" else None
        holder, prefix = (task, "task.") if isinstance(task, dict) else (data, "")
        code = holder.get("code")
        if isinstance(code, str) and _is_local(code):
            snapshot_code(_local(base_dir, code), folder / "code", skip=(home,))
            changes[f"{prefix}code"] = "./code"
        environment = holder.get("environment")
        conda = environment.get("conda_file") if isinstance(environment, dict) else None
        if isinstance(conda, str) and _is_local(conda):
            source = _local(base_dir, conda)
            shutil.copyfile(source, folder / source.name)
            changes[f"{prefix}environment.conda_file"] = f"./{source.name}"
        (folder / COMPONENT_FILE).write_text(_with_changes(text, changes), encoding="utf-8")
        (folder / CREATED).write_text(str(time.time()), encoding="utf-8")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # no half-made version is ever listed
        raise
    return get_component(home, name, version)


def list_components(home: Path, name: str | None = None) -> list[RegisteredComponent]:
    root = components_dir(home)
    if not root.is_dir():
        return []
    names = [name] if name else sorted(p.name for p in root.iterdir() if p.is_dir())
    found = []
    for each in names:
        folder = root / each
        if not folder.is_dir():
            continue
        for version in folder.iterdir():
            try:
                created = float(read_text(version / CREATED, 64, root=home))
            except (OSError, ValueError):
                continue  # being made, or not made by distrun
            found.append(RegisteredComponent(each, version.name, version, created))
    return sorted(found, key=lambda c: (c.name, c.created_at))


def get_component(home: Path, name: str, version: str | None = None, label: str | None = None) -> RegisteredComponent:
    versions = list_components(home, name) if _NAME.match(name) else []
    return pick_version(
        "component", name, versions, version, label, "register it: distrun component create --file component.yml"
    )


def _with_changes(text: str, changes: dict[str, Any]) -> str:
    """The component's YAML with a few values replaced, its comments and layout kept."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    document = yaml.load(text)
    for key, value in changes.items():
        *parents, last = key.split(".")
        node = document
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _with_files_kept(component: dict[str, Any], base_dir: Path, root: Path, at: Path, home: Path) -> dict[str, Any]:
    """A component document (inline) with its local files copied under `root / at` and named
    relative to `root` (where the recorded component.yml is): a command component's code folder
    and conda file; a pipeline component's steps' components, each inline under `jobs/STEP/`
    (a step naming a component file holds that file's document)."""
    from distrun.spec.yaml_source import parse_yaml_text
    from distrun.store.snapshot import snapshot_code

    code = component.get("code")
    if isinstance(code, str) and _is_local(code):
        snapshot_code(_local(base_dir, code), root / at / "code", skip=(home,))
        component["code"] = f"./{(at / 'code').as_posix()}"
    environment = component.get("environment")
    conda = environment.get("conda_file") if isinstance(environment, dict) else None
    if isinstance(conda, str) and _is_local(conda):
        source = _local(base_dir, conda)
        make_dirs(root / at)
        shutil.copyfile(source, root / at / source.name)
        environment["conda_file"] = f"./{(at / source.name).as_posix()}"
    jobs = component.get("jobs") if component.get("type") == "pipeline" else None
    for step, raw in (jobs or {}).items():
        inner = raw.get("component") if isinstance(raw, dict) else None
        inner_base = base_dir
        if isinstance(inner, str) and _is_local(inner):
            path = _local(base_dir, inner.removeprefix("file:"))
            inner, _ = parse_yaml_text(read_text(path, 1 << 20), str(path))
            inner_base = path.parent
        if isinstance(inner, dict):
            raw["component"] = _with_files_kept(inner, inner_base, root, at / "jobs" / str(step), home)
    return component


def _yaml_text(document: dict[str, Any]) -> str:
    from ruamel.yaml import YAML

    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[attr-defined]
    yaml.dump(document, out)
    return out.getvalue()


def _is_local(text: str) -> bool:
    return not text.startswith(("azureml:", "http://", "https://")) and "://" not in text.removeprefix("file://")


def _local(base_dir: Path, text: str) -> Path:
    path = Path(text.removeprefix("file://")).expanduser()
    return path if path.is_absolute() else base_dir / path


def _next_version(home: Path, name: str) -> str:
    numbers = [int(c.version) for c in list_components(home, name) if c.version.isdigit()]
    return str(max(numbers, default=0) + 1)


def _check_name(text: str, what: str) -> None:
    if not _NAME.match(text):
        raise DistrunError(
            f"component {what} {text!r} is not allowed",
            "use letters, digits, '_', '.' and '-', starting with a letter or digit",
        )
