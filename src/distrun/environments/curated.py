"""Azure ML's curated training environments by name: their image and their Python packages.

The facts live in `curated_environments.json`, shipped with distrun and regenerated from the
Azure/azureml-assets repository by `scripts/curated_environments.py` (it records the commit it
read). A job names one as `azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest`,
`azureml:sklearn-1.5:3` or `azureml://registries/azureml/environments/sklearn-1.5/labels/latest`;
any version (or `@latest`) resolves to the one the table has, since the repository publishes
each environment's latest build only.

Image backends run the image; elsewhere the specification is built like a conda file, step by
step where the image installs it in several steps (`curated_layers`, `layered`). On a
machine without an NVIDIA driver, CUDA wheels and the PyTorch CUDA package index are swapped for
their CPU builds (`cpu_conda_file`), and conda packages the image provides as system software
(openssl, CUDA toolkits) are left out, each change said.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from distrun.core.errors import Position
from distrun.environments.conda_spec import CONDA_ONLY, read_conda_data
from distrun.environments.layered import Layer
from distrun.environments.named import reference_name
from distrun.environments.own_layer import IN_OWN_LAYER

TABLE = "curated_environments.json"
_PREFIX = re.compile(r"^azureml-", re.IGNORECASE)
_CUDA_INDEX = re.compile(r"(https://download\.pytorch\.org/whl/)(cu\d+|rocm[\d.]+)/?$")
_CUDA_LOCAL = re.compile(r"\+(cu\d+|rocm[\d.]+)$")
# CUDA-only distributions and the CPU one that stands in for each ("" drops it: the CPU build of
# the framework needs none).
_CPU_NAMES = {"onnxruntime-gpu": "onnxruntime", "tensorflow[and-cuda]": "tensorflow", "faiss-gpu": "faiss-cpu"}
_CUDA_ONLY_PREFIXES = ("nvidia-", "cupy-cuda", "triton", "flash-attn", "flash_attn", "apex", "bitsandbytes")
# Packages whose only use is talking to the Azure ML service (its workspace, run history, data
# store, model registry), left out of every build: distrun is the service here (its own MLflow
# tracking server, data and outputs). Unpinned, they also make the resolver backtrack:
# `azureml-core` to 1.0.45, whose ruamel-yaml 0.15.89 does not compile on a current Python.
AZURE_SERVICE_ONLY = frozenset(
    {
        "azureml-core",
        "azureml-defaults",
        "azureml-mlflow",
        "azureml-telemetry",
        "azureml-dataset-runtime",
        "azureml-dataprep",
        "azureml-pipeline-core",
        "azureml-contrib-services",
        "azureml-model-management-sdk",
        "azure-ml-component",
        "azure-ai-ml",
        "azure-ml",
    }
)
# What a left-out package brings that a job uses here too: azureml-mlflow installs MLflow's client
# (`import mlflow` in a job of that image), which distrun's own tracking server answers.
_SERVICE_ONLY_BRINGS = {"azureml-mlflow": ("mlflow-skinny", ("mlflow", "mlflow-skinny"))}


@dataclass(frozen=True)
class Curated:
    """One curated environment, as the table has it."""

    name: str
    version: str  # the table's version (what `@latest` and any other version resolve to)
    asked_version: str | None  # what the job asked for, when it named one
    image: str
    conda_file: dict[str, Any]
    commit: str  # the azureml-assets commit the table was read at
    path: str  # its folder in azureml-assets
    base_image: str = ""  # the image the Dockerfile starts FROM, without its tag
    # The image's install steps in the Dockerfile's order (`{"pip": [...], "upgrade": true}`,
    # `{"conda": [...]}`): pip lets each replace what earlier ones installed, past what their
    # packages pin, so an image of more than one step is resolved layer by layer (`layered`).
    layers: tuple[dict[str, Any], ...] = ()

    @property
    def origin(self) -> str:
        return f"curated environment {self.name} (azureml-assets {self.path} at {self.commit[:12]})"


@cache
def table() -> dict[str, Any]:
    text = resources.files("distrun.environments").joinpath(TABLE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def curated_key(reference: str) -> tuple[str, str | None] | None:
    """The curated name and version a reference asks for, or None when it cannot name one (a
    registry other than `azureml`): `azureml:AzureML-NAME@latest` -> (NAME, None)."""
    text = reference.strip()
    if text.startswith("azureml://registries/") and not text.startswith("azureml://registries/azureml/"):
        return None
    name, version = reference_name(text)
    return _PREFIX.sub("", name), version


def find_curated(reference: str) -> Curated | None:
    """The curated environment `reference` names, or None."""
    key = curated_key(reference)
    if key is None:
        return None
    environments = table()["environments"]
    found = {name.lower(): name for name in environments}.get(key[0].lower())
    if found is None:
        return None
    entry = environments[found]
    return Curated(
        name=found,
        version=str(entry["version"]),
        asked_version=key[1],
        image=str(entry["image"]),
        conda_file=entry["conda_file"],
        commit=str(table()["commit"]),
        path=str(entry["path"]),
        base_image=str(entry.get("base_image") or ""),
        layers=tuple(entry.get("layers") or ()),
    )


def looks_curated(reference: str) -> bool:
    """Written as Azure ML writes a curated name: `azureml:AzureML-...` or the `azureml` registry."""
    text = reference.strip()
    return text.startswith("azureml://registries/azureml/") or bool(re.match(r"^azureml:azureml-", text, re.I))


def close_names(reference: str, count: int = 3) -> list[str]:
    """The curated names closest to what `reference` asks for (difflib), for a name distrun does not know."""
    import difflib  # only for a name distrun does not know: not on every run's import path

    key = curated_key(reference)
    if key is None:
        return []
    names = list(table()["environments"])
    lowered = {name.lower(): name for name in names}
    return [lowered[m] for m in difflib.get_close_matches(key[0].lower(), list(lowered), n=count, cutoff=0.5)]


def cpu_conda_file(conda_file: dict[str, Any], cuda: bool) -> tuple[dict[str, Any], list[str]]:
    """The specification to build on this machine, and each change made to it, in words.

    Conda packages the image provides as system software are always left out (a virtual
    environment cannot hold them), and so are pip packages that only talk to the Azure ML
    service (`AZURE_SERVICE_ONLY`); without CUDA (`cuda` False), CUDA wheels and index URLs
    become their CPU builds, and CUDA-only distributions are left out."""
    changes: list[str] = []
    dependencies: list[Any] = []
    for dep in conda_file.get("dependencies") or []:
        if isinstance(dep, dict):
            kept = _without_service_only([str(line) for line in dep.get("pip") or []], changes)
            lines = [_cpu_pip_line(line, changes) if not cuda else line for line in _later_steps_win(kept, changes)]
            dependencies.append({"pip": [line for line in lines if line]})
            continue
        name = re.split(r"[=<>!~ ]", str(dep).split("::")[-1], maxsplit=1)[0].lower()
        if name in CONDA_ONLY or name.startswith(("lib", "_", "r-")):
            changes.append(f"left out conda package {dep} (system software the image provides)")
            continue
        dependencies.append(dep)
    return {**conda_file, "dependencies": dependencies}, changes


def curated_layers(found: Curated, cuda: bool) -> tuple[tuple[Layer, ...], list[str]]:
    """The image's install steps as distrun builds them here (each as `cpu_conda_file` makes
    it), when there is more than one: then they are resolved and installed layer by layer; and
    the changes made to them, in words. ((), []) for an image of one step, built as one request."""
    if len(found.layers) < 2:
        return (), []
    where = Position(found.origin)
    out = []
    changes: list[str] = []
    for layer in found.layers:
        pip = [str(line) for line in layer.get("pip") or ()]
        data, said = cpu_conda_file({"dependencies": [*map(str, layer.get("conda") or ()), {"pip": pip}]}, cuda)
        changes += [change for change in said if change not in changes]
        request, _problems = read_conda_data(data, Path.cwd(), found.origin, lambda *p: where, "environment")
        lines = tuple(request.lines()) if request is not None else ()
        if lines:
            out.append(Layer(lines, upgrade=bool(layer.get("upgrade")), no_deps=bool(layer.get("no_deps"))))
    return tuple(out), changes


# The glibc of the Ubuntu release a base image is built on, as the wheel platform it takes.
_UBUNTU_GLIBC = {"20.04": "2_31", "22.04": "2_35", "24.04": "2_39"}


def image_platform(found: Curated) -> str:
    """The wheel platform of the image (`x86_64-manylinux_2_35` for an Ubuntu 22.04 base), for
    resolving its packages as the image takes them; `x86_64-manylinux_2_28` where the base image's
    name says no Ubuntu release (nvcr.io/nvidia/cuda, whose tag the table does not keep)."""
    match = re.search(r"ubuntu(\d\d)\.?(\d\d)", found.base_image)
    glibc = _UBUNTU_GLIBC.get(f"{match.group(1)}.{match.group(2)}") if match else None
    return f"x86_64-manylinux_{glibc or '2_28'}"


def _distribution(line: str) -> str:
    """`Azure_ML-x[extra]>=1` -> `azure-ml-x`; an option line (`--index-url ...`) -> ""."""
    if line.strip().startswith("-"):
        return ""
    return re.split(r"[=<>!~;\[ @]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _later_steps_win(lines: list[str], changes: list[str]) -> list[str]:
    """One line per distribution, the last one's: the image's later `pip install` steps upgrade
    what earlier ones installed (security fixes: `distributed~=2021.10.0`, then
    `distributed>=2026.1.0`), where one request holding both cannot be satisfied."""
    last = {_distribution(line): index for index, line in enumerate(lines) if _distribution(line)}
    kept = []
    for index, line in enumerate(lines):
        name = _distribution(line)
        if name and last[name] != index:
            changes.append(f"{line} -> {lines[last[name]]} (a later install step of the image)")
            continue
        kept.append(line)
    return kept


def _without_service_only(lines: list[str], changes: list[str]) -> list[str]:
    """`lines` less the packages that only talk to the Azure ML service, each said; what one of
    them brings that a job uses here (`_SERVICE_ONLY_BRINGS`) is kept in its place."""
    present = {_distribution(line) for line in lines}
    kept: list[str] = []
    for line in lines:
        name = _distribution(line)
        if name not in AZURE_SERVICE_ONLY:
            kept.append(line)
            continue
        brought, already = _SERVICE_ONLY_BRINGS.get(name, ("", ()))
        if brought and not present & set(already):
            changes.append(
                f"{line} -> {brought} (it only talks to the Azure ML service; {brought}, which it brings, is kept)"
            )
            kept.append(brought)
            present.add(brought)
            continue
        changes.append(f"left out {line} (it only talks to the Azure ML service)")
    return kept


def _cpu_pip_line(line: str, changes: list[str]) -> str:
    words = line.split()
    if len(words) == 2 and words[0] in ("--index-url", "--extra-index-url"):
        match = _CUDA_INDEX.match(words[1])
        if match:
            changes.append(f"{words[1]} -> {match.group(1)}cpu")
            return f"{words[0]} {match.group(1)}cpu"
        return line
    name = re.split(r"[=<>!~; ]", line, maxsplit=1)[0].lower()
    if name in _CPU_NAMES:
        replaced = _CPU_NAMES[name] + line[len(name) :]
        changes.append(f"{line} -> {replaced}")
        return replaced
    if name.startswith(_CUDA_ONLY_PREFIXES):
        changes.append(f"left out {line} (CUDA only)")
        return ""
    stripped = _CUDA_LOCAL.sub("", line)
    if stripped != line:
        changes.append(f"{line} -> {stripped} (the CPU build)")
    return stripped


BUILD_SETTING = "DISTRUN_CURATED_ENVIRONMENTS"


def build_curated() -> bool:
    """Whether local, Slurm and Ray jobs build a curated name's specification (`build`), or run
    in distrun's own Python as before (the default: an ACPT specification is gigabytes of wheels)."""
    import os

    return os.environ.get(BUILD_SETTING, "").strip().lower() == "build"


