"""Curated Azure ML environments resolve when asked to build (`DISTRUN_CURATED_ENVIRONMENTS=build`).

Each specification, as distrun builds it on this machine (no NVIDIA driver: its CPU build, and
without the packages that only talk to the Azure ML service), is resolved by `uv pip compile`
against PyPI: resolved, not installed (an ACPT one is gigabytes of wheels). Without the
left-out packages, sklearn-1.5's unpinned `azureml-core` made uv backtrack to azureml-core
1.0.45, whose ruamel-yaml 0.15.89 does not compile.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from distrun.core.errors import Position
from distrun.environments.conda_spec import read_conda_data
from distrun.environments.curated import AZURE_SERVICE_ONLY, cpu_conda_file, find_curated
from distrun.environments.installer import uv_binary

RESOLVE_TIMEOUT = 240  # seconds for one specification: a resolver that backtracks for longer fails
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


def served_by_pypi(lines: list[str]) -> bool:
    """Every requirement comes from PyPI: no other index and no URL (this machine reaches PyPI only)."""
    return not any(line.startswith("-") or "://" in line or line.startswith("git+") for line in lines)


def build_lines(name: str) -> tuple[str, list[str]]:
    """The Python version and the pip lines distrun builds the curated `name` from, here."""
    found = find_curated(f"azureml:AzureML-{name}@latest")
    assert found is not None
    data, _ = cpu_conda_file(found.conda_file, cuda=False)
    where = Position(found.origin)
    request, problems = read_conda_data(data, Path.cwd(), found.origin, lambda *p: where, "environment")
    assert problems == [] and request is not None and request.python, (name, problems)
    return request.python, request.lines()


# The curated environments that resolve from PyPI, as distrun builds them. The others of the
# table are named in docs/environments-and-data.md ("Curated environments that do not resolve")
# with why: their wheels come from the PyTorch index or a git repository, which this machine
# cannot reach, or the image's later `pip install` steps upgrade past an earlier package's pins
# (mlflow 3.11.1 with cryptography 48, fastapi with starlette 1.0), which one request cannot hold.
RESOLVED = [
    "acft-hf-nlp-data-import",
    "acpt-pytorch-1.13-cuda11.7",
    "foundation-model-inference",
    "lightgbm-3.3",
    "mlflow-model-inference",
    "sklearn-1.0",
    "sklearn-1.1",
    "sklearn-1.5",
]


def resolve(name: str, folder: Path) -> dict[str, str]:
    """`uv pip compile` of the curated `name` as built here: each resolved distribution's version."""
    uv = uv_binary()
    assert uv is not None, "uv is one of distrun's test dependencies"
    python, lines = build_lines(name)
    assert served_by_pypi(lines), lines
    requirements = folder / "requirements.in"
    requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lock = folder / "requirements.txt"
    command = [uv, "pip", "compile", "--quiet", "--python-version", python]
    command += ["--python-platform", "x86_64-manylinux_2_28", str(requirements), "-o", str(lock)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT, check=False)
    assert done.returncode == 0, f"{name} (Python {python}) does not resolve:\n{done.stderr[-3000:]}"
    pinned = _PINNED.findall(lock.read_text(encoding="utf-8"))
    assert pinned, lock.read_text(encoding="utf-8")
    return {dist.lower().replace("_", "-"): version for dist, version in pinned}


@pytest.mark.parametrize("name", RESOLVED)
def test_a_curated_specification_resolves(name: str, tmp_path: Path) -> None:
    resolved = resolve(name, tmp_path)
    # What the specification asks for by name is in the resolution.
    asked = {line.split(";")[0] for line in build_lines(name)[1]}
    names = {re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0].lower().replace("_", "-") for line in asked}
    assert names <= set(resolved), sorted(names - set(resolved))


def test_sklearn_1_5_resolves_without_the_azure_ml_service_packages(tmp_path: Path) -> None:
    # Asked for unpinned, azureml-core was resolved to 1.0.45, whose ruamel-yaml 0.15.89 does not build.
    resolved = resolve("sklearn-1.5", tmp_path)
    assert not set(resolved) & AZURE_SERVICE_ONLY, sorted(set(resolved) & AZURE_SERVICE_ONLY)
    assert resolved["scikit-learn"].startswith("1.5."), resolved["scikit-learn"]
    assert "ruamel-yaml" not in resolved or not resolved["ruamel-yaml"].startswith("0.15."), resolved.get("ruamel-yaml")
