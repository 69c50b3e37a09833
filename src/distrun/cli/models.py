"""`distrun model create | list | show | download | archive | restore`: registered models (as
`az ml model`), kept in distrun's store and in the MLflow model registry of its tracking store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from distrun.cli.envdata import resource_file_option
from distrun.cli.output import emit, output_option
from distrun.cli.shown import echo
from distrun.cli.tables import fields_table, records_table
from distrun.core.errors import DistrunError
from distrun.core.user_paths import current_folder

_COLUMNS = ("name", "version", "type", "job", "created_at", "description")
_NO_MODELS = "No models yet: register one with `distrun model create --name NAME --path PATH`."


def _home() -> Path:
    """DISTRUN_HOME, with the versions jobs registered in MLflow's registry taken in."""
    from distrun.data.model_store import adopt_registered
    from distrun.store.layout import distrun_home

    home = distrun_home()
    adopt_registered(home)
    return home


def _version_options(command: Any) -> Any:
    """--name (NAME, or azureml:NAME:VERSION, azureml:NAME@latest), --version, --label."""
    command = click.option("--label", "-l", default=None, help="latest: the newest version not archived.")(command)
    command = click.option("--version", "-v", default=None, help="This version (default: the latest).")(command)
    return click.option(
        "--name", "-n", required=True, help="The model's name, or azureml:NAME:VERSION, azureml:NAME@latest."
    )(command)


def _workspace_options(command: Any) -> Any:
    """az ml's --workspace-name, --resource-group and --subscription: accepted, and said to mean
    nothing here (the workspace is DISTRUN_HOME), so `az ml model ...` lines run as written."""
    for flags in (("--workspace-name", "-w"), ("--resource-group", "-g"), ("--subscription",)):
        command = click.option(*flags, "azure_" + flags[0][2:].replace("-", "_"), default=None, hidden=True)(command)
    return command


def _note_workspace(given: dict[str, Any]) -> None:
    named = [f"--{key[len('azure_') :].replace('_', '-')}" for key, value in given.items() if value is not None]
    if named:
        echo(f"distrun: {', '.join(named)} name an Azure ML workspace; distrun's is DISTRUN_HOME", err=True)


def _chosen(name: str, version: str | None, label: str | None) -> Any:
    from distrun.data.model_versions import get_model, model_by_reference

    if ":" in name or "@" in name:
        return model_by_reference(_home(), name)
    return get_model(_home(), name, version, label)


@click.group("model")
def model_group() -> None:
    """Registered models: named, versioned, immutable copies of a model's files (azureml:NAME:VERSION)."""


@model_group.command("create")
@resource_file_option("An Azure ML model YAML (name, version, type, path, description, tags, properties).")
@click.option("--name", "-n", default=None, help="The model's name (overrides the file's).")
@click.option("--version", "-v", default=None, help="Any version Azure ML accepts (default: the next number).")
@click.option(
    "--path", "-p", default=None, help="A local file or folder, azureml://jobs/JOB/outputs/OUTPUT, or runs:/RUN/PATH."
)
@click.option("--type", "-t", "kind", default=None, help="custom_model (default), mlflow_model, triton_model.")
@click.option("--description", "-d", default=None, help="What the model is.")
@click.option("--tags", multiple=True, metavar="KEY=VALUE", help="Tags: KEY=VALUE (repeat, or several in one).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the file.")
@_workspace_options
@output_option(what="the registered version")
def model_create(
    file: str | None,
    name: str | None,
    version: str | None,
    path: str | None,
    kind: str | None,
    description: str | None,
    tags: tuple[str, ...],
    overrides: tuple[str, ...],
    output: str,
    **workspace: Any,
) -> None:
    """Register a model (as `az ml model create`): its files are copied in and never change."""
    from distrun.data.model_assets import create_model

    _note_workspace(workspace)
    base = current_folder()
    given: dict[str, Any] = {}
    if file is not None:
        from distrun.spec.resource_files import read_model_file

        found = read_model_file(Path(file), list(overrides))
        given = found.values
        for note in found.notes:
            echo(f"distrun: {note}", err=True)
        if path is None:
            base = found.base_dir  # the file's own path is relative to the file, as in az ml
    elif overrides:
        raise DistrunError("--set changes keys of a model file", "give the file with --file model.yml")
    name = name or given.get("name")
    path = path or given.get("path")
    if not name or not path:
        raise DistrunError("a model needs a name and a path", "give --file model.yml, or --name NAME --path PATH")
    model, report = create_model(
        _home(),
        name,
        path,
        version=version if version is not None else given.get("version"),
        type=kind or given.get("type", "custom_model"),
        description=description if description is not None else given.get("description"),
        tags={**given.get("tags", {}), **_pairs(tags)},
        properties=given.get("properties", {}),
        cwd=base,
    )
    for left in report.left_out:
        echo(f"distrun: left out of {model.name}:{model.version}: {left}", err=True)
    shown = model.to_dict()
    emit(shown, output, lambda: fields_table(shown))