def cuda_here() -> bool:
    """This machine has an NVIDIA driver (its `nvidia-smi`): CUDA wheels are of use here."""
    import shutil

    return shutil.which("nvidia-smi") is not None


def curated_note(reference: str) -> str:
    """What `run` and `plan` say once about a name config.yaml does not map."""
    import sys

    found = find_curated(reference)
    if found is None:
        # Close names for what is written as a curated name (a typo, a retired one); a user's own
        # name gets none (and `run` imports no difflib for it).
        close = close_names(reference) if looks_curated(reference) else []
        also = f" (close: {', '.join(close)})" if close else ""
        return (
            f"local compute runs in this Python environment ({sys.executable}), {IN_OWN_LAYER}; environment "
            f"{reference} is neither "
            f"a curated Azure ML environment distrun knows{also} nor named in config.yaml (environments:)"
        )
    version = _version_words(found)
    if build_curated():
        layers, changes = curated_layers(found, cuda_here())
        if not layers:
            changes = cpu_conda_file(found.conda_file, cuda_here())[1]
        said = f"; for this machine: {'; '.join(changes)}" if changes else ""
        if layers:
            said += (
                f"; resolved and installed layer by layer as the image's {len(layers)} install steps are, each later "
                "step replacing what earlier ones chose where it must, past their packages' pins (pip in the image "
                "does the same, with a warning); the build says each replacement"
            )
        return (
            f"environment {reference}: curated {found.name}{version} (image {found.image}), built as a uv "
            f"environment from its specification in azureml-assets at {found.commit[:12]}{said}"
        )
    return (
        f"local compute runs in this Python environment ({sys.executable}), {IN_OWN_LAYER}; environment "
        f"{reference} is the "
        f"curated {found.name}{version} (image {found.image}), kept for image-based backends; "
        f"{BUILD_SETTING}=build builds its specification as a uv environment"
    )


def _version_words(found: Curated) -> str:
    if found.asked_version is None or found.asked_version == found.version:
        return f":{found.version}"
    return f":{found.version} (version {found.asked_version} resolved to the table's {found.version})"
