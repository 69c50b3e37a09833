"""`distrun component create | list | show`: command, pipeline and parallel components registered
here, which pipeline steps name as `component: azureml:NAME:VERSION` or `azureml:NAME@latest` (as
`az ml component`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from distrun.cli.output import emit, output_option
from distrun.cli.tables import fields_table, records_table
from distrun.core.errors import DistrunError


def _home() -> Path:
    from distrun.store.layout import distrun_home

    return distrun_home()


@click.group("component")
def component_group() -> None:
    """Components (command, parallel), registered by name and version for pipeline steps (azureml:NAME:VERSION)."""


@component_group.command("create")
@click.option(
    "--file",
    "-f",
    "file",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="A command, pipeline or parallel component YAML (type: command, pipeline, parallel).",
)
@click.option("--name", "-n", default=None, help="The component's name (default: the file's `name`).")
@click.option("--version", "-v", default=None, help="Default: the file's `version`, else one more than the highest.")
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the file, e.g. --set version=2."
)
@output_option(what="the registered version")
def component_create(file: str, name: str | None, version: str | None, overrides: tuple[str, ...], output: str) -> None:
    """Check a component and record it, with a snapshot of its code folder (a pipeline component:
    its steps' components inline, each with its code folder): later edits change no pipeline."""
    from distrun.loading.pipeline_loader import load_component_file
    from distrun.spec.overrides import parse_override
    from distrun.store.components import register_component

    parallel = _parallel_component(file, overrides)
    if parallel is not None:  # checked as a step naming it is
        data, base_dir = parallel, Path(file).resolve().parent
        name, version = name or data.get("name"), version if version is not None else data.get("version")
    else:
        component = load_component_file(file, overrides)
        data, base_dir = component.data, component.base_dir
        name, version = name or component.spec.name, version if version is not None else component.spec.version
    if not name:
        raise DistrunError("the component has no name", "add `name:` to the file, or give --name NAME")
    version = None if version is None else str(version)
    text = Path(file).read_text(encoding="utf-8")  # read and checked as YAML just above
    changes = {".".join(map(str, path)): value for path, value in map(parse_override, overrides)}
    registered = register_component(_home(), data, text, base_dir, str(name), version, changes)
    emit(registered.to_dict(), output, lambda: fields_table(registered.to_dict()))


def _parallel_component(file: str, overrides: tuple[str, ...]) -> dict[str, Any] | None:
    """A `type: parallel` component file's data, checked; None for any other component."""
    from distrun.loading.parallel_step import check_component_file
    from distrun.spec.yaml_source import read_yaml_file

    data, _ = read_yaml_file(Path(file))
    if not isinstance(data, dict) or str(data.get("type", "")).lower() != "parallel":
        return None
    if overrides:
        raise DistrunError("--set is for command components", "edit the parallel component's file")
    return check_component_file(Path(file).resolve())


@component_group.command("list")
@click.option("--name", "-n", default=None, help="Only this component's versions.")
@output_option(what="the registered versions")
def component_list(name: str | None, output: str) -> None:
    """Registered components and their versions (latest last)."""
    from distrun.store.components import list_components

    found = [c.to_dict() for c in list_components(_home(), name)]
    empty = "No components yet: register one with `distrun component create -f component.yml`."
    emit(
        found,
        output,
        lambda: records_table(found, ("name", "version", "created_at", "path"), keep=("name",), empty=empty),
    )


@component_group.command("show")
@click.option("--name", "-n", required=True, help="The component's name.")
@click.option("--version", "-v", default=None, help="This version (default: the latest).")
@click.option("--label", "-l", default=None, help="latest: the highest version.")
@output_option(what="the version and its YAML")
def component_show(name: str, version: str | None, label: str | None, output: str) -> None:
    """One version of a component (default: the latest): where it is, and its YAML."""
    from distrun.core.safe_files import read_text
    from distrun.store.components import get_component

    component = get_component(_home(), name, version, label)
    shown = {**component.to_dict(), "yaml": read_text(component.file, 1 << 20, root=_home())}
    fields = {key: value for key, value in shown.items() if key != "yaml"}
    emit(shown, output, lambda: fields_table(fields) + "\n\n" + shown["yaml"].rstrip("\n"))
