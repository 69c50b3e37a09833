"""A job's `environment` -> what its ranks run in, decided (and checked) before anything starts.

- an inline environment with `conda_file` (a file or a mapping): a virtual environment built
  from it and cached (`builder`);
- `azureml:NAME@latest` / `azureml:NAME:V` mapped in config.yaml (`named`): its conda_file,
  or its existing `python`;
- anything else (a curated name, an `image`, a `build:` context): a container of its image
  where the job's compute runs one, else distrun's own Python (under a layer of the job's own:
  `distrun.prepare.submission`), with the note that says so.

Ranks get the environment's `bin/` first on PATH and VIRTUAL_ENV set (for a built one, the
job's own writable layer over it: `layer`); distrun's agent keeps running in distrun's own
Python, so nothing of distrun is installed in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from distrun.core.errors import Position, Problem
from distrun.core.user_paths import expand_user
from distrun.environments.conda_spec import EnvRequest, cache_key, read_conda_data
from distrun.environments.image_build import ensure_built, planned_build
from distrun.environments.interpreters import available_versions, find_python, own_version
from distrun.environments.named import NamedEnvironment, find_named

if TYPE_CHECKING:  # the builder (installers, locks) is imported only when an environment is built
    from distrun.environments.builder import BuildTarget

PositionOf = Callable[..., Position]


@dataclass(frozen=True)
class RankPython:
    """The Python a job's ranks run in: one to build (`target`) or an existing one (`prefix`)."""

    description: str
    target: BuildTarget | None = None
    prefix: Path | None = None  # the environment's root (bin/ holds python)
    bin_dir: Path | None = None
    variables: dict[str, str] = field(default_factory=dict)  # a build context's ENV values, for the ranks


def rank_python(
    environment: Any, base_dir: Path, home: Path, position: PositionOf, image_builds: bool = True
) -> tuple[RankPython | None, list[Problem]]:
    """What the ranks run in (None: distrun's own Python, or a container) and every problem that stops it.

    `image_builds`: the job's compute runs containers (local, Slurm), so a build context this
    machine's engine can build is an image (`image_build`), not a uv environment.
    """
    if environment is None:
        return None, []
    if isinstance(environment, str):
        named = find_named(environment, home / "config.yaml")  # the user's own mapping wins
        return _from_curated(environment) if named is None else _from_named(named, environment)
    conda_file = getattr(environment, "conda_file", None)
    build = getattr(environment, "build", None)
    if conda_file is None and build is not None:
        found, problems = _from_build_context(build, base_dir, position)
        # Only a context a uv environment cannot stand in for asks the engine (a process): a
        # check of a job file starts none for the usual pip-only context.
        if problems and image_builds and planned_build(build, base_dir, home / "config.yaml")[0] is not None:
            return None, []  # the processes run in a container of the image built from it
        return found, problems
    if conda_file is None:
        return None, []
    return _from_conda_file(conda_file, base_dir, position, ("environment", "conda_file"), "inline environment")


def _from_curated(reference: str) -> tuple[RankPython | None, list[Problem]]:
    """A curated Azure ML name: its specification built like a conda file, when asked to
    (`DISTRUN_CURATED_ENVIRONMENTS=build`); else distrun's own Python, as an unknown name."""
    from distrun.environments.curated import build_curated, cpu_conda_file, cuda_here, curated_layers, find_curated

    found = find_curated(reference)
    if found is None or not build_curated():
        return None, []
    data, _ = cpu_conda_file(found.conda_file, cuda_here())  # the changes are said in the job's note
    where = Position(found.origin)
    request, problems = read_conda_data(data, Path.cwd(), found.origin, lambda *p: where, "environment")
    if request is None or problems:
        return None, problems
    request = replace(request, layers=curated_layers(found, cuda_here())[0])
    built, more = _buildable(request, lambda *p: where, ("environment",))
    if built is None:
        return None, more
    return replace(built, description=f"curated {found.name}:{found.version}: {built.description}"), []


def _from_named(named: NamedEnvironment, reference: str) -> tuple[RankPython | None, list[Problem]]:
    python = named.body.get("python")
    conda_file = named.body.get("conda_file")
    if conda_file is not None:
        return _from_conda_file(
            conda_file, named.base_dir, named.position, ("conda_file",), f"{reference} (config.yaml)"
        )
    if python is None:
        return None, []  # an image only: for image-based backends
    text = str(python)
    if _looks_like_version(text):
        request = EnvRequest(text, (), named.base_dir, f"{reference} (config.yaml)")
        return _buildable(request, named.position, ("python",))
    path = expand_user(Path(text))
    path = path if path.is_absolute() else named.base_dir / path
    executable = path / "bin" / "python" if path.is_dir() else path
    if not os.access(executable, os.X_OK):
        return None, [
            Problem(
                f"environment {named.name}: python {executable} is not an executable Python",
                f"environments.{named.name}.python",
                named.position("python"),
                "give the path of an interpreter (e.g. /opt/venv/bin/python) or a version such as '3.11'",
            )
        ]
    bin_dir = executable.parent
    prefix = bin_dir.parent if (bin_dir.parent / "pyvenv.cfg").is_file() else None
    return RankPython(f"{named.name}: {executable}", prefix=prefix, bin_dir=bin_dir), []


def _looks_like_version(text: str) -> bool:
    parts = text.split(".")
    return 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts)


