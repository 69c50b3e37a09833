"""Registered models (`distrun model ...`): one DISTRUN_HOME and one MLflow store for the module,
with MLflow on for the model verbs (their versions are also versions of MLflow's registry)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.mlflow_store import fresh_store

# Their tests share one module-scoped home and trained job: on one worker, so that it is made once per suite.
pytestmark = pytest.mark.xdist_group("models")

MLFLOW_ON = {"DISTRUN_MLFLOW": "1"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("models") / "home"
    fresh_store(home)  # the store mlflow makes, registry tables included
    return home


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_cli_registers_versions_from_a_folder_and_a_model_file_and_mlflow_sees_them(home: Path, work: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return distrun_cli(home, *args, cwd=work, env=MLFLOW_ON)

    write(work / "mlmodel" / "MLmodel", "flavors:\n  python_function: {loader_module: mlflow.sklearn}\n")
    write(work / "mlmodel" / "model.pkl", "weights v1\n")
    write(work / "plain" / "weights.bin", "plain\n")
    model_file = write(
        work / "model.yml",
        """
        $schema: https://azuremlschemas.azureedge.net/latest/model.schema.json
        name: iris
        type: mlflow_model
        path: ./mlmodel
        description: an iris classifier
        tags: {stage: dev}
        properties: {accuracy: "0.9"}
        """,
    )
    first = json.loads(ok(cli("model", "create", "-f", str(model_file), "-o", "json")))
    assert (first["name"], first["version"], first["type"]) == ("iris", "1", "mlflow_model")
    assert first["tags"] == {"stage": "dev"} and first["properties"] == {"accuracy": "0.9"}
    assert first["id"] == "azureml:iris:1" and first["mlflow_version"] == 1
    # A later change of the folder changes nothing registered.
    (work / "mlmodel" / "model.pkl").write_text("weights v2\n")
    assert (Path(first["path"]) / "model.pkl").read_text() == "weights v1\n"

    second = json.loads(
        ok(
            cli(
                "model",
                "create",
                "-n",
                "iris",
                "--path",
                "mlmodel",
                "-v",
                "2.0-rc",
                "-t",
                "mlflow_model",
                "--tags",
                "a=1 b=2",
                "-o",
                "json",
            )
        )
    )
    assert second["version"] == "2.0-rc" and second["tags"] == {"a": "1", "b": "2"}
    taken = failed(cli("model", "create", "-n", "iris", "--path", "mlmodel", "-v", "2.0-rc"))
    assert "already has version 2.0-rc" in taken
    not_mlflow = failed(cli("model", "create", "-n", "iris", "--path", "plain", "-t", "mlflow_model"))
    assert "no MLmodel file" in not_mlflow and "hint:" in not_mlflow
    bad = write(work / "bad.yml", "name: iris\npath: ./plain\ntyep: custom_model\n")
    problem = failed(cli("model", "create", "-f", str(bad)))
    assert f"{bad}:3:1" in problem and "tyep" in problem and "hint:" in problem
    workspace = ("--workspace-name", "ws", "-g", "rg")
    as_az = cli("model", "create", "-n", "plain", "--path", "plain/weights.bin", *workspace, "-o", "json")
    assert "--workspace-name, --resource-group name an Azure ML workspace" in as_az.stderr
    plain = json.loads(ok(as_az))
    assert plain["version"] == "1" and Path(plain["path"]).name == "weights.bin"

    assert json.loads(ok(cli("model", "show", "-n", "azureml:iris@latest", "-o", "json")))["version"] == "2.0-rc"
    shown = json.loads(ok(cli("model", "show", "-n", "iris", "-v", "1", "-o", "json")))
    assert sorted(shown["files"]) == ["MLmodel", "model.pkl"] and shown["files_unchanged"] is True
    listed = json.loads(ok(cli("model", "list", "-o", "json")))
    assert [(m["name"], m["version"]) for m in listed] == [("iris", "1"), ("iris", "2.0-rc"), ("plain", "1")]
    assert "iris" in ok(cli("model", "list", "-n", "iris"))  # the table

    ok(cli("model", "archive", "-n", "azureml:iris:2.0-rc"))
    assert json.loads(ok(cli("model", "show", "-n", "iris", "-l", "latest", "-o", "json")))["version"] == "1"
    assert [m["version"] for m in json.loads(ok(cli("model", "list", "-n", "iris", "-o", "json")))] == ["1"]
    stages = _mlflow_versions(home)
    assert stages[("iris", "2.0-rc")] == "Archived" and stages[("iris", "1")] == "None"
    ok(cli("model", "restore", "-n", "iris", "-v", "2.0-rc"))
    assert _mlflow_versions(home)[("iris", "2.0-rc")] == "None"

    ok(cli("model", "download", "-n", "azureml:iris:1", "-p", str(work / "dl")))
    assert (work / "dl" / "iris" / "model.pkl").read_text() == "weights v1\n"
    assert (work / "dl" / "iris" / "MLmodel").is_file()


def _mlflow_versions(home: Path) -> dict[tuple[str, str], str]:
    """(name, distrun version) -> stage, as MLflow's own client reads its registry."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    found = {}
    for registered in client.search_registered_models():
        for version in client.search_model_versions(f"name='{registered.name}'"):
            assert Path(version.source).is_dir() or Path(version.source).is_file()
            found[(version.name, version.tags["distrun.version"])] = version.current_stage
    return found


