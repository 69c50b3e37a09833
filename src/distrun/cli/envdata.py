"""`distrun env ...` and `distrun data ...`: the environment cache, named environments, data assets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from distrun.cli.output import emit, output_option
from distrun.cli.shown import echo
from distrun.cli.tables import fields_table, flat_fields, records_table
from distrun.core.errors import DistrunError
from distrun.core.user_paths import current_folder


def _home() -> Path:
    from distrun.store.layout import distrun_home

    return distrun_home()


def resource_file_option(help_text: str) -> Callable[[Any], Any]:
    """`--file/-f FILE` of a `create` verb that reads Azure ML's YAML for the resource, as `az ml` does."""
    return click.option(
        "--file", "-f", "file", default=None, type=click.Path(dir_okay=False, exists=True), help=help_text
    )


# ---------------------------------------------------------------- env


@click.group("env")
def env_group() -> None:
    """Python environments built from conda files (cached by content), and named ones."""


@env_group.command("list")
@output_option(what="the built environments and the named ones")
def env_list(output: str) -> None:
    """Cached environments, newest first, and the names config.yaml maps."""
    from distrun.environments.named import read_named
    from distrun.environments.store import list_environments

    built = list_environments(_home())
    named = {name: entry.body for name, entry in read_named(_home() / "config.yaml").items()}
    if output != "table":
        emit({"built": built, "named": named}, output, str)
        return
    for env in built:
        count = len([r for r in env["requirements"] if not r.startswith("-")])
        echo(f"{env['key'][:12]}  python {env['python']}  {count} requirements  {env['size_mb']} MB  {env['origin']}")
    for name, body in named.items():
        echo(f"{name}  (config.yaml) " + ", ".join(f"{k}: {v}" for k, v in body.items() if k != "description"))
    if not built and not named:
        echo("no environments yet: a job with a conda_file builds one")


@env_group.command("show")
@click.argument("key")
@output_option(what="the environment")
def env_show(key: str, output: str) -> None:
    """One cached environment (by key or key prefix) or named environment."""
    from distrun.environments.named import read_named
    from distrun.environments.store import show_environment

    named = read_named(_home() / "config.yaml")
    shown = {"name": key, **named[key].body} if key in named else show_environment(_home(), key)
    emit(shown, output, lambda: fields_table(flat_fields(shown)))


@env_group.command("prune")
@click.option("--unused-days", type=float, default=None, help="Remove environments no job used for this many days.")
@click.option("--all", "everything", is_flag=True, help="Remove every cached environment.")
def env_prune(unused_days: float | None, everything: bool) -> None:
    """Remove cached environments (never one being built)."""
    from distrun.environments.store import prune_environments

    removed = prune_environments(_home(), unused_days, everything)
    for key in removed:
        echo(f"removed {key}")
    echo(f"{len(removed)} environment{'s' if len(removed) != 1 else ''} removed")


@env_group.command("create")
@click.option("--name", "-n", default=None, help="The name jobs use: azureml:NAME@latest.")
@resource_file_option("An Azure ML environment YAML (name, conda_file, image).")
@click.option(
    "--conda-file", default=None, type=click.Path(dir_okay=False, exists=True), help="A conda environment YAML."
)
@click.option("--python", "python", default=None, help="An existing interpreter's path, or a version such as 3.11.")
@click.option("--image", default=None, help="An image, for backends that run images.")
@output_option(what="the named environment")
def env_create(
    name: str | None, file: str | None, conda_file: str | None, python: str | None, image: str | None, output: str
) -> None:
    """Name an environment in config.yaml (as `az ml environment create`)."""
    from distrun.environments.named import environment_body, register_environment

    version = None
    given: dict[str, Any] = {"conda_file": conda_file, "python": python, "image": image}
    if file is not None:
        from_file, file_name, version = _environment_file(Path(file))
        name = name or file_name
        given = {**from_file, **{k: v for k, v in given.items() if v is not None}}
    if not name:
        raise DistrunError("give the environment's name", "--name NAME (jobs then use azureml:NAME@latest)")
    body = environment_body(base_dir=current_folder(), **given)
    register_environment(_home() / "config.yaml", name, version, body)
    shown = {"name": name, **body}
    emit(shown, output, lambda: fields_table(flat_fields(shown)))


def _environment_file(file: Path) -> tuple[dict[str, Any], str | None, str | None]:
    """An Azure ML environment YAML: its name, version, and conda_file (relative to the file), image."""
    from distrun.spec.yaml_source import read_yaml_file

    data, _ = read_yaml_file(file)
    if not isinstance(data, dict):
        raise DistrunError(f"{file}: an environment file is a mapping (name, conda_file, image)")
    conda = data.get("conda_file")
    if isinstance(conda, str):
        conda = str((file.parent / conda).resolve())
    given = {"conda_file": conda, "image": data.get("image"), "description": data.get("description")}
    version = data.get("version")
    name = data.get("name")
    return given, None if name is None else str(name), None if version is None else str(version)