def _from_conda_file(
    conda_file: Any, base_dir: Path, position: PositionOf, path: tuple[str, ...], origin: str
) -> tuple[RankPython | None, list[Problem]]:
    key = ".".join(path)
    if isinstance(conda_file, dict):
        request, problems = read_conda_data(conda_file, base_dir, origin, lambda *p: position(*path, *p), key)
    else:
        file = expand_user(Path(str(conda_file)))
        file = file if file.is_absolute() else base_dir / file
        if not _is_file(file):
            return None, [
                Problem(
                    f"conda file {file} does not exist",
                    key,
                    position(*path),
                    "check the path (relative paths start at the job file's folder)",
                )
            ]
        from distrun.core.errors import ValidationError
        from distrun.spec.yaml_source import read_yaml_file

        try:
            data, smap = read_yaml_file(file)
        except ValidationError as exc:
            return None, exc.problems
        request, problems = read_conda_data(data, file.parent, str(file), lambda *p: smap.find(p), "")
    if request is None:
        return None, problems
    found, more = _buildable(request, position, path)
    return (None, [*problems, *more]) if problems or more else (found, [])


def _from_build_context(build: Any, base_dir: Path, position: PositionOf) -> tuple[RankPython | None, list[Problem]]:
    """A Docker build context of pip/conda steps, built like the conda file it amounts to."""
    from distrun.environments.build_context import read_build_context

    context = expand_user(Path(str(build.path or ".")))
    context = context if context.is_absolute() else base_dir / context
    if not context.is_dir():
        return None, [
            Problem(
                f"build context {context} is not a folder",
                "environment.build.path",
                position("environment", "build", "path"),
                "give the folder holding the Dockerfile (relative paths start at the job file's folder)",
            )
        ]
    read = read_build_context(context, build.dockerfile_path)
    if read.problems:
        return None, read.problems
    request, problems = read_conda_data(
        read.conda_data, context, str(read.dockerfile), read.position, "environment.build", context=context
    )
    if request is None or problems:
        return None, problems
    found, more = _buildable(request, position, ("environment", "build"))
    if found is None:
        return None, more
    return replace(found, variables=dict(read.variables)), []


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: not a file we can read
        return False


def _buildable(
    request: EnvRequest, position: PositionOf, path: tuple[str, ...]
) -> tuple[RankPython | None, list[Problem]]:
    python = find_python(request.python)
    if python is None:
        return None, [
            Problem(
                f"python {request.python} is not available on this machine "
                f"(found: {', '.join(available_versions())}); distrun does not download interpreters",
                ".".join(path),
                position(*path),
                f"install python{request.python} (e.g. `uv python install {request.python}` or your system's "
                f"packages), or ask for an available version, e.g. python={own_version()}",
            )
        ]
    from distrun.environments.builder import BuildTarget

    version = request.python or own_version()
    target = BuildTarget(request, python, version, cache_key(request, version))
    count = len([r for r in request.requirements if r.name])
    return RankPython(f"{target.key[:12]} (python {version}, {count} requirements)", target=target), []


@dataclass(frozen=True)
class JobPython:
    """What the ranks get for a job's `environment`: their variables, and for a built
    environment the job's own layer over it (`layer`: {"layer": its folder, "built": the
    cached environment}; {} otherwise), which a backend that copies the job folder to its nodes
    makes again in each copy."""

    variables: dict[str, str]
    layer: dict[str, str]
    image_build: dict[str, str] = field(default_factory=dict)  # an image built from a build context

    @property
    def in_own_python(self) -> bool:
        """The ranks get nothing of the environment's: they run in distrun's own Python (a curated
        name not built, an image, a name config.yaml maps to an image), or in a container of it."""
        return not self.variables and not self.layer and not self.image_build


def rank_variables(
    found: RankPython, home: Path, materialize: bool, layer: Path, out: TextIO | None = None
) -> JobPython:
    """The variables that put the ranks in `found`: its bin/ first on PATH, VIRTUAL_ENV.

    A built environment is the cached one, read-only: the ranks run in `layer`, the job's own
    writable layer over it (`distrun.environments.layer`). With `materialize`, a conda
    environment not in the cache is built now (a progress line on `out`) and the layer is
    made; without, only their future paths are given (for `distrun plan`).
    """
    if found.target is not None:
        from distrun.environments.builder import ensure_environment, env_path
        from distrun.environments.layer import layer_variables, make_layer

        if materialize:
            built = ensure_environment(found.target, home, out)
            make_layer(built, layer)
        else:
            built = env_path(home, found.target.key)
        variables = {**found.variables, **layer_variables(built, layer)}
        return JobPython(variables, {"layer": str(layer), "built": str(built)})
    assert found.bin_dir is not None
    path = os.environ.get("PATH") or os.defpath
    variables = {"PATH": f"{found.bin_dir}{os.pathsep}{path}"}
    if found.prefix is not None:
        variables["VIRTUAL_ENV"] = str(found.prefix)
    return JobPython(variables, {})


def job_python(
    environment: Any,
    base_dir: Path,
    home: Path,
    position: PositionOf,
    materialize: bool,
    layer: Path,
    image_builds: bool = False,
) -> JobPython:
    """The ranks' variables for a job's `environment` (none for distrun's own Python); builds it
    when `materialize` and it is not cached, and makes the job's layer over it at `layer`.
    `image_builds` (local compute, Slurm): a build context the engine can build is built into
    its image instead (when `materialize`), and the ranks get no variables of distrun's.
    Problems were reported at validation; one found now (config.yaml changed since) is raised
    the same way."""
    build = getattr(environment, "build", None)
    if image_builds and build is not None and getattr(environment, "conda_file", None) is None:
        planned, _ = planned_build(build, base_dir, home / "config.yaml")
        if planned is not None:
            if materialize:
                ensure_built(planned, home / "containers")
            return JobPython({}, {}, planned.to_dict())
    found, problems = rank_python(environment, base_dir, home, position, image_builds=False)
    if problems:
        from distrun.core.errors import ValidationError

        raise ValidationError(problems)
    return JobPython({}, {}) if found is None else rank_variables(found, home, materialize, layer)
