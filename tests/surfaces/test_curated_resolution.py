"""Curated Azure ML environments resolve when asked to build (`DISTRUN_CURATED_ENVIRONMENTS=build`).

Each specification, as distrun builds it on this machine (no NVIDIA driver: its CPU build, and
without the packages that only talk to the Azure ML service), is resolved by `uv pip compile`
against PyPI, with the pins of the image's later install steps as overrides (as the build has
them): resolved, not installed (an ACPT one is gigabytes of wheels). Without the
left-out packages, sklearn-1.5's unpinned `azureml-core` made uv backtrack to azureml-core
1.0.45, whose ruamel-yaml 0.15.89 does not compile.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from distrun.core.errors import Position
from distrun.environments.conda_spec import read_conda_data
from distrun.environments.curated import AZURE_SERVICE_ONLY, cpu_conda_file, curated_overrides, find_curated, table
from distrun.environments.installer import uv_binary

# The module's tests share one resolution of every environment (`resolutions`, module-scoped):
# on one worker, so that the network-bound resolution runs once per suite, not once per worker.
pytestmark = pytest.mark.xdist_group("curated_resolution")

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


# The curated environments whose packages come from elsewhere than PyPI, which this machine
# cannot reach, and where they come from: they are not resolved here.
NOT_FROM_PYPI = {
    "acft-draft-model-training": "a git repository (SpecForge)",
    "acft-hf-nlp-gpu": "the PyTorch index",
    "acft-medimageinsight-adapter-finetune": "the PyTorch index",
    "acft-medimageinsight-embedding": "the PyTorch index",
    "acft-medimageparse-3d-finetune": "the PyTorch index",
    "acft-medimageparse-finetune": "the PyTorch index",
    "acft-mmdetection-image-gpu": "the PyTorch index",
    "acft-mmtracking-video-gpu": "the PyTorch index",
    "acft-multimodal-gpu": "the PyTorch index",
    "acpt-automl-image-framework-selector-gpu": "the PyTorch index",
    "acpt-pytorch-2.2-cuda12.1": "the PyTorch index",
    "acpt-pytorch-2.8-cuda12.6": "the PyTorch index",
    "ai-ml-automl-dnn-text-gpu": "the PyTorch index",
    "ai-ml-automl-dnn-text-gpu-ptca": "the onnxruntime-cuda-12 index of aiinfra.pkgs.visualstudio.com",
    "automl-gpu": "a spaCy model archive at aka.ms",
    "slime-pytorch-2.9-cuda12.8": "the PyTorch index",
}
# From PyPI, but no single resolution holds them yet, even with the later steps' pins as
# overrides: a later step's package brings dependencies past an earlier package's pins (uv
# overrides the later step's own pins, not what they pull in), which the image's step-by-step
# pip install allows.
NOT_RESOLVED_YET = {
    "acft-group-relative-policy-optimization": "vllm 0.20.1 needs torch 2.11; the base image's torch is 2.8, which "
    "the later step upgrades",
    "acft-rft-training": "sglang 0.5.11 and vllm 0.22.0, installed in separate steps, pin flashinfer-cubin "
    "0.6.8.post1 and 0.6.11.post2 (and sglang 0.5.11 has manylinux_2_34 wheels only)",
    "ai-ml-automl": "distributed>=2026.1.0 needs dask 2026; azureml-train-automl-runtime pins dask<=2023.2.0",
    "ai-ml-automl-dnn": "distributed>=2026.1.0 needs dask 2026; azureml-train-automl-runtime pins dask<=2023.2.0",
    "ai-ml-automl-dnn-forecasting-gpu": "distributed>=2026.1.0 needs dask 2026; azureml-train-automl-runtime pins "
    "dask<=2023.2.0",
    "ai-ml-automl-dnn-gpu": "distributed>=2026.1.0 needs dask 2026; azureml-train-automl-runtime pins dask<=2023.2.0",
    "ai-ml-automl-dnn-vision-gpu": "azureml-automl-dnn-vision pins numpy<=1.22.3 and pycocotools 2.0.6; the file "
    "asks numpy 1.23 and pycocotools 2.0.4",
    "ai-ml-automl-gpu": "distributed>=2026.1.0 needs dask 2026; azureml-train-automl-runtime pins dask<=2023.2.0",
    "automl-dnn-vision-gpu": "the numpy pins of azureml-responsibleai and azureml-automl-runtime leave no solution "
    "with the file's numpy 1.23 and torch 2.10",
}
RESOLVED = sorted(set(table()["environments"]) - set(NOT_FROM_PYPI) - set(NOT_RESOLVED_YET))
WORKERS = 8  # resolution waits on the network, not on this machine's cores


def build_overrides(name: str) -> tuple[str, ...]:
    found = find_curated(f"azureml:AzureML-{name}@latest")
    assert found is not None
    data, _ = cpu_conda_file(found.conda_file, cuda=False)
    return curated_overrides(found, data)


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
    overrides = build_overrides(name)
    if overrides:  # the image's later install steps win over earlier packages' pins, as in a build
        (folder / "overrides.txt").write_text("\n".join(overrides) + "\n", encoding="utf-8")
        command += ["--override", str(folder / "overrides.txt")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT, check=False)
    assert done.returncode == 0, f"{name} (Python {python}) does not resolve:\n{done.stderr[-3000:]}"
    pinned = _PINNED.findall(lock.read_text(encoding="utf-8"))
    assert pinned or not lines, lock.read_text(encoding="utf-8")  # foundation-model-serve: Python alone
    return {dist.lower().replace("_", "-"): version for dist, version in pinned}


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str] | str]:
    """Every environment of RESOLVED resolved at once, WORKERS at a time: each one's versions, or
    why it did not resolve. Each resolution is bounded by RESOLVE_TIMEOUT, so the whole by
    RESOLVE_TIMEOUT * ceil(len(RESOLVED) / WORKERS)."""

    uv_binary()  # once, before the threads: sysconfig's first reading is not thread-safe

    def one(name: str) -> dict[str, str] | str:
        try:
            return resolve(name, tmp_path_factory.mktemp(name))
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            return str(exc)

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(RESOLVED, pool.map(one, RESOLVED), strict=True))


def test_every_curated_environment_is_resolved_or_named_with_why() -> None:
    pypi = {name for name in table()["environments"] if served_by_pypi(build_lines(name)[1])}
    assert set(table()["environments"]) - pypi == set(NOT_FROM_PYPI), sorted(set(table()["environments"]) - pypi)
    assert not set(NOT_RESOLVED_YET) - pypi and not set(NOT_RESOLVED_YET) & set(NOT_FROM_PYPI)
    assert len(RESOLVED) >= 13, RESOLVED  # 13 resolve, as distrun builds them here


@pytest.mark.parametrize("name", RESOLVED)
def test_a_curated_specification_resolves(name: str, resolutions: dict[str, dict[str, str] | str]) -> None:
    resolved = resolutions[name]
    assert isinstance(resolved, dict), resolved
    # What the specification asks for by name is in the resolution.
    asked = {line.split(";")[0] for line in build_lines(name)[1]}
    names = {re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0].lower().replace("_", "-") for line in asked}
    assert names <= set(resolved), sorted(names - set(resolved))


def test_sklearn_1_5_resolves_without_the_azure_ml_service_packages(
    resolutions: dict[str, dict[str, str] | str],
) -> None:
    # Asked for unpinned, azureml-core was resolved to 1.0.45, whose ruamel-yaml 0.15.89 does not build.
    resolved = resolutions["sklearn-1.5"]
    assert isinstance(resolved, dict), resolved
    assert not set(resolved) & AZURE_SERVICE_ONLY, sorted(set(resolved) & AZURE_SERVICE_ONLY)
    assert resolved["scikit-learn"].startswith("1.5."), resolved["scikit-learn"]
    assert "ruamel-yaml" not in resolved or not resolved["ruamel-yaml"].startswith("0.15."), resolved.get("ruamel-yaml")


def test_tensorflow_2_16_takes_the_protobuf_of_the_images_later_step(
    resolutions: dict[str, dict[str, str] | str],
) -> None:
    # tensorflow 2.16.2 pins protobuf<5; the image's last step upgrades it to >=5.29.6 anyway.
    for name in ("tensorflow-2.16-cuda11", "tensorflow-2.16-cuda12"):
        resolved = resolutions[name]
        assert isinstance(resolved, dict), resolved
        assert resolved["tensorflow"] == "2.16.2" and int(resolved["protobuf"].split(".")[0]) >= 5, resolved
