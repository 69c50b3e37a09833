"""Data on distrun: datastores, other jobs' outputs (YAML and SDK), data assets, URL inputs."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support.data_servers import FileServer, file_server, s3_server
from support.sdk import sdk_env

__all__ = ["file_server", "s3_server", "sdk_env"]  # fixtures, imported for pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]
WriteJob = Callable[..., Path]


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_datastore_output_feeds_the_next_job_in_yaml(run_cli: RunCli, write_job: WriteJob, distrun_home: Path) -> None:
    prep = write_job(
        """
        name: prep_1
        command: echo 1 2 3 > ${{outputs.prepared}}/train.txt && echo done > ${{outputs.log}}/log.txt
        outputs:
          prepared:
            type: uri_folder
            path: azureml://datastores/workspaceblobstore/paths/cifar/${{name}}/
          log:
            type: uri_folder
        """
    )
    ok(run_cli("run", str(prep)))
    written = distrun_home / "datastores" / "workspaceblobstore" / "cifar" / "prep_1" / "train.txt"
    assert written.read_text() == "1 2 3\n"

    train = write_job(
        """
        command: cat ${{inputs.by_path}}/train.txt ${{inputs.by_job}}/train.txt ${{inputs.log}}/log.txt
        inputs:
          by_path:
            type: uri_folder
            path: azureml://datastores/workspaceblobstore/paths/cifar/prep_1
          by_job:
            type: uri_folder
            path: azureml://jobs/prep_1/outputs/prepared
            mode: download
          log:
            type: uri_folder
            path: azureml://subscriptions/s/resourcegroups/r/workspaces/w/datastores/x/paths/../../
        """
    )
    refused = run_cli("run", str(train))
    assert refused.returncode == 2 and "leaves the datastore with '..'" in refused.stderr

    train.write_text(
        train.read_text().replace(
            "azureml://subscriptions/s/resourcegroups/r/workspaces/w/datastores/x/paths/../../",
            "azureml://jobs/prep_1/outputs/log",
        )
    )
    out = ok(run_cli("run", str(train)))
    assert out.count("1 2 3") == 2 and "done" in out

    missing = write_job(
        """
        command: ls ${{inputs.data}}
        inputs:
          data: {type: uri_folder, path: "azureml://jobs/prep_1/outputs/nope"}
        """
    )
    result = run_cli("job", "validate", "-f", str(missing))
    assert result.returncode == 2 and "job prep_1 has no output 'nope' (its outputs: log, prepared)" in result.stderr


def test_datastore_folder_from_config(run_cli: RunCli, write_job: WriteJob, distrun_home: Path, tmp_path: Path) -> None:
    shared = tmp_path / "nfs"
    distrun_home.mkdir(parents=True)
    (distrun_home / "config.yaml").write_text(f"datastores:\n  shared: {shared}\n")
    job = write_job(
        """
        command: echo saved > ${{outputs.model}}
        outputs:
          model: {type: uri_file, path: "azureml://datastores/shared/paths/models/${{name}}/model.txt"}
        """
    )
    ok(run_cli("run", str(job), "--name", "save_1"))
    assert (shared / "models" / "save_1" / "model.txt").read_text() == "saved\n"


def test_sdk_two_job_chaining_with_returned_output_path(sdk_env: Path) -> None:
    from distrun import Input, MLClient, Output, command

    client = MLClient()
    prep = command(
        command="echo cifar > ${{outputs.cifar}}/batch.txt",
        outputs={"cifar": Output(type="uri_folder", mode="rw_mount")},
    )
    returned = client.jobs.create_or_update(prep)
    client.jobs.stream(returned.name)
    path = client.jobs.get(returned.name).outputs.cifar.path
    assert path == f"azureml://jobs/{returned.name}/outputs/cifar"

    train = command(
        command="cat ${{inputs.cifar}}/batch.txt > ${{outputs.seen}}/seen.txt",
        inputs={"cifar": Input(type="uri_folder", path=path)},
        outputs={"seen": Output(type="uri_folder", path="azureml://datastores/workspaceblobstore/paths/${{name}}/")},
    )
    second = client.jobs.create_or_update(train)
    client.jobs.stream(second.name)
    done = client.jobs.get(second.name)
    assert done.status == "Completed"
    assert done.outputs.seen.path == f"azureml://datastores/workspaceblobstore/paths/{second.name}/"
    seen = Path(client.layout.home) / "datastores" / "workspaceblobstore" / second.name / "seen.txt"
    assert seen.read_text() == "cifar\n"


def test_data_asset_from_an_azure_ml_data_file_with_overrides(run_cli: RunCli, tmp_path: Path) -> None:
    folder = tmp_path / "setup"
    (folder / "images").mkdir(parents=True)
    (folder / "more").mkdir()
    data_file = folder / "data.yml"
    data_file.write_text(
        "$schema: https://azuremlschemas.azureedge.net/latest/data.schema.json\n"
        "name: cifar10\nversion: 1\ntype: uri_folder\npath: ./images\ndescription: CIFAR-10\ntags: {a: b}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    created = json.loads(ok(run_cli("data", "create", "-f", str(data_file), "-o", "json", cwd=elsewhere)))
    # The file's relative path starts at the file's folder, not at the shell's.
    assert (created["name"], created["version"], created["path"]) == ("cifar10", "1", str(folder / "images"))
    assert created["description"] == "CIFAR-10"
    again = json.loads(
        ok(
            run_cli(
                "data", "create", "--file", str(data_file), "--set", "version=2", "--set", "path=./more", "-o", "json"
            )
        )
    )
    assert (again["version"], again["path"]) == ("2", str(folder / "more"))

    data_file.write_text("name: cifar10\npath: ./images\nlocal_path: ./images\n")
    wrong = run_cli("data", "create", "-f", str(data_file))
    assert wrong.returncode == 2 and f"{data_file}:3:" in wrong.stderr
    assert "local_path: unknown key of a data asset" in wrong.stderr and "Traceback" not in wrong.stderr


def test_data_asset_versions_and_output_registration(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path, tmp_path: Path
) -> None:
    for version, text in (("1", "first"), ("2", "second")):
        folder = tmp_path / f"v{version}"
        folder.mkdir()
        (folder / "data.txt").write_text(text)
        created = json.loads(
            ok(run_cli("data", "create", "--name", "cifar", "--version", version, "--path", str(folder), "-o", "json"))
        )
        assert created["path"] == str(folder) and created["type"] == "uri_folder"
    again = run_cli("data", "create", "--name", "cifar", "--version", "2", "--path", str(tmp_path / "v1"))
    assert again.returncode == 2 and "already has version 2" in again.stderr
    wrong = run_cli("data", "create", "--name", "one", "--type", "uri_file", "--path", str(tmp_path / "v1"))
    assert wrong.returncode == 2 and "use type uri_folder" in wrong.stderr
    assert [a["version"] for a in json.loads(ok(run_cli("data", "list", "--name", "cifar", "-o", "json")))] == [
        "1",
        "2",
    ]
    assert (
        json.loads(ok(run_cli("data", "show", "--name", "cifar", "--label", "latest", "-o", "json")))["version"] == "2"
    )
    # For people by default: one FIELD VALUE line each, the time readable.
    shown = ok(run_cli("data", "show", "--name", "cifar"))
    assert shown.split("\n")[0].split() == ["FIELD", "VALUE"] and ["version", "2"] in [
        r.split() for r in shown.split("\n")
    ]
    assert re.search(r"^created_at +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", shown, re.M)

    job = write_job(
        """
        name: uses_assets
        command: cat ${{inputs.old}}/data.txt ${{inputs.new}}/data.txt && echo trained > ${{outputs.model}}/w.txt
        inputs:
          old: {type: uri_folder, path: "azureml:cifar:1"}
          new: {type: uri_folder, path: "azureml:cifar@latest", mode: download}
        outputs:
          model: {type: uri_folder, name: cifar-model}
        """
    )
    out = ok(run_cli("run", str(job)))
    assert "firstsecond" in out.replace("\n", "")
    registered = json.loads(ok(run_cli("data", "show", "--name", "cifar-model", "-o", "json")))
    assert registered["version"] == "1" and registered["path"] == "azureml://jobs/uses_assets/outputs/model"

    reader = write_job(
        """
        command: cat ${{inputs.model}}/w.txt
        inputs:
          model: {type: uri_folder, path: "azureml:cifar-model@latest"}
          bad: {type: uri_folder, path: "azureml:cifar:7"}
        """
    )
    result = run_cli("run", str(reader))
    assert result.returncode == 2 and "data asset cifar has no version '7' (versions: 1, 2)" in result.stderr
    reader.write_text(reader.read_text().replace('  bad: {type: uri_folder, path: "azureml:cifar:7"}\n', ""))
    assert "trained" in ok(run_cli("run", str(reader)))


def test_http_input_is_downloaded_once_resumed_and_revalidated(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path, file_server: FileServer
) -> None:
    body = bytes(range(256)) * 8192  # 2 MiB
    file_server.files["/data/train.bin"] = body
    file_server.cut_after["/data/train.bin"] = 700_000
    url = file_server.url("/data/train.bin")
    job = write_job(
        f"""
        command: >-
          python -c "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())"
          ${{{{inputs.data}}}}
        inputs:
          data: {{type: uri_file, path: "{url}", mode: download}}
        """
    )
    first = run_cli("run", str(job))
    assert first.returncode == 2 and "stopped at 700000 of 2097152 bytes" in first.stderr  # the server broke off
    second = run_cli("run", str(job))
    assert hashlib_of(body) in ok(second)
    assert "(resumed)" in second.stderr
    statuses = [(status, wanted) for path, status, wanted in file_server.log]
    assert statuses[:2] == [(200, ""), (206, "bytes=700000-")]
    [meta_file] = (distrun_home / "cache" / "urls").glob("*/meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["sha256"] == hashlib_of(body) and meta["size"] == len(body) and meta["complete"]

    third = run_cli("run", str(job))  # revalidated (304), not downloaded again
    assert hashlib_of(body) in ok(third) and "downloading" not in third.stderr
    assert file_server.log[-1][1] == 304

    folder_job = write_job(
        f"""
        command: ls ${{{{inputs.data}}}}
        inputs:
          data: {{type: uri_folder, path: "{url}"}}
        """
    )
    assert "train.bin" in ok(run_cli("run", str(folder_job)))  # ro_mount: the cache folder itself

    gone = write_job(
        f"""
        command: echo never
        inputs:
          data: {{type: uri_file, path: "{file_server.url("/missing.bin")}"}}
        """
    )
    result = run_cli("run", str(gone))
    assert result.returncode == 2 and "HTTP 404" in result.stderr and "Traceback" not in result.stderr
    names = [n for n in json.loads(ok(run_cli("job", "list", "-o", "json")))]
    failed = [n for n in names if n["status"] == "Failed"]
    assert any("HTTP 404" in (n["reason"] or "") for n in failed)


def hashlib_of(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_s3_input_through_fsspec(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path, s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    credentials = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server,
        **{"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"},
    )
    s3.create_bucket(Bucket="datasets")
    s3.put_object(Bucket="datasets", Key="mnist/a.txt", Body=b"alpha")
    s3.put_object(Bucket="datasets", Key="mnist/sub/b.txt", Body=b"beta")
    env = {**credentials, "FSSPEC_S3_ENDPOINT_URL": s3_server}
    job = write_job(
        """
        command: cat ${{inputs.data}}/a.txt ${{inputs.data}}/sub/b.txt ${{inputs.one}}
        inputs:
          data: {type: uri_folder, path: "s3://datasets/mnist"}
          one: {type: uri_file, path: "s3://datasets/mnist/a.txt", mode: download}
        """
    )
    out = ok(run_cli("run", str(job), env=env))
    assert "alphabetaalpha" in out.replace("\n", "")
    again = run_cli("run", str(job), env=env)
    assert "fetching" not in ok(again) + again.stderr  # unchanged objects: the cached copy


def test_remote_scheme_without_its_plugin_names_the_package(run_cli: RunCli, write_job: WriteJob) -> None:
    job = write_job(
        """
        command: echo never
        inputs:
          data: {type: uri_folder, path: "gs://bucket/data"}
        """
    )
    result = run_cli("job", "validate", "-f", str(job))
    assert result.returncode == 2
    assert "gs:// inputs are read through fsspec with gcsfs" in result.stderr and "pip install gcsfs" in result.stderr


def test_sdk_data_assets(sdk_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distrun import Input, MLClient, command
    from distrun.entities import Data

    client = MLClient()
    first = client.data.create_or_update(Data(name="samples", path="./data", type="uri_folder"))
    assert (first.version, first.path) == ("1", str(sdk_env / "data"))
    (sdk_env / "more").mkdir()
    (sdk_env / "more" / "sample.txt").write_text("4 5 6\n")
    second = client.create_or_update(Data(name="samples", path="./more"))
    assert second.version == "2" and client.data.get("samples", label="latest").path == str(sdk_env / "more")
    assert [d.version for d in client.data.list("samples")] == ["1", "2"]

    job = command(
        command="cat ${{inputs.old}}/sample.txt ${{inputs.new}}/sample.txt",
        inputs={"old": Input(path=first.id), "new": Input(path="azureml:samples@latest")},
    )
    client.jobs.stream(client.jobs.create_or_update(job).name)  # raises if the job failed
    out = capsys.readouterr().out
    assert out.index("1 2 3") < out.index("4 5 6")


def test_url_mirror_makes_an_unchanged_job_and_sdk_script_read_the_local_copy(
    sdk_env: Path, file_server: FileServer, run_cli: RunCli
) -> None:
    """The job names the server's URL and an Azure blob (wasbs://, whose plugin adlfs is not
    installed here); `url_mirrors` points both at one folder, and nothing is fetched."""
    copy = sdk_env / "mirror"
    (copy / "iris").mkdir(parents=True)
    (copy / "iris" / "iris.csv").write_text("sepal,petal\n")
    prefix = file_server.url("/datasets/")
    wasbs = "wasbs://datasets@azuremlexamples.blob.core.windows.net/"
    ok(run_cli("data", "mirror", "add", prefix, str(copy)))
    ok(run_cli("data", "mirror", "add", wasbs, str(copy)))
    job = sdk_env / "job.yml"
    job.write_text(
        f"""
command: cat ${{{{inputs.iris}}}} && ls ${{{{inputs.folder}}}}
inputs:
  iris: {{type: uri_file, path: "{prefix}iris/iris.csv"}}
  folder: {{type: uri_folder, path: "{wasbs}iris/"}}
"""
    )
    planned = ok(run_cli("plan", str(job)))
    assert f"input iris: {prefix}iris/iris.csv -> {copy / 'iris' / 'iris.csv'}  (local copy by url_mirrors" in planned
    assert f"input folder: {wasbs}iris/ -> {copy / 'iris'}  (local copy by url_mirrors" in planned
    out = ok(run_cli("run", str(job)))
    assert "sepal,petal" in out and "iris.csv" in out

    from distrun import Input, MLClient, command

    client = MLClient()
    returned = client.jobs.create_or_update(
        command(command="cat ${{inputs.iris}}", inputs={"iris": Input(type="uri_file", path=f"{prefix}iris/iris.csv")})
    )
    client.jobs.stream(returned.name)  # raises if the job failed
    assert file_server.log == []  # neither the CLI's job nor the SDK's downloaded anything
    assert not (Path(client.layout.home) / "cache").exists()