@pytest.fixture(scope="module")
def trained(home: Path, work: Path) -> str:
    """A completed job whose output `model` is an MLflow model folder."""
    train = write(
        work / "train.yml",
        """
        command: >-
          echo "flavors: {}" > ${{outputs.model}}/MLmodel && echo trained > ${{outputs.model}}/weights
        outputs:
          model: {type: mlflow_model}
        """,
    )
    ok(distrun_cli(home, "run", str(train), "--name", "train_1", cwd=work))
    return "train_1"


def test_a_jobs_output_registers_shows_on_the_job_and_feeds_a_two_node_job(
    home: Path, work: Path, trained: str
) -> None:
    def cli(*args: str, mlflow: bool = False) -> subprocess.CompletedProcess[str]:
        return distrun_cli(home, *args, cwd=work, env=MLFLOW_ON if mlflow else None)

    made = json.loads(
        ok(
            cli(
                "model",
                "create",
                "-n",
                "trained",
                "-p",
                "azureml://jobs/train_1/outputs/model",
                "-t",
                "mlflow_model",
                "-o",
                "json",
                mlflow=True,
            )
        )
    )
    assert made["job"] == "train_1"
    shown = ok(cli("job", "show", "train_1"))
    assert "Registered as models:" in shown and "azureml:trained:1 from azureml://jobs/train_1/outputs/model" in shown
    assert (
        json.loads(ok(cli("job", "show", "train_1", "-o", "json")))["registered_models"][0]["id"] == "azureml:trained:1"
    )

    use = write(
        work / "use.yml",
        """
        command: cat ${{inputs.model}}/weights
        inputs:
          model: {type: mlflow_model, path: azureml:trained@latest}
        resources: {instance_count: 2}
        """,
    )
    plan = ok(cli("plan", str(use)))
    assert f"input model: azureml:trained@latest -> {made['path']}" in plan
    assert "registered model trained:1 (mlflow_model)" in plan
    ran = ok(cli("run", str(use), "--name", "use_1"))
    assert ran.count("trained") >= 2  # both nodes read it
    pipeline = write(
        work / "pipeline.yml",
        """
        type: pipeline
        outputs:
          final: {type: custom_model}
        jobs:
          train:
            type: command
            command: echo piped > ${{outputs.model}}/weights
            outputs:
              model: ${{parent.outputs.final}}
        """,
    )
    ok(cli("run", str(pipeline), "--name", "pipe_1"))
    final = "azureml://jobs/pipe_1/outputs/final"
    piped = json.loads(ok(cli("model", "create", "-n", "piped", "-p", final, "-o", "json")))
    assert (Path(piped["path"]) / "weights").read_text() == "piped\n" and piped["job"] == "pipe_1"
    registry = write(
        work / "registry.yml",
        """
        command: ls ${{inputs.model}}
        inputs:
          model: {type: custom_model, path: azureml://registries/azureml/models/iris/versions/1}
        """,
    )
    problem = failed(cli("run", str(registry)))
    assert "registry 'azureml', which is not on this machine" in problem and "registry.yml:3:" in problem


def test_sdk_registers_a_jobs_output_object_and_reads_gets_lists_downloads_archives(
    home: Path, work: Path, trained: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrun import MLClient
    from distrun.entities import Model

    monkeypatch.setenv("DISTRUN_MLFLOW", "1")
    monkeypatch.chdir(work)
    ml_client = MLClient(home=home)
    job = ml_client.jobs.get(trained)
    made = ml_client.models.create_or_update(
        Model(name="sdk-model", path=job.outputs.model, type="mlflow_model", tags={"by": "sdk"}, properties={"p": 1})
    )
    assert (made.name, made.version, made.type, made.id) == ("sdk-model", "1", "mlflow_model", "azureml:sdk-model:1")
    assert made.tags == {"by": "sdk"} and made.properties == {"p": "1"}
    assert (Path(made.path) / "weights").read_text() == "trained\n"
    again = ml_client.models.create_or_update(
        Model(name="sdk-model", path=f"azureml://jobs/{trained}/outputs/model", version="best")
    )
    assert again.version == "best" and again.type == "custom_model"
    assert ml_client.models.get("sdk-model", label="latest").version == "best"
    assert ml_client.models.get("sdk-model", version=1).path == made.path
    assert [m.version for m in ml_client.models.list("sdk-model")] == ["1", "best"]
    ml_client.models.archive("sdk-model", version="best")
    assert ml_client.models.get("sdk-model", label="latest").version == "1"
    assert [m.version for m in ml_client.models.list("sdk-model", archived_only=True)] == ["best"]
    ml_client.models.restore("sdk-model", version="best")
    ml_client.models.download("sdk-model", version="1", download_path=work / "sdk-dl")
    assert (work / "sdk-dl" / "sdk-model" / "weights").read_text() == "trained\n"
    with pytest.raises(Exception, match="no version 'nope'"):
        ml_client.models.get("sdk-model", version="nope")


def test_web_ui_models_page_lists_versions_with_their_job_and_files(home: Path, trained: str) -> None:
    from starlette.testclient import TestClient  # the ui extra, installed by scripts/deps/60-ui.sh

    from distrun.store.layout import Layout
    from distrun.ui.app import UiSettings, create_app

    ok(distrun_cli(home, "model", "create", "-n", "ui-model", "-p", f"azureml://jobs/{trained}/outputs/model"))
    app = create_app(UiSettings(layout=Layout(home), token="t0ken"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        assert 'href="/models"' in client.get("/", params={"token": "t0ken"}).text
        page = client.get("/models").text
    section = page[page.index('data-model="ui-model"') :]
    assert '<tr class="model-version" data-version="1" data-archived="no">' in section
    assert f'<a href="/jobs/{trained}">{trained}</a>' in section
    assert "<code>MLmodel</code>, <code>weights</code>" in section and "custom_model" in section
