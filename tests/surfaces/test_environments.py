"""conda_file environments: built with uv (or pip) from a local wheel folder, cached by content,
shared safely by concurrent jobs, refused clearly when they cannot be built; each job runs in its
own writable layer over the cached environment, where its `pip install` goes."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from support.jobs import only_job, record
from support.sdk import sdk_env
from support.wheelhouse import make_wheel

__all__ = ["sdk_env"]  # the fixture, imported for pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]
WriteJob = Callable[..., Path]
PROBE = "distrun-probe-pkg"
# The package's version, the file it was imported from (in the cached environment), and
# sys.prefix (the job's own layer over it).
PRINT_PROBE = (
    "python -c \"import distrun_probe_pkg as p, sys; print(p.VALUE, p.__file__); print('prefix', sys.prefix)\""
)
# The environment's console script, run by the job layer's python (its copy in the layer).
AND_SCRIPT = " && distrun-probe"


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    body = "import sys\nVALUE = 'probe-1.0'\n\ndef main():\n    print('script-ok', sys.prefix)\n"
    make_wheel(folder, PROBE, "1.0", body, {"distrun-probe": "distrun_probe_pkg:main"})
    return folder


def conda_job(wheels: Path, requirement: str = f"{PROBE}==1.0", command: str = PRINT_PROBE) -> str:
    return f"""
        command: {command}
        resources: {{instance_count: 2}}
        environment:
          image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04
          conda_file:
            channels: [conda-forge]
            dependencies:
              - python={sys.version_info.major}.{sys.version_info.minor}
              - pip
              - pip:
                  - --no-index
                  - --find-links {wheels}
                  - {requirement}
        """


def built(home: Path) -> list[Path]:
    folder = home / "envs"
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def in_layers(home: Path, output: str, what: str = "prefix") -> int:
    """How many lines say `what` and a job's own layer (`jobs/<name>/env`) as sys.prefix."""
    return len(re.findall(rf"\b{what} {re.escape(str(home))}/jobs/[^/\s]+/env$", output, re.MULTILINE))


def test_probe_package_is_not_in_distruns_environment() -> None:
    # The premise of the tests below: only the built environment can import it.
    assert subprocess.run([sys.executable, "-c", "import distrun_probe_pkg"], capture_output=True).returncode != 0


