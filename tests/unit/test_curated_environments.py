"""Curated Azure ML environments by name: the shipped table, how a job's reference resolves
(both reference forms, versions, unknown names with the close ones), its specification
translated for a machine without CUDA, the image Kubernetes runs, and config.yaml winning."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from distrun.core.errors import Position
from distrun.environments.conda_spec import read_conda_data
from distrun.environments.curated import (
    BUILD_SETTING,
    close_names,
    cpu_conda_file,
    curated_layers,
    curated_note,
    find_curated,
    image_platform,
    table,
)


def test_the_table_records_its_commit_and_an_image_per_environment() -> None:
    data = table()
    assert len(data["commit"]) == 40 and data["source"] == "https://github.com/Azure/azureml-assets"
    assert {"sklearn-1.5", "acpt-pytorch-2.2-cuda12.1", "tensorflow-2.16-cuda12"} <= set(data["environments"])
    for name, entry in data["environments"].items():
        assert entry["image"] == f"mcr.microsoft.com/azureml/curated/{name}:{entry['version']}"
        assert entry["path"].startswith("assets/training/") and "/environments/" in entry["path"]


@pytest.mark.parametrize(
    ("reference", "asked"),
    [
        ("azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest", None),
        ("azureml:azureml-ACPT-pytorch-2.2-cuda12.1:12", "12"),
        ("azureml:acpt-pytorch-2.2-cuda12.1", None),
        ("azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/labels/latest", None),
        ("azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/versions/31", "31"),
    ],
)
def test_reference_forms_and_versions_resolve_to_the_tables_entry(reference: str, asked: str | None) -> None:
    found = find_curated(reference)
    assert found is not None
    assert (found.name, found.version, found.asked_version) == ("acpt-pytorch-2.2-cuda12.1", "latest", asked)
    assert found.image == "mcr.microsoft.com/azureml/curated/acpt-pytorch-2.2-cuda12.1:latest"
    assert found.commit == table()["commit"]


def test_unknown_names_say_so_with_the_close_ones() -> None:
    assert find_curated("azureml:AzureML-sklearn-1.6@latest") is None
    assert close_names("azureml:AzureML-sklearn-1.6@latest")[0] == "sklearn-1.5"
    assert find_curated("azureml://registries/someone-else/environments/sklearn-1.5/labels/latest") is None
    note = curated_note("azureml:AzureML-sklearn-1.6@latest")
    assert "is neither a curated Azure ML environment distrun knows (close: sklearn-1.5" in note
    # A user's own name (not written as a curated one) gets no curated suggestions.
    assert curated_note("azureml:sklearn-1.6:3").endswith(
        "environment azureml:sklearn-1.6:3 is neither a curated Azure ML environment distrun knows nor named in "
        "config.yaml (environments:)"
    )
    versioned = curated_note("azureml:AzureML-sklearn-1.5:7")
    assert "curated sklearn-1.5:latest (version 7 resolved to the table's latest)" in versioned
    assert f"{BUILD_SETTING}=build builds its specification" in versioned


def test_cuda_specification_becomes_its_cpu_build_each_change_said() -> None:
    spec = {
        "dependencies": [
            "python=3.10",
            "openssl",
            "pandas=2.2.2",
            {
                "pip": [
                    "--extra-index-url https://download.pytorch.org/whl/cu126",
                    "torch==2.10.0+cu126",
                    "onnxruntime-gpu>=1.17",
                    "tensorflow[and-cuda]==2.16.2",
                    "nvidia-nccl-cu12==2.21.5",
                    "transformers>=5.0.0",
                ]
            },
        ]
    }
    cpu, changes = cpu_conda_file(spec, cuda=False)
    request, problems = read_conda_data(cpu, Path.cwd(), "curated", lambda *p: Position("curated"), "environment")
    assert problems == [] and request is not None
    assert request.python == "3.10"
    assert request.lines() == [
        "pandas==2.2.2.*",
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        "torch==2.10.0",
        "onnxruntime>=1.17",
        "tensorflow==2.16.2",
        "transformers>=5.0.0",
    ]
    assert changes == [
        "left out conda package openssl (system software the image provides)",
        "https://download.pytorch.org/whl/cu126 -> https://download.pytorch.org/whl/cpu",
        "torch==2.10.0+cu126 -> torch==2.10.0 (the CPU build)",
        "onnxruntime-gpu>=1.17 -> onnxruntime>=1.17",
        "tensorflow[and-cuda]==2.16.2 -> tensorflow==2.16.2",
        "left out nvidia-nccl-cu12==2.21.5 (CUDA only)",
    ]
    gpu, said = cpu_conda_file(spec, cuda=True)
    assert gpu["dependencies"][-1] == spec["dependencies"][-1]  # with CUDA, the wheels stay
    assert said == ["left out conda package openssl (system software the image provides)"]


def test_every_table_entry_translates_without_problems() -> None:
    for name, entry in table()["environments"].items():
        for cuda in (True, False):
            data, _ = cpu_conda_file(entry["conda_file"], cuda)
            where = Position(name)
            request, problems = read_conda_data(data, Path.cwd(), name, lambda *p, at=where: at, "environment")
            assert problems == [] and request is not None and request.python, (name, cuda)
    sklearn = find_curated("azureml:AzureML-sklearn-1.5@latest")
    assert sklearn is not None
    request, _ = read_conda_data(sklearn.conda_file, Path.cwd(), "x", lambda *p: Position("x"), "environment")
    assert request is not None and request.python == "3.10"
    assert {"scikit-learn~=1.5.0", "pandas~=1.5.3", "azureml-mlflow"} <= set(request.lines())


def test_a_mapping_in_config_yaml_wins_over_the_curated_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distrun.environments.resolve import rank_python

    monkeypatch.setenv(BUILD_SETTING, "build")
    (tmp_path / "config.yaml").write_text(f"environments:\n  sklearn-1.5:\n    python: {sys.executable}\n")
    found, problems = rank_python(
        "azureml://registries/azureml/environments/sklearn-1.5/labels/latest",
        tmp_path,
        tmp_path,
        lambda *p: Position("job.yml"),
    )
    assert problems == [] and found is not None
    assert found.target is None and found.description == f"sklearn-1.5: {sys.executable}"


def test_kubernetes_runs_a_curated_name_in_its_image_when_nothing_names_another() -> None:
    from distrun.backends.kubernetes.pods import job_image
    from distrun.backends.kubernetes.target import KubernetesSettings
    from distrun.spec.models import JobSpec

    job = JobSpec.model_validate({"command": "echo", "environment": "azureml:AzureML-sklearn-1.5@latest"})
    assert job_image(job, KubernetesSettings()) == "mcr.microsoft.com/azureml/curated/sklearn-1.5:latest"
    assert job_image(job, KubernetesSettings(image="mine:1")) == "mine:1"
    assert job_image(job, KubernetesSettings(), named_image="mapped:2") == "mapped:2"


def test_packages_that_only_talk_to_the_azure_ml_service_are_left_out_each_said() -> None:
    sklearn = find_curated("azureml:AzureML-sklearn-1.5@latest")
    assert sklearn is not None
    for cuda in (True, False):
        data, changes = cpu_conda_file(sklearn.conda_file, cuda)
        request, _ = read_conda_data(data, Path.cwd(), "x", lambda *p: Position("x"), "environment")
        assert request is not None
        names = {line.split("~")[0].split("=")[0] for line in request.lines()}
        assert not names & {"azureml-core", "azureml-defaults", "azureml-mlflow", "azureml-telemetry"}, names
        assert {"scikit-learn", "pandas", "azureml-inference-server-http"} <= names
        assert "left out azureml-core (it only talks to the Azure ML service)" in changes
        # What azureml-mlflow brings that a job's `import mlflow` uses is kept: MLflow's client.
        assert "mlflow-skinny" in names
        assert (
            "azureml-mlflow -> mlflow-skinny (it only talks to the Azure ML service; mlflow-skinny, which it brings, "
            "is kept)" in changes
        )
    spec = {"dependencies": ["python=3.10", {"pip": ["azureml_core==1.60.0", "azure-ai-ml[designer]>=1.2", "numpy"]}]}
    data, changes = cpu_conda_file(spec, cuda=True)
    assert data["dependencies"][-1] == {"pip": ["numpy"]}
    assert changes == [
        "left out azureml_core==1.60.0 (it only talks to the Azure ML service)",
        "left out azure-ai-ml[designer]>=1.2 (it only talks to the Azure ML service)",
    ]
    # A specification that asks for MLflow itself keeps its own and gets no second one.
    spec = {"dependencies": ["python=3.10", {"pip": ["azureml-mlflow", "mlflow==2.18.0"]}]}
    data, changes = cpu_conda_file(spec, cuda=True)
    assert data["dependencies"][-1] == {"pip": ["mlflow==2.18.0"]}
    assert changes == ["left out azureml-mlflow (it only talks to the Azure ML service)"]


def test_a_later_install_step_of_the_same_package_replaces_the_earlier_one() -> None:
    spec = {
        "dependencies": [
            "python=3.10",
            {"pip": ["distributed~=2021.10.0", "--extra-index-url https://x", "numpy", "Distributed>=2026.1.0"]},
        ]
    }
    data, changes = cpu_conda_file(spec, cuda=True)
    assert data["dependencies"][-1] == {"pip": ["--extra-index-url https://x", "numpy", "Distributed>=2026.1.0"]}
    assert changes == ["distributed~=2021.10.0 -> Distributed>=2026.1.0 (a later install step of the image)"]
    lightgbm = find_curated("azureml:AzureML-lightgbm-3.3@latest")
    assert lightgbm is not None
    data, _ = cpu_conda_file(lightgbm.conda_file, cuda=False)
    [pip] = [dep["pip"] for dep in data["dependencies"] if isinstance(dep, dict)]
    assert [line for line in pip if line.startswith("distributed")] == ["distributed>=2026.1.0"]


def test_every_pip_line_of_the_table_is_a_requirement_or_an_option() -> None:
    # A shell redirection (`pip install ... 2> /dev/null`) once came through as the packages `2` and `>`.
    for name, entry in table()["environments"].items():
        for dep in entry["conda_file"]["dependencies"]:
            for line in dep.get("pip", []) if isinstance(dep, dict) else []:
                assert line.startswith("-") or re.match(r"^[A-Za-z0-9._-]*[A-Za-z][A-Za-z0-9._-]*", line), (name, line)


def test_the_table_records_the_images_install_steps_in_order() -> None:
    # ai-ml-automl: torch and friends, the AutoML packages, then `pip install --upgrade
    # 'distributed>=2026.1.0' ...` past their dask<=2023.2.0, then four `--no-deps` steps.
    automl = find_curated("azureml:AzureML-ai-ml-automl@latest")
    assert automl is not None
    pips = [layer for layer in automl.layers if "pip" in layer]
    firsts = [layer["pip"][0] for layer in pips]
    assert firsts.index("py-cpuinfo==5.0.0") < firsts.index("azureml-core") < firsts.index("distributed>=2026.1.0")
    upgrade = pips[firsts.index("distributed>=2026.1.0")]
    assert upgrade.get("upgrade") is True and not upgrade.get("no_deps"), upgrade
    assert pips[-1] == {"pip": ["pandas==2.0.0"], "no_deps": True}, pips[-1]
    # An ACPT image's torch (its tag's `torch280`) is its first layer, whatever later steps do.
    grpo = find_curated("azureml:AzureML-acft-group-relative-policy-optimization@latest")
    assert grpo is not None and grpo.layers[0] == {"pip": ["torch==2.8.0"]}, grpo.layers[0]
    # conda's packages are a layer before the conda file's `pip:` list, as conda installs them.
    sklearn = find_curated("azureml:AzureML-sklearn-1.0@latest")
    assert sklearn is not None and [list(layer) for layer in sklearn.layers] == [["conda"], ["pip"]]


def test_a_curated_build_has_the_images_steps_as_layers_without_the_service_packages() -> None:
    automl = find_curated("azureml:AzureML-ai-ml-automl@latest")
    assert automl is not None
    layers, changes = curated_layers(automl, cuda=False)
    lines = [line for layer in layers for line in layer.lines]
    assert "distributed>=2026.1.0" in lines and not [line for line in lines if line.startswith("azureml-core")]
    assert "left out azureml-core (it only talks to the Azure ML service)" in changes, changes
    assert [layer.no_deps for layer in layers][-4:] == [True] * 4
    assert any(layer.upgrade and "distributed>=2026.1.0" in layer.lines for layer in layers)
    # One install step: one request, no layers.
    serve = find_curated("azureml:AzureML-foundation-model-serve@latest")
    assert serve is not None and curated_layers(serve, cuda=False) == ((), [])


def test_the_platform_of_an_image_is_its_ubuntus_glibc() -> None:
    platforms = {
        name: image_platform(found)
        for name in ("acft-rft-training", "sklearn-1.0", "sklearn-1.5", "tensorflow-2.16-cuda12")
        if (found := find_curated(f"azureml:AzureML-{name}@latest")) is not None
    }
    assert platforms == {
        "acft-rft-training": "x86_64-manylinux_2_35",
        "sklearn-1.0": "x86_64-manylinux_2_31",
        "sklearn-1.5": "x86_64-manylinux_2_39",
        "tensorflow-2.16-cuda12": "x86_64-manylinux_2_28",
    }


def test_each_layer_is_one_compile_preferring_what_came_before(tmp_path: Path) -> None:
    from distrun.environments.layered import Layer, compile_command, pinned_versions, resolve_layers

    command = compile_command(
        "uv", Layer(("--no-index", "Dask[complete]>=1", "x_y"), upgrade=True), tmp_path, tmp_path, []
    )
    assert command[-2:] == ["--upgrade-package=dask", "--upgrade-package=x-y"], command
    assert "--no-deps" in compile_command("uv", Layer(("a==1",), no_deps=True), tmp_path, tmp_path, [])
    assert pinned_versions("# via x\nDask[complete]==2026.1.0\n    # via y\nx_y==1.0 ; python_version > '3'\n") == {
        "dask": "2026.1.0",
        "x-y": "1.0",
    }
    # What each compile finds in its output file first (its preferences), and what it is given
    # back: a stand-in for uv that answers from a table (the real uv runs in test_curated_resolution).
    answers = {1: "a==1\nshared==1\n", 2: "later==1\nshared==2\n", 3: "b==1\nc==1\n"}
    seen: dict[int, str] = {}

    def run(argv: list[str], step: int) -> None:
        output = Path(argv[argv.index("-o") + 1])
        seen[step] = output.read_text()
        output.write_text(answers[step])

    layers = [
        Layer(("a",)),
        Layer(("later",), upgrade=True),
        Layer(("b==1",), no_deps=True),
        Layer(("c==1",), no_deps=True),
    ]
    resolved = resolve_layers("uv", layers, [], tmp_path, run)
    assert seen == {1: "", 2: "a==1\nshared==1\n", 3: ""}, seen  # the two exact --no-deps steps: one compile
    assert resolved.versions == {"a": "1", "shared": "2", "later": "1", "b": "1", "c": "1"}
    assert resolved.replaced == ("shared 1 -> 2 (install step 2)",)


def test_layers_are_part_of_the_cache_key_and_their_flags_reach_the_installer(tmp_path: Path) -> None:
    from distrun.environments.conda_spec import EnvRequest, Requirement, cache_key
    from distrun.environments.installer import Installer
    from distrun.environments.layered import Layer

    lines = ("tensorflow==2.16.2", "protobuf>=5.29.6")
    plain = EnvRequest("3.11", tuple(map(Requirement, lines)), tmp_path, "x")
    layered = replace(plain, layers=(Layer(lines[:1]), Layer(lines[1:], upgrade=True)))
    assert cache_key(plain, "3.11") != cache_key(layered, "3.11")
    no_upgrade = replace(layered, layers=(Layer(lines[:1]), Layer(lines[1:])))
    assert cache_key(layered, "3.11") != cache_key(no_upgrade, "3.11")
    assert cache_key(plain, "3.11") == cache_key(replace(plain, origin="y"), "3.11")
    uv = Installer("uv", "/bin/uv").install(tmp_path, tmp_path / "r.txt", ("--no-deps",))
    pip = Installer("pip", None).install(tmp_path, tmp_path / "r.txt", ("--upgrade",))
    assert uv[-3:] == ["-r", str(tmp_path / "r.txt"), "--no-deps"] and pip[-1] == "--upgrade", (uv, pip)


def test_the_build_note_says_the_image_is_built_layer_by_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUILD_SETTING, "build")
    note = curated_note("azureml:AzureML-ai-ml-automl@latest")
    assert "resolved and installed layer by layer as the image's 9 install steps are" in note, note
    assert "left out azureml-core (it only talks to the Azure ML service)" in note, note
    assert "layer by layer" not in curated_note("azureml:AzureML-foundation-model-serve@latest")