# ---------------------------------------------------------------- data


@click.group("data")
def data_group() -> None:
    """Data assets: named, versioned paths that jobs use as azureml:NAME:VERSION or azureml:NAME@latest."""


@data_group.command("create")
@resource_file_option(
    "An Azure ML data asset YAML (name, version, type, path); its relative path starts at its folder."
)
@click.option("--name", "-n", default=None, help="The asset's name (overrides the file's).")
@click.option("--version", "-v", default=None, help="Default: one more than the highest numbered version.")
@click.option(
    "--path", "-p", "path", default=None, help="A local path or a URI (datastore, job output, http(s), s3...)."
)
@click.option("--type", "-t", "kind", default=None, help="uri_folder (default), uri_file, mltable.")
@click.option("--description", "-d", default=None, help="What the data is (overrides the file's).")
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the file, e.g. --set version=2."
)
@output_option(what="the asset")
def data_create(
    file: str | None,
    name: str | None,
    version: str | None,
    path: str | None,
    kind: str | None,
    description: str | None,
    overrides: tuple[str, ...],
    output: str,
) -> None:
    """Register a data asset (as `az ml data create`, with --file or --name and --path)."""
    from distrun.data.register import register_path

    base = current_folder()
    given: dict[str, str] = {}
    if file is not None:
        from distrun.spec.resource_files import read_data_file

        found = read_data_file(Path(file), list(overrides))
        given = found.values
        if path is None:
            base = found.base_dir  # the file's own path is relative to the file, as in az ml
    elif overrides:
        raise DistrunError("--set changes keys of a data asset file", "give the file with --file data.yml")
    name = name or given.get("name")
    path = path or given.get("path")
    if not name or not path:
        raise DistrunError(
            "a data asset needs a name and a path", "give --file data.yml, or --name NAME --path PATH_OR_URI"
        )
    asset = register_path(
        _home(),
        name,
        version if version is not None else given.get("version", ""),
        path,
        kind or given.get("type", "uri_folder"),
        description if description is not None else given.get("description"),
        base,
    )
    emit(asset.to_dict(), output, lambda: fields_table(asset.to_dict()))


@data_group.command("list")
@click.option("--name", "-n", default=None, help="Only this asset's versions.")
@output_option(what="the assets")
def data_list(name: str | None, output: str) -> None:
    """Data assets and their versions (latest last)."""
    from distrun.data.assets import list_assets

    assets = [a.to_dict() for a in list_assets(_home(), name)]
    emit(assets, output, lambda: records_table(assets, _ASSET_COLUMNS, keep=("name", "version"), empty=_NO_ASSETS))


@data_group.command("show")
@click.option("--name", "-n", required=True, help="The asset's name.")
@click.option("--version", "-v", default=None, help="This version (default: the latest).")
@click.option("--label", "-l", default=None, help="latest: the highest version.")
@output_option(what="the asset")
def data_show(name: str, version: str | None, label: str | None, output: str) -> None:
    """One version of a data asset (default: the latest)."""
    from distrun.data.assets import get_asset

    asset = get_asset(_home(), name, version, label).to_dict()
    emit(asset, output, lambda: fields_table(asset))


@data_group.group("mirror")
def data_mirror() -> None:
    """URL prefixes whose data has a local copy (config.yaml's url_mirrors): inputs under them read it."""


@data_mirror.command("add")
@click.argument("prefix")
@click.argument("folder")
@output_option(what="the mirror")
def data_mirror_add(prefix: str, folder: str, output: str) -> None:
    """Map PREFIX (https://..., wasbs://...) to FOLDER (a folder or azureml://datastores/... URI)."""
    from distrun.data.mirrors import add_mirror

    mirror = add_mirror(_home() / "config.yaml", prefix, folder, current_folder())
    shown = {"prefix": mirror.prefix, "folder": mirror.target}
    emit(shown, output, lambda: records_table([shown], ("prefix", "folder"), keep=("prefix",)))


@data_mirror.command("list")
@output_option(what="the mirrors")
def data_mirror_list(output: str) -> None:
    """The url_mirrors entries of config.yaml."""
    from distrun.data.mirrors import read_mirrors

    shown = [{"prefix": m.prefix, "folder": m.target} for m in read_mirrors(_home() / "config.yaml")]
    emit(shown, output, lambda: records_table(shown, ("prefix", "folder"), keep=("prefix",), empty="no url mirrors"))


_ASSET_COLUMNS = ("name", "version", "type", "path", "created_at", "description")
_NO_ASSETS = "No data assets yet: register one with `distrun data create --name NAME --path PATH`."