@model_group.command("list")
@click.option("--name", "-n", default=None, help="Only this model's versions.")
@click.option("--include-archived", is_flag=True, help="Archived versions too.")
@click.option("--archived-only", is_flag=True, help="Only archived versions.")
@output_option(what="the registered versions")
def model_list(name: str | None, include_archived: bool, archived_only: bool, output: str) -> None:
    """Registered models and their versions (latest last)."""
    from distrun.data.model_versions import list_models

    found = list_models(_home(), name, archived=include_archived or archived_only)
    shown = [m.to_dict() for m in found if m.archived or not archived_only]
    emit(shown, output, lambda: records_table(shown, _COLUMNS, keep=("name", "version"), empty=_NO_MODELS))


@model_group.command("show")
@_version_options
@output_option(what="the version")
def model_show(name: str, version: str | None, label: str | None, output: str) -> None:
    """One version of a model (default: the latest): its facts, where its files are, and its files."""
    from distrun.data.model_versions import FILES, files_digest

    model = _chosen(name, version, label)
    shown = {**model.to_dict(), "files": _files_of(model.folder / FILES)}
    if model.digest is not None:  # read again: a job that read the files by path could have changed them
        shown["files_unchanged"] = files_digest(model.folder / FILES) == model.digest
    emit(shown, output, lambda: fields_table(shown))


@model_group.command("download")
@_version_options
@click.option("--download-path", "-p", "dest", default=".", help="Where to put NAME/ with the files (default: here).")
def model_download(name: str, version: str | None, label: str | None, dest: str) -> None:
    """Copy a version's files to DOWNLOAD_PATH/NAME/ (as `az ml model download`)."""
    from distrun.data.model_assets import download_model

    model = _chosen(name, version, label)
    target = download_model(model, Path(dest))
    echo(f"downloaded {model.name}:{model.version} to {target}")


@model_group.command("archive")
@_version_options
def model_archive(name: str, version: str | None, label: str | None) -> None:
    """Archive a version: kept whole, but hidden from `model list` and from @latest."""
    _set_archived(name, version, label, True)


@model_group.command("restore")
@_version_options
def model_restore(name: str, version: str | None, label: str | None) -> None:
    """Restore an archived version."""
    _set_archived(name, version, label, False)


def _set_archived(name: str, version: str | None, label: str | None, archived: bool) -> None:
    from distrun.data.model_assets import get_model, set_archived

    if not (":" in name or "@" in name or version or label):
        raise DistrunError("say which version", f"give --version VERSION (see `distrun model list -n {name}`)")
    if ":" in name or "@" in name:
        model = _chosen(name, version, label)
    else:
        model = get_model(_home(), name, version, label)
    set_archived(_home(), model.name, model.version, archived)
    echo(f"model {model.name}:{model.version}: {'archived' if archived else 'restored'}")


def _pairs(texts: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for text in texts:
        for pair in text.split():
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise DistrunError(f"--tags {pair!r} is not KEY=VALUE", "write --tags stage=prod")
            found[key] = value
    return found


def _files_of(top: Path, limit: int = 200) -> list[str]:
    found = []
    for folder, _dirs, files in os.walk(top):
        for name in sorted(files):
            found.append(os.path.relpath(os.path.join(folder, name), top))
            if len(found) >= limit:
                return sorted(found)
    return sorted(found)
