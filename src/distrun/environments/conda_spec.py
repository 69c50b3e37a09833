"""A conda environment file read as what distrun can build: a Python version and pip lines.

distrun builds virtual environments with uv or pip, not conda. So a conda dependency is
translated to its pip name (`pytorch` -> `torch`, `numpy=1.26` -> `numpy==1.26.*`), and one
that only conda ships (CUDA toolkits, compilers, system libraries) is an error that names it,
before anything starts. `-r FILE` lines in the pip section are read in, so the content hash
covers what is installed, not only the file's name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.errors import Position, Problem
from distrun.core.safe_files import read_user_file
from distrun.core.user_paths import expand_user
from distrun.environments.context_paths import outside_context
from distrun.environments.layered import Layer

REQUIREMENTS_FILE_LIMIT = 1 << 20  # a pip requirements file; a named pipe or /dev/zero is refused

# Bumped when the way an environment is built changes, so old builds are not reused.
BUILD_FORMAT = 3  # 2: environments have pip; 3: and setuptools where `python -m venv` gives it

# Conda packages without a pip equivalent: system libraries, toolchains, CUDA as a package.
CONDA_ONLY = frozenset(
    {
        "cudatoolkit",
        "cudatoolkit-dev",
        "cudnn",
        "nccl",
        "cuda",
        "cuda-toolkit",
        "cuda-nvcc",
        "cuda-runtime",
        "pytorch-cuda",
        "cpuonly",
        "mkl",
        "mkl-include",
        "mkl-service",
        "intel-openmp",
        "blas",
        "libblas",
        "openblas",
        "gcc",
        "gxx",
        "gcc_linux-64",
        "gxx_linux-64",
        "gfortran",
        "make",
        "git",
        "ffmpeg",
        "openmpi",
        "mpich",
        "openssl",
        "ca-certificates",
        "zlib",
        "readline",
        "sqlite",
        "tk",
        "xz",
        "ncurses",
        "bzip2",
        "nodejs",
        "r-base",
    }
)
# Conda names whose pip distribution is called differently.
PIP_NAMES = {
    "pytorch": "torch",
    "py-xgboost": "xgboost",
    "py-opencv": "opencv-python",
    "opencv": "opencv-python",
    "pytables": "tables",
    "matplotlib-base": "matplotlib",
    "tensorflow-base": "tensorflow",
    "pytorch-lightning": "pytorch-lightning",
}
# Conda packages that are the installer itself: a virtual environment has them already.
SKIPPED = frozenset({"pip", "python_abi", "setuptools", "wheel"})

_CONDA_DEP = re.compile(r"^(?:(?P<channel>[\w.-]+)::)?(?P<name>[A-Za-z0-9_.-]+)\s*(?P<rest>.*)$")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Requirement:
    """One line for the installer and where the user wrote it."""

    line: str
    position: Position | None = None

    @property
    def name(self) -> str | None:
        """The distribution name (None for an option line such as `--find-links DIR`)."""
        if self.line.startswith("-"):
            return None
        match = _REQUIREMENT_NAME.match(self.line)
        return match.group(1).lower().replace("_", "-") if match else None


@dataclass(frozen=True)
class EnvRequest:
    """What to build: a Python version (None: distrun's own) and the pip lines, in order."""

    python: str | None
    requirements: tuple[Requirement, ...]
    base_dir: Path  # relative paths in option lines resolve here (the installer's cwd)
    origin: str  # the conda file, or "<inline>"
    # An image's install steps, resolved and installed one after the other (`layered`): a
    # curated image of several steps. Empty: `requirements` is one request.
    layers: tuple[Layer, ...] = ()

    def lines(self) -> list[str]:
        return [r.line for r in self.requirements]


def cache_key(request: EnvRequest, python_version: str) -> str:
    """The content hash naming the environment: the Python it uses and the exact pip lines."""
    content: dict[str, Any] = {"format": BUILD_FORMAT, "python": python_version, "requirements": request.lines()}
    if request.layers:  # only then: every environment built before keeps its key
        content["layers"] = [[list(layer.lines), layer.upgrade, layer.no_deps] for layer in request.layers]
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()[:32]


PositionOf = Callable[..., Position]


def read_conda_data(
    data: Any, base_dir: Path, origin: str, position: PositionOf, key: str, context: Path | None = None
) -> tuple[EnvRequest | None, list[Problem]]:
    """A conda file's mapping -> the request and the problems that stop it from being built.

    `position(*path)` gives where a key of the conda mapping was written; `key` prefixes
    key paths in messages (`environment.conda_file` for an inline file, else ""). With a Docker
    build `context`, a line that names a place on this machine outside it is a problem, and a
    `-r` file outside it is never read.
    """
    problems: list[Problem] = []

    def problem(path: tuple[str | int, ...], message: str, hint: str) -> None:
        shown = ".".join([key, *(f"[{p}]" if isinstance(p, int) else p for p in path)]).strip(".").replace(".[", "[")
        problems.append(Problem(message, shown, position(*path), hint))

    if not isinstance(data, dict):
        problem(
            (), "a conda file is a mapping with `dependencies:`", "e.g. dependencies: [python=3.11, {pip: [numpy]}]"
        )
        return None, problems
    deps = data.get("dependencies") or []
    if not isinstance(deps, list):
        problem(("dependencies",), "dependencies: expected a list", "write each dependency as `- name` on its own line")
        return None, problems
    python: str | None = None
    requirements: list[Requirement] = []
    for index, dep in enumerate(deps):
        where = ("dependencies", index)
        if isinstance(dep, dict) and set(dep) == {"pip"}:
            lines = dep["pip"] or []
            if not isinstance(lines, list):
                problem((*where, "pip"), "pip: expected a list of requirements", "write each as `- name==version`")
                continue
            for sub, line in enumerate(lines):
                requirements.extend(
                    _pip_line(line, base_dir, position(*where, "pip", sub), (*where, "pip", sub), problem, context)
                )
            continue
        if not isinstance(dep, str):
            problem(where, f"dependency {dep!r} is neither a package nor a `pip:` list", "write `- name=version`")
            continue
        match = _CONDA_DEP.match(dep.strip())
        if match is None:
            problem(where, f"dependency {dep!r} is not a conda package spec", "write `- name` or `- name=version`")
            continue
        name, rest = match.group("name").lower(), match.group("rest").strip()
        if name == "python":
            python = _python_version(rest)
            if python is None and rest:
                problem(where, f"python version {rest!r} is not understood", "write e.g. `- python=3.11`")
            continue
        if name in SKIPPED:
            continue
        if name in CONDA_ONLY or name.startswith(("r-", "_", "lib")):
            problem(
                where,
                f"{dep!r} is a conda-only package: pip has no equivalent, and distrun builds environments with pip",
                "remove it (PyPI wheels such as torch bring their own CUDA libraries), or run the job in an existing "
                "Python named in config.yaml (environments: NAME: {python: /path/to/bin/python})",
            )
            continue
        requirements.append(Requirement(PIP_NAMES.get(name, name) + _pip_version(rest), position(*where)))
    if context is not None:
        problems += _outside_context(requirements, base_dir, context, key)
    return EnvRequest(python, tuple(requirements), base_dir, origin), problems


def _outside_context(requirements: list[Requirement], base_dir: Path, context: Path, key: str) -> list[Problem]:
    """A problem for each line that names a place on this machine outside the build context."""
    found = []
    for requirement in requirements:
        place = outside_context(requirement.line, base_dir, context)
        if place is not None:
            found.append(
                Problem(
                    f"{requirement.line!r} names {place}, outside the build context {context}: a Docker build "
                    "sees only the context's files, and so does distrun's build of it",
                    key,
                    requirement.position,
                    "copy what it needs into the build context (COPY it in the Dockerfile) and name it there",
                )
            )
    return found


def _python_version(rest: str) -> str | None:
    """`=3.8`, `==3.10.4`, `3.9`, `>=3.9` -> `3.8`, `3.10`, `3.9`, `3.9` (major.minor is what is matched)."""
    match = re.match(r"^(?:[=<>!~]=?|\s)*\s*(\d+)\.(\d+)", rest)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _pip_version(rest: str) -> str:
    """Conda's version spec as pip's: `=1.2` and `1.2` mean 1.2.*, `==1.2` exactly; a build string is dropped."""
    rest = rest.strip()
    if not rest:
        return ""
    if rest.startswith("=="):
        return "==" + rest[2:].split("=")[0].strip()
    if rest.startswith("=") or rest[0].isdigit():
        version = rest.lstrip("=").split("=")[0].split()[0].strip()
        return f"=={version}" if version.endswith("*") else f"=={version}.*"
    return rest.split()[0]


_FIND_LINKS = re.compile(r"^(-f|--find-links)(\s*=?\s*)(\S+)$")


def _absolute(text: str, base_dir: Path) -> str:
    """Paths in a line made absolute, so the line means one thing wherever the installer runs."""
    match = _FIND_LINKS.match(text)
    if match and "://" not in match.group(3):
        return f"{match.group(1)} {(base_dir / expand_user(Path(match.group(3)))).resolve()}"
    if text.startswith(("./", "../")):
        return str((base_dir / text).resolve())
    return text


def _pip_line(
    line: Any,
    base_dir: Path,
    where: Position,
    path: tuple[str | int, ...],
    problem: Callable[[tuple[str | int, ...], str, str], None],
    context: Path | None = None,
    depth: int = 0,
) -> list[Requirement]:
    if not isinstance(line, str) or not line.strip():
        problem(path, f"pip requirement {line!r} is not text", "write e.g. `- numpy==1.26.4`")
        return []
    text = line.strip()
    match = re.match(r"^(?:-r|--requirement)\s*=?\s*(.+)$", text)
    if match is None:
        return [Requirement(_absolute(text, base_dir), where)]
    file = expand_user(Path(match.group(1).strip()))
    file = file if file.is_absolute() else base_dir / file
    if context is not None and not file.resolve().is_relative_to(context.resolve()):
        problem(
            path,
            f"requirements file {file} is outside the build context {context}: "
            "a Docker build sees only the context's files",
            "copy it into the build context and name it there",
        )
        return []
    try:
        content = read_user_file(file, REQUIREMENTS_FILE_LIMIT).decode("utf-8")
    except (OSError, ValueError) as exc:
        problem(
            path, f"requirements file {file} cannot be read: {getattr(exc, 'strerror', None) or exc}", "check the path"
        )
        return []
    if depth > 10:
        problem(path, f"requirements file {file} includes itself", "remove the loop of -r lines")
        return []
    out: list[Requirement] = []
    for number, raw in enumerate(content.splitlines(), start=1):
        stripped = raw.split(" #", 1)[0].strip()
        if stripped and not stripped.startswith("#"):
            out.extend(_pip_line(stripped, file.parent, Position(str(file), number), path, problem, context, depth + 1))
    return out
