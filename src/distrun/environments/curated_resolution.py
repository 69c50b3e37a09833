"""Resolving a curated environment without installing it: what its build would install, found
with `uv pip compile` for the image's Python and platform (a machine without CUDA: its CPU
build, as `cpu_conda_file` makes it), layer by layer where the image installs in several steps
(`layered`). The check that every curated environment still resolves, for the tests and for
`scripts/curated_environments.py --resolve-all`.

`pypi_only`: the lines that need another source than PyPI (a package index, a URL, a git
repository) are left out, each one said, for a machine that reaches PyPI only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import Position
from distrun.environments.conda_spec import read_conda_data
from distrun.environments.curated import cpu_conda_file, curated_layers, find_curated, image_platform
from distrun.environments.layered import Layer, pinned_versions, resolve_layers

RESOLVE_TIMEOUT = 240.0  # seconds for one `uv pip compile`: a resolver that backtracks for longer fails


class NotResolved(Exception):
    """An environment (or one of its install steps) that uv cannot resolve: its message says why."""


@dataclass(frozen=True)
class Resolution:
    name: str
    python: str
    platform: str
    steps: int  # the install steps resolved one after the other (1: one request)
    versions: dict[str, str]
    replaced: tuple[str, ...]  # what a later step replaced of an earlier one's choices
    left_out: tuple[str, ...]  # lines from other sources than PyPI, left out (`pypi_only`)


def from_pypi(line: str) -> bool:
    """A line served by PyPI: no other index, no URL, no git repository."""
    return not (line.startswith("-") or "://" in line or line.startswith("git+"))


def build_layers(name: str) -> tuple[str, tuple[Layer, ...]]:
    """The Python version and the install steps distrun builds the curated `name` from, on a
    machine without CUDA (one step where the image has one)."""
    found = find_curated(f"azureml:AzureML-{name}@latest")
    if found is None:
        raise KeyError(name)
    data, _ = cpu_conda_file(found.conda_file, cuda=False)
    where = Position(found.origin)
    request, problems = read_conda_data(data, Path.cwd(), found.origin, lambda *p: where, "environment")
    if request is None or problems or not request.python:
        raise NotResolved(f"{name}: its specification is not buildable: {problems}")
    layers, _ = curated_layers(found, cuda=False)
    return request.python, layers or (Layer(tuple(request.lines())),)


# A machine's own package sources, which uv takes from these variables: a folder of wheels, an
# extra index on disk, a constraints file capping what that disk holds. uv takes a package from
# the first index that has it, so a local extra index holding triton for one Python only made
# torch unresolvable for the image's Python. The check is against PyPI (or the index that
# stands for it, UV_INDEX_URL), as the image was built.
MACHINE_SOURCES = ("UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_CONSTRAINT", "UV_OVERRIDE", "UV_NO_INDEX")


def _pypi_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in MACHINE_SOURCES}


def resolve_curated(name: str, uv: str, folder: Path, pypi_only: bool = False) -> Resolution:
    """The curated `name` resolved in `folder` (its files: each step's input and output)."""
    found = find_curated(f"azureml:AzureML-{name}@latest")
    assert found is not None
    python, layers = build_layers(name)
    left_out: list[str] = []
    if pypi_only:
        kept = []
        for layer in layers:
            left_out += [line for line in layer.lines if not from_pypi(line) and line not in left_out]
            lines = tuple(line for line in layer.lines if from_pypi(line))
            if lines:
                kept.append(Layer(lines, layer.upgrade, layer.no_deps))
        layers = tuple(kept)
    platform = image_platform(found)

    def run(command: list[str], step: int) -> None:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT, check=False, env=_pypi_environment()
            )
        except subprocess.TimeoutExpired as exc:
            raise NotResolved(f"{name}: install step {step} not resolved within {RESOLVE_TIMEOUT:.0f} s") from exc
        if done.returncode != 0:
            raise NotResolved(f"{name}: install step {step} of {len(layers)} does not resolve:\n{done.stderr[-3000:]}")

    # `--python` this interpreter: uv then looks for no interpreter of `python`'s version, which
    # on a machine with pyenv shims took 10 s and more per compile (each shim run and refused).
    target = ["--python", sys.executable, "--python-version", python, "--python-platform", platform]
    if len(layers) == 1:  # one request: no preferences to carry, the output is the environment
        (folder / "layer-1.in").write_text("".join(line + "\n" for line in layers[0].lines), encoding="utf-8")
        run([uv, "pip", "compile", "--quiet", *target, str(folder / "layer-1.in"), "-o", str(folder / "out.txt")], 1)
        versions = pinned_versions((folder / "out.txt").read_text(encoding="utf-8"))
        return Resolution(name, python, platform, 1, versions, (), tuple(left_out))
    resolved = resolve_layers(uv, list(layers), target, folder, run)
    return Resolution(name, python, platform, len(layers), resolved.versions, resolved.replaced, tuple(left_out))


def asked_names(name: str) -> set[str]:
    """The distributions the build of `name` asks for by name, in any of its steps."""
    _, layers = build_layers(name)
    lines = [line.split(";")[0] for layer in layers for line in layer.lines if from_pypi(line)]
    return {re.sub(r"[-_.]+", "-", re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0]).lower() for line in lines}
