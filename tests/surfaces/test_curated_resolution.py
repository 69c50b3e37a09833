"""Curated Azure ML environments resolve when asked to build (`DISTRUN_CURATED_ENVIRONMENTS=build`).

Each specification, as distrun builds it on this machine (no NVIDIA driver: its CPU build, and
without the packages that only talk to the Azure ML service), is resolved by `uv pip compile`
against PyPI for the image's Python and platform (`curated_resolution`): resolved, not
installed (an ACPT one is gigabytes of wheels). An image that installs in several steps is
resolved layer by layer, each step preferring what the steps before it chose and replacing it
where it must, as the image's pip does (ai-ml-automl's `distributed>=2026.1.0` past
azureml-train-automl-runtime's `dask<=2023.2.0`). Without the left-out service packages,
sklearn-1.5's unpinned `azureml-core` made uv backtrack to azureml-core 1.0.45, whose
ruamel-yaml 0.15.89 does not compile. The layered build itself (resolve, then install) runs
here on a folder of local wheels, with uv and with pip.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from distrun.environments.curated import AZURE_SERVICE_ONLY, find_curated, image_platform, table
from distrun.environments.curated_resolution import (
    NotResolved,
    Resolution,
    asked_names,
    build_layers,
    from_pypi,
    resolve_curated,
)
from distrun.environments.installer import uv_binary
from distrun.environments.layered import Layer
from support.wheelhouse import make_wheel

# The module's tests share one resolution of every environment (`resolutions`, module-scoped):
# on one worker, so that the network-bound resolution runs once per suite, not once per worker.
pytestmark = pytest.mark.xdist_group("curated_resolution")


def served_by_pypi(name: str) -> bool:
    """Every requirement of every step comes from PyPI (this machine reaches PyPI only)."""
    return all(from_pypi(line) for layer in build_layers(name)[1] for line in layer.lines)


# The curated environments whose packages come partly from elsewhere than PyPI, which this
# machine cannot reach, and where from: `scripts/curated_environments.py --resolve-all`
# resolves them with that part left out (docs/environments-and-data.md has its dated output).
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
RESOLVED = sorted(set(table()["environments"]) - set(NOT_FROM_PYPI))
# The ones the suite resolves: each case the tests below name (a service package left out, a
# later step's upgrade, a step replacing an earlier one's pin, an image's own platform), and two
# older images (Python 3.9, and 3.8 with torch 1.13). Every resolution is `uv pip compile` over PyPI's
# metadata, one to twenty-one steps, a second to thirty of CPU each: all 22 took 160 s of the
# suite's CPU, acft-rft-training's 21 steps alone 27 s. `python scripts/curated_environments.py
# --resolve-all` resolves every one of the 38 (docs/environments-and-data.md has its dated output).
IN_THE_SUITE = (
    "acpt-pytorch-1.13-cuda11.7",
    "ai-ml-automl",
    "sklearn-1.0",
    "sklearn-1.5",
    "tensorflow-2.16-cuda11",
    "tensorflow-2.16-cuda12",
)
WORKERS = len(IN_THE_SUITE)  # resolution waits on the network, not on this machine's cores


def resolve(name: str, folder: Path) -> Resolution:
    uv = uv_binary()
    assert uv is not None, "uv is one of distrun's test dependencies"
    return resolve_curated(name, uv, folder)


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Resolution | str]:
    """Every environment of IN_THE_SUITE resolved at once, WORKERS at a time: each one's resolution,
    or why it did not resolve. Each `uv pip compile` is bounded by RESOLVE_TIMEOUT."""

    uv_binary()  # once, before the threads: sysconfig's first reading is not thread-safe

    base = tmp_path_factory.mktemp("curated")  # here, not in the threads: mktemp is not thread-safe

    def one(name: str) -> Resolution | str:
        (base / name).mkdir()
        try:
            return resolve(name, base / name)
        except NotResolved as exc:
            return str(exc)

    # The longest chains of install steps first: they set the wall time.
    order = sorted(IN_THE_SUITE, key=lambda name: -len(build_layers(name)[1]))
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(order, pool.map(one, order), strict=True))


def test_every_curated_environment_is_resolved_or_named_with_why() -> None:
    pypi = {name for name in table()["environments"] if served_by_pypi(name)}
    assert set(table()["environments"]) - pypi == set(NOT_FROM_PYPI), sorted(set(table()["environments"]) - pypi)
    assert len(RESOLVED) == 22, RESOLVED  # every environment whose packages all come from PyPI
    assert set(IN_THE_SUITE) <= set(RESOLVED), sorted(set(IN_THE_SUITE) - set(RESOLVED))


@pytest.mark.parametrize("name", IN_THE_SUITE)
def test_a_curated_specification_resolves(name: str, resolutions: dict[str, Resolution | str]) -> None:
    resolved = resolutions[name]
    assert isinstance(resolved, Resolution), resolved
    # What the specification asks for by name, in any step, is in the resolution.
    assert asked_names(name) <= set(resolved.versions), sorted(asked_names(name) - set(resolved.versions))


def test_sklearn_1_5_resolves_without_the_azure_ml_service_packages(
    resolutions: dict[str, Resolution | str],
) -> None:
    # Asked for unpinned, azureml-core was resolved to 1.0.45, whose ruamel-yaml 0.15.89 does not build.
    resolved = resolutions["sklearn-1.5"]
    assert isinstance(resolved, Resolution), resolved
    versions = resolved.versions
    assert not set(versions) & AZURE_SERVICE_ONLY, sorted(set(versions) & AZURE_SERVICE_ONLY)
    assert versions["scikit-learn"].startswith("1.5."), versions["scikit-learn"]
    assert "ruamel-yaml" not in versions or not versions["ruamel-yaml"].startswith("0.15."), versions.get("ruamel-yaml")


def test_tensorflow_2_16_takes_the_protobuf_of_the_images_later_step(
    resolutions: dict[str, Resolution | str],
) -> None:
    # tensorflow 2.16.2 pins protobuf<5; the image's last step upgrades it to >=5.29.6 anyway.
    for name in ("tensorflow-2.16-cuda11", "tensorflow-2.16-cuda12"):
        resolved = resolutions[name]
        assert isinstance(resolved, Resolution), resolved
        versions = resolved.versions
        assert versions["tensorflow"] == "2.16.2" and int(versions["protobuf"].split(".")[0]) >= 5, versions


def test_ai_ml_automl_resolves_step_by_step_as_its_image(resolutions: dict[str, Resolution | str]) -> None:
    # azureml-train-automl-runtime pins dask<=2023.2.0; the image's later `pip install --upgrade
    # distributed>=2026.1.0` replaces it with dask 2026, which one request cannot hold.
    resolved = resolutions["ai-ml-automl"]
    assert isinstance(resolved, Resolution), resolved
    assert resolved.steps >= 8 and resolved.platform == "x86_64-manylinux_2_39", resolved.platform
    versions = resolved.versions
    assert int(versions["dask"].split(".")[0]) >= 2026 and int(versions["distributed"].split(".")[0]) >= 2026
    assert versions["pandas"] == "2.0.0" and versions["azureml-train-automl-runtime"], versions
    assert any(line.startswith("dask 2023.") for line in resolved.replaced), resolved.replaced


def test_acft_rft_is_resolved_for_the_platform_of_its_image() -> None:
    # sglang 0.5.11 has manylinux_2_34 wheels only: the image is Ubuntu 22.04 (glibc 2.35). That
    # the platform reaches the resolution, ai-ml-automl's shows above; acft-rft-training's own
    # resolution (sglang and vllm) is left to `scripts/curated_environments.py --resolve-all`.
    found = find_curated("azureml:AzureML-acft-rft-training@latest")
    assert found is not None and image_platform(found) == "x86_64-manylinux_2_35"


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_layered_environment_builds_as_the_images_steps_install(
    installer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # distrun-early pins distrun-shared<2; a later `--upgrade` step's distrun-later needs
    # distrun-shared>=2 (one request holding both has no solution); a later step's
    # distrun-user keeps the distrun-base 1.0 installed before (2.0 is newer); a `--no-deps`
    # step installs distrun-lone without the distrun-missing it asks for.
    from distrun.environments.builder import BuildTarget, ensure_environment
    from distrun.environments.conda_spec import EnvRequest, Requirement, cache_key
    from distrun.environments.interpreters import find_python

    folder = tmp_path / "wheels"
    make_wheel(folder, "distrun-early", "1.0", "", requires=("distrun-shared<2",))
    for version in ("1.0", "2.0"):
        make_wheel(folder, "distrun-shared", version, "")
        make_wheel(folder, "distrun-base", version, "")
    make_wheel(folder, "distrun-later", "1.0", "", requires=("distrun-shared>=2",))
    make_wheel(folder, "distrun-user", "1.0", "", requires=("distrun-base",))
    make_wheel(folder, "distrun-lone", "1.0", "", requires=("distrun-missing",))
    source = ("--no-index", f"--find-links {folder}")
    layers = (
        Layer((*source, "distrun-early==1.0", "distrun-base==1.0")),
        Layer((*source, "distrun-later"), upgrade=True),
        Layer((*source, "distrun-user")),
        Layer((*source, "distrun-lone==1.0"), no_deps=True),
    )
    monkeypatch.setenv("DISTRUN_ENV_INSTALLER", installer)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = find_python(version)
    assert python is not None
    lines = tuple(dict.fromkeys(line for layer in layers for line in layer.lines))
    request = EnvRequest(version, tuple(map(Requirement, lines)), tmp_path, "test", layers=layers)
    assert cache_key(request, version) != cache_key(EnvRequest(version, request.requirements, tmp_path, "t"), version)
    env = ensure_environment(BuildTarget(request, python, version, cache_key(request, version)), tmp_path / "home")
    shown = subprocess.run(
        [str(env / "bin" / "python"), "-c", LIST_PROBES], capture_output=True, text=True, check=False
    )
    assert json.loads(shown.stdout or "{}") == {
        "distrun-base": "1.0",
        "distrun-early": "1.0",
        "distrun-later": "1.0",
        "distrun-lone": "1.0",
        "distrun-shared": "2.0",
        "distrun-user": "1.0",
    }, shown.stdout + shown.stderr
    assert len(json.loads((env / "distrun-env.json").read_text())["layers"]) == 4


LIST_PROBES = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() "
    "if d.metadata['Name'].startswith('distrun-')}, sort_keys=True))"
)
