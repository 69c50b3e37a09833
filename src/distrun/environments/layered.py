"""Resolving an environment layer by layer, as an image's step-by-step `pip install` builds it.

A curated Azure ML image installs its packages in steps (a conda step, then several `pip
install` RUNs, some `--upgrade` or `--no-deps`), and pip lets each step replace what earlier
steps installed: a security upgrade (`distributed>=2026.1.0`) wins over what an earlier package
pins (`dask<=2023.2.0`), with a warning. One request holding every step cannot be satisfied;
the steps one after the other can. Here each layer is one `uv pip compile`, whose output file
is first filled with what the layers before it chose: uv takes an existing output file as its
preferences, so a layer keeps what is installed where that satisfies it (pip's
`only-if-needed`), and moves it where it must, as pip does. An `--upgrade` layer drops the
preferences of the packages it names. The environment is every layer's choices, the later
layer's where two chose one package: installed with `--no-deps`, it is what the image has.

Pure text in, pure text out; the caller runs the commands (`run`), so the builder runs them as
its helper processes and a test runs them with a timeout.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)", re.MULTILINE)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Layer:
    """One install step of an image: its pip lines and how pip was asked to install them."""

    lines: tuple[str, ...]
    upgrade: bool = False  # `pip install --upgrade`: what it names replaces what is installed
    no_deps: bool = False  # `pip install --no-deps`: only what it names


@dataclass(frozen=True)
class Resolved:
    """What a layered resolution chose: each distribution's version, and what later layers replaced."""

    versions: dict[str, str]
    replaced: tuple[str, ...]  # `dask 2023.2.0 -> 2026.8.0 (install step 6)`

    def lines(self) -> list[str]:
        return [f"{name}=={version}" for name, version in sorted(self.versions.items())]


def distribution(line: str) -> str:
    """`Azure_ML-x[extra]>=1` -> `azure-ml-x`; an option line -> ""."""
    match = _NAME.match(line)
    if line.strip().startswith("-") or match is None:
        return ""
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def pinned_versions(text: str) -> dict[str, str]:
    """The `name==version` lines of a compiled requirements file."""
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in _PINNED.findall(text)}


def compile_command(uv: str, layer: Layer, requirements: Path, output: Path, target: list[str]) -> list[str]:
    """The `uv pip compile` of one layer; `target` names the Python it is for (`--python P`, or
    `--python-version V --python-platform X`)."""
    command = [uv, "pip", "compile", "--quiet", *target, str(requirements), "-o", str(output)]
    if layer.no_deps:
        command.append("--no-deps")
    if layer.upgrade:
        command += [f"--upgrade-package={name}" for name in sorted({distribution(line) for line in layer.lines} - {""})]
    return command


def resolve_layers(
    uv: str, layers: list[Layer], target: list[str], folder: Path, run: Callable[[list[str], int], None]
) -> Resolved:
    """Every layer compiled in order in `folder` (`run(command, step)` runs one and raises when
    it fails), each preferring what the layers before it chose. The `--no-deps` layers of exact
    pins (`pandas==2.0.0`), which choose the same whatever came before, are checked together
    in one compile (the first such step's), not one each."""
    versions: dict[str, str] = {}
    replaced: list[str] = []
    fixed = [step for step, layer in enumerate(layers, start=1) if _fixed(layer)]
    pinned: dict[str, str] = {}
    named = [distribution(line) for step in fixed for line in layers[step - 1].lines if distribution(line)]
    if len(fixed) > 1 and len(named) == len(set(named)):  # one package twice: each in its turn
        every = [line for step in fixed for line in layers[step - 1].lines]
        pinned = _compile(uv, Layer(tuple(dict.fromkeys(every)), no_deps=True), {}, target, folder, fixed[0], run)
    for step, layer in enumerate(layers, start=1):
        if pinned and step in fixed:
            chosen = {distribution(line): pinned[distribution(line)] for line in layer.lines if distribution(line)}
        else:
            chosen = _compile(uv, layer, versions, target, folder, step, run)
        for name, version in chosen.items():
            before = versions.get(name)
            if before is not None and before != version:
                replaced.append(f"{name} {before} -> {version} (install step {step})")
            versions[name] = version
    return Resolved(versions, tuple(replaced))


def _fixed(layer: Layer) -> bool:
    """A `--no-deps` layer whose every package is pinned exactly: its choice depends on nothing before it."""
    names = [line for line in layer.lines if distribution(line)]
    return layer.no_deps and bool(names) and all(re.fullmatch(r"[^=<>!~;\s]+==[\w.+!-]+", line) for line in names)


def _compile(
    uv: str,
    layer: Layer,
    preferred: dict[str, str],
    target: list[str],
    folder: Path,
    step: int,
    run: Callable[[list[str], int], None],
) -> dict[str, str]:
    requirements = folder / f"layer-{step}.in"
    requirements.write_text("".join(line + "\n" for line in layer.lines), encoding="utf-8")
    output = folder / f"layer-{step}.txt"
    output.write_text("".join(f"{n}=={v}\n" for n, v in sorted(preferred.items())), encoding="utf-8")
    run(compile_command(uv, layer, requirements, output, target), step)
    return pinned_versions(output.read_text(encoding="utf-8"))