def test_conda_file_job_runs_in_its_built_environment_and_second_job_reuses_it(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path
) -> None:
    job = write_job(conda_job(wheels, command=PRINT_PROBE + AND_SCRIPT))
    first = run_cli("run", str(job))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "distrun: building environment" in first.stderr
    [env] = built(distrun_home)
    assert first.stdout.count(f"probe-1.0 {env}/lib/") == 2  # both ranks, from the cached environment
    assert in_layers(distrun_home, first.stdout) == 2  # ... in the job's own layer over it
    assert in_layers(distrun_home, first.stdout, "script-ok") == 2
    assert "is kept for image-based backends" not in first.stdout + first.stderr
    manifest = json.loads((env / "distrun-env.json").read_text())
    assert manifest["requirements"][-1] == f"{PROBE}==1.0"
    # Seeded as `python -m venv` seeds one: pip, and setuptools where ensurepip carries it (<= 3.11).
    seeded = {p.name for p in env.glob("lib/python3.*/site-packages/*") if p.name in ("pip", "setuptools")}
    assert seeded == ({"pip", "setuptools"} if sys.version_info < (3, 12) else {"pip"})

    # The same spec written as a file (with -r requirements.txt): same content, same environment.
    folder = job.parent
    (folder / "requirements.txt").write_text(f"{PROBE}==1.0\n")
    (folder / "conda.yml").write_text(
        "dependencies:\n"
        f"  - python={sys.version_info.major}.{sys.version_info.minor}\n"
        "  - pip:\n"
        "      - --no-index\n"
        f"      - --find-links {wheels}\n"
        "      - -r requirements.txt\n"
    )
    (folder / "job2.yml").write_text(
        f"command: {PRINT_PROBE}\nenvironment:\n  conda_file: conda.yml\n  image: some/image:1\n"
    )
    second = run_cli("run", str(folder / "job2.yml"))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "building environment" not in second.stderr
    assert "(cached)" in second.stderr
    assert f"probe-1.0 {env}/lib/" in second.stdout
    assert built(distrun_home) == [env]

    listed = run_cli("env", "list", "-o", "json")
    assert [e["key"] for e in json.loads(listed.stdout)["built"]] == [env.name]
    shown = run_cli("env", "show", env.name[:8], "-o", "json")
    assert json.loads(shown.stdout)["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    readable = run_cli("environment", "show", env.name[:8]).stdout  # as `az ml`; for people by default
    assert ["python", f"{sys.version_info.major}.{sys.version_info.minor}"] in [
        r.split() for r in readable.splitlines()
    ]
    pruned = run_cli("env", "prune", "--all")
    assert pruned.returncode == 0 and f"removed {env.name}" in pruned.stdout
    assert built(distrun_home) == []


def test_a_jobs_pip_install_lands_in_its_own_layer_and_the_cached_environment_stays_as_built(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path, tmp_path: Path
) -> None:
    # `pip install -r requirements.txt` in a job's command (many Azure ML examples): a package
    # the cached environment lacks, and a newer version of one it has. A `pip` earlier on
    # distrun's PATH than anything else stands for the user's or distrun's own: the job must
    # never reach it.
    make_wheel(wheels, "distrun-late-pkg", "2.0", "VALUE = 'late-2.0'\n")
    make_wheel(wheels, PROBE, "2.0", "VALUE = 'probe-2.0'\n")
    trap = tmp_path / "users-bin"
    (trap / "pip").parent.mkdir()
    (trap / "pip").write_text("#!/bin/sh\necho 'the wrong pip' >&2\nexit 9\n")
    (trap / "pip").chmod(0o755)
    show = (
        "import distrun_probe_pkg as p, importlib.util as u, sys; "
        "late = u.find_spec('distrun_late_pkg'); print('late', late and late.origin); "
        "print(p.VALUE, p.__file__); print('prefix', sys.prefix)"
    )
    command = (
        f"python -m pip --version && pip install --no-index --find-links {wheels} distrun-late-pkg {PROBE}==2.0 "
        f'&& python -c "{show}"'
    )
    job = write_job(conda_job(wheels, command=command).replace("instance_count: 2", "instance_count: 1"))
    result = run_cli("run", str(job), env={"PATH": f"{trap}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stdout + result.stderr
    [env] = built(distrun_home)
    layer = distrun_home / "jobs" / only_job(distrun_home) / "env"
    assert f"from {env}/lib/" in result.stdout  # the cached environment's pip, run by the layer's python
    assert f"late {layer}/lib/" in result.stdout  # installed into the job's layer
    assert f"probe-2.0 {layer}/lib/" in result.stdout  # the newer one, in the layer, shadows the cached one
    assert f"prefix {layer}\n" in result.stdout
    assert "the wrong pip" not in result.stdout + result.stderr

    # The cached environment: read-only (pip as any user but root could not have written there),
    # untouched and still sealed as built.
    # (distrun's own two files at its top, the manifest and the last-used time, are left out.)
    entries = [env / "bin", env / "lib"]
    entries += [
        Path(folder, name) for top in entries for folder, dirs, files in os.walk(top) for name in (*dirs, *files)
    ]
    writable = [
        p for p in entries if not p.is_symlink() and p.lstat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    ]
    assert entries and writable == []
    assert not list(env.glob("lib/python*/site-packages/distrun_late_pkg*"))
    assert [p.name for p in env.glob("lib/python*/site-packages/distrun_probe_pkg-*")] == [
        "distrun_probe_pkg-1.0.dist-info"
    ]
    from distrun.environments.builder import seal_broken

    assert seal_broken(env) is None

    # The next job with the same spec: the cached environment as it was built, no rebuild.
    job = write_job(conda_job(wheels, command=f'python -c "{show}"').replace("instance_count: 2", "instance_count: 1"))
    second = run_cli("run", str(job))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "late None" in second.stdout
    assert f"probe-1.0 {env}/lib/" in second.stdout
    assert "(cached)" in second.stderr
    assert "building" not in second.stderr and "was changed" not in second.stderr
    assert built(distrun_home) == [env]
    # Nothing reached distrun's own environment.
    assert subprocess.run([sys.executable, "-c", "import distrun_late_pkg"], capture_output=True).returncode != 0


def test_broken_requirement_fails_naming_it_and_leaves_nothing(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path
) -> None:
    job = write_job(conda_job(wheels, requirement="distrun-no-such-pkg==9.9"))
    result = run_cli("run", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "requirement 'distrun-no-such-pkg==9.9'" in result.stderr
    assert f"{job}:" in result.stderr  # where it was written
    assert "Traceback" not in result.stderr
    assert built(distrun_home) == []
    assert not list((distrun_home / "envs").glob(".build-*"))
    job_record = record(distrun_home, only_job(distrun_home))
    assert job_record["status"] == "Failed" and "distrun-no-such-pkg" in job_record["reason"]


def test_conda_only_package_and_missing_python_are_refused_before_anything_starts(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path
) -> None:
    job = write_job(
        """
        command: python -c "print(1)"
        environment:
          conda_file:
            dependencies:
              - python=3.2
              - cudatoolkit=11.3
              - pip:
                  - numpy
        """
    )
    result = run_cli("run", str(job))
    assert result.returncode == 2
    assert "'cudatoolkit=11.3' is a conda-only package" in result.stderr
    assert f"{job}:7:" in result.stderr  # the line of that dependency
    assert "python 3.2 is not available on this machine" in result.stderr  # every problem at once
    assert "RunId" not in result.stdout
    assert not (distrun_home / "envs").exists()

    job = write_job(
        """
        command: python -c "print(1)"
        environment:
          conda_file: {dependencies: [python=3.2, {pip: [numpy]}]}
        """
    )
    result = run_cli("job", "validate", "-f", str(job))
    assert result.returncode == 2
    assert "python 3.2 is not available on this machine" in result.stderr
    assert "environment.conda_file" in result.stderr


def test_concurrent_jobs_share_one_build(
    start_cli: Callable[..., subprocess.Popen[str]], write_job: Callable[..., Path], wheels: Path, distrun_home: Path
) -> None:
    job = write_job(conda_job(wheels))
    procs = [start_cli("run", str(job)) for _ in range(3)]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output
    [env] = built(distrun_home)
    assert all(output.count(f"probe-1.0 {env}") == 2 for output in outputs)
    assert sum("distrun: building environment" in output for output in outputs) == 1
    assert not list((distrun_home / "envs").glob(".build-*"))


def test_named_environment_from_env_create(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path
) -> None:
    folder = write_job("command: echo unused\n").parent
    (folder / "env.yml").write_text(
        "name: old-stack\nversion: 3\nimage: some/image:1\nconda_file:\n  dependencies:\n"
        f"    - pip:\n      - --no-index\n      - --find-links {wheels}\n      - {PROBE}\n"
    )
    created = run_cli("env", "create", "--file", str(folder / "env.yml"))
    assert created.returncode == 0, created.stderr
    (folder / "job.yml").write_text(f"command: {PRINT_PROBE}\nenvironment: azureml:old-stack:3\n")
    result = run_cli("run", str(folder / "job.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    [env] = built(distrun_home)
    assert f"probe-1.0 {env}" in result.stdout

    # An existing interpreter named in config.yaml is used as is, nothing built.
    assert run_cli("env", "create", "--name", "system", "--python", sys.executable).returncode == 0
    (folder / "job.yml").write_text(
        'command: python -c "import sys; print(sys.executable)"\nenvironment: azureml:system@latest\n'
    )
    result = run_cli("run", str(folder / "job.yml"))
    assert result.returncode == 0 and built(distrun_home) == [env]


def test_pip_installer_builds_the_same_environment(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path
) -> None:
    job = write_job(conda_job(wheels, command=PRINT_PROBE + AND_SCRIPT))
    result = run_cli("run", str(job), env={"DISTRUN_ENV_INSTALLER": "pip"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "with pip" in result.stderr
    [env] = built(distrun_home)
    assert json.loads((env / "distrun-env.json").read_text())["installer"] == "pip"
    assert result.stdout.count(f"probe-1.0 {env}/lib/") == 2
    assert in_layers(distrun_home, result.stdout, "script-ok") == 2


def test_v1_sdk_environments_from_pip_requirements_and_conda_specification(
    sdk_env: Path, wheels: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from distrun.v1 import Environment, Experiment, ScriptRunConfig, Workspace

    (sdk_env / "src" / "probe.py").write_text(
        "import distrun_probe_pkg\nprint(distrun_probe_pkg.VALUE, distrun_probe_pkg.__file__)\n"
    )
    (sdk_env / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\n{PROBE}==1.0\n")
    (sdk_env / "conda.yml").write_text(
        f"dependencies:\n  - python={sys.version_info.major}.{sys.version_info.minor}\n"
        "  - pip:\n      - -r requirements.txt\n"
    )
    for env in (
        Environment.from_pip_requirements("probe-pip", "requirements.txt"),
        Environment.from_conda_specification("probe-conda", "conda.yml"),
    ):
        src = ScriptRunConfig(source_directory="./src", script="probe.py", environment=env)
        details = Experiment(Workspace(), "envs").submit(src).wait_for_completion(show_output=True)
        assert details["status"] == "Completed"
    home = Path(os.environ["DISTRUN_HOME"])
    [built_env] = built(home)  # one spec, written two ways: one environment
    assert capsys.readouterr().out.count(f"probe-1.0 {built_env}") == 2


def test_v2_sdk_registered_environment(sdk_env: Path, wheels: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distrun import MLClient, command
    from distrun.entities import Environment

    (sdk_env / "conda.yml").write_text(
        f"dependencies:\n  - pip:\n      - --no-index\n      - --find-links {wheels}\n      - {PROBE}==1.0\n"
    )
    client = MLClient()
    client.environments.create_or_update(Environment(name="probe-env", version="2", conda_file="conda.yml"))
    assert client.environments.get("probe-env", version="2").conda_file == str(sdk_env / "conda.yml")
    job = command(command=PRINT_PROBE, environment="azureml:probe-env:2")
    client.jobs.stream(client.jobs.create_or_update(job).name)
    [env] = built(Path(os.environ["DISTRUN_HOME"]))
    assert f"probe-1.0 {env}" in capsys.readouterr().out


def test_conda_dependencies_become_pip_requirements(tmp_path: Path) -> None:
    from distrun.core.errors import Position
    from distrun.environments.conda_spec import cache_key, read_conda_data

    (tmp_path / "wheels").mkdir()
    data = {
        "dependencies": [
            "python=3.10",
            "pip",
            "pytorch::pytorch=2.1",
            "numpy==1.26.4",
            "scipy>=1.11",
            "pandas 2.1.*",
            "conda-forge::py-xgboost=2.0=cuda_1",
            {"pip": ["--find-links ./wheels", "mlflow==2.9.2"]},
        ]
    }
    request, problems = read_conda_data(data, tmp_path, "<test>", lambda *p: Position("<test>"), "")
    assert problems == [] and request is not None
    assert request.python == "3.10"
    assert request.lines() == [
        "torch==2.1.*",
        "numpy==1.26.4",
        "scipy>=1.11",
        "pandas==2.1.*",
        "xgboost==2.0.*",
        f"--find-links {tmp_path / 'wheels'}",
        "mlflow==2.9.2",
    ]
    # The key is the content: the same lines give the same key, one more line another.
    again, _ = read_conda_data(data, tmp_path, "<other>", lambda *p: Position("<other>"), "")
    assert again is not None and cache_key(again, "3.10") == cache_key(request, "3.10")
    assert cache_key(request, "3.10") != cache_key(request, "3.11")


def test_docker_build_context_of_pip_steps_runs_in_its_built_environment_with_its_env_values(
    run_cli: RunCli, write_job: WriteJob, wheels: Path, distrun_home: Path
) -> None:
    job = write_job(
        f"""
        command: {PRINT_PROBE} && echo "greeting=$GREETING"
        environment:
          build:
            path: docker-context
        """
    )
    context = job.parent / "docker-context"
    context.mkdir()
    shutil.copytree(wheels, context / "wheels")  # a build sees only its context's files
    (context / "requirements.txt").write_text(f"--no-index\n--find-links ./wheels\n{PROBE}==1.0\n")
    (context / "Dockerfile").write_text(
        f"FROM python:{sys.version_info.major}.{sys.version_info.minor}-slim\n"
        "ENV GREETING=hello PATH=/opt/venv/bin:$PATH\n"
        "COPY wheels wheels\n"
        "COPY requirements.txt .\n"
        "RUN pip install --no-cache-dir -r requirements.txt && rm requirements.txt\n"
        'CMD ["bash"]\n'
    )
    planned = run_cli("plan", str(job))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    [runs_in] = [line for line in planned.stdout.splitlines() if line.startswith("runs in: ")]
    assert runs_in.startswith("runs in: build context docker-context/Dockerfile, built as a uv environment")
    result = run_cli("run", str(job))
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert said.count("environment.build: built as a uv environment from Dockerfile's pip steps") == 1
    [env] = built(distrun_home)
    assert f"cache key {env.name[:12]}: {env} " in runs_in
    assert f"probe-1.0 {env}/lib/" in result.stdout
    assert "greeting=hello" in result.stdout

    (context / "Dockerfile").write_text("FROM python:3.10\nRUN apt-get update && apt-get install -y curl\n")
    refused = run_cli("run", str(job))
    assert refused.returncode == 2
    assert f"{context / 'Dockerfile'}:2: environment.build: RUN apt-get update is not a pip or conda install" in (
        refused.stderr
    )


def test_plan_says_what_a_curated_name_runs_in_with_and_without_building_it(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path
) -> None:
    from distrun.environments.curated import BUILD_SETTING, table

    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    [name, *_] = [
        n for n, e in table()["environments"].items() if e["conda_file"]["dependencies"][0] == f"python={own}"
    ]
    job = write_job(f"command: echo hi\nenvironment: azureml://registries/azureml/environments/{name}/labels/latest\n")
    image = f"mcr.microsoft.com/azureml/curated/{name}:latest"
    kept = run_cli("plan", str(job))
    assert kept.returncode == 0, kept.stderr
    assert f"runs in: distrun's own Python ({sys.executable}); " in kept.stdout
    assert f"is curated {name}:latest (image {image}; {BUILD_SETTING}=build builds its specification)" in kept.stdout
    building = run_cli("plan", str(job), env={BUILD_SETTING: "build"})
    assert building.returncode == 0, building.stderr
    assert f"runs in: curated {name}:latest (image {image}); its specification (azureml-assets " in building.stdout
    assert "built as a uv environment -> cache key " in building.stdout
    assert f"curated {name}:latest (image {image}), built as a uv environment from its specification" in building.stdout
    assert not (distrun_home / "envs").exists()  # plan builds nothing
