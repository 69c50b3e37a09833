"""No host path outside a Docker build context reaches an environment build: distrun's build of a
context without a container engine (a uv environment of its pip steps) refuses every pip form that
names a file or folder elsewhere on this machine, at the Dockerfile's (or requirements file's)
line, before anything is built or recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

FROM = "FROM python:3.11-slim\n"


def _job(write_job, dockerfile: str, files: dict[str, str]) -> Path:
    job = write_job("command: echo hi\nenvironment:\n  build:\n    path: ctx\n")
    context = job.parent / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(FROM + dockerfile)
    for name, text in files.items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).write_text(text)
    return job


@pytest.mark.parametrize(
    ("dockerfile", "files", "named"),
    [
        ("RUN pip install {host}/pkg\n", {}, "{host}/pkg"),
        ("RUN pip install --find-links {host}/wheels probe\n", {}, "{host}/wheels"),
        ("RUN pip install -f {host}/wheels probe\n", {}, "{host}/wheels"),
        ("RUN pip install --index-url file://{host}/index probe\n", {}, "{host}/index"),
        ("RUN pip install --extra-index-url=file://{host}/index probe\n", {}, "{host}/index"),
        ("RUN pip install 'probe @ file://{host}/pkg'\n", {}, "{host}/pkg"),
        ("RUN pip install ../pkg\n", {}, "job0/pkg"),
        ("COPY req.txt .\nRUN pip install -r req.txt\n", {"req.txt": "{host}/pkg\n"}, "{host}/pkg"),
        ("COPY req.txt .\nRUN pip install -r req.txt\n", {"req.txt": "-f {host}/wheels\nprobe\n"}, "{host}/wheels"),
        ("COPY req.txt .\nRUN pip install -r req.txt\n", {"req.txt": "-e {host}/src\n"}, "{host}/src"),
        ("COPY req.txt .\nRUN pip install -r req.txt\n", {"req.txt": "-c {host}/c.txt\nprobe\n"}, "{host}/c.txt"),
        ("COPY req.txt .\nRUN pip install -r req.txt\n", {"req.txt": "${{HOME}}/pkg\n"}, "${{HOME}}/pkg"),
        (
            "COPY req.txt .\nRUN pip install -r req.txt\n",
            {"req.txt": "-r ../../host.txt\n"},
            "host.txt",
        ),
        (
            "COPY env.yml .\nRUN conda env create -f env.yml\n",
            {"env.yml": "dependencies:\n  - pip:\n    - {host}/pkg\n"},
            "{host}/pkg",
        ),
    ],
)
def test_a_pip_form_naming_a_host_path_is_refused_before_anything_is_built(
    run_cli, write_job, distrun_home, tmp_path, dockerfile, files, named
):
    host = tmp_path / "host"
    (host / "pkg").mkdir(parents=True)
    (host / "pkg" / "setup.py").write_text("raise SystemExit('read from the host')\n")
    (tmp_path / "host.txt").write_text("probe\n")
    job = _job(write_job, dockerfile.format(host=host), {k: v.format(host=host) for k, v in files.items()})
    result = run_cli("plan", str(job), env={"DISTRUN_CONTAINERS": "off"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert named.format(host=host) in result.stderr
    assert "outside the build context" in result.stderr and "environment.build" in result.stderr
    assert f"{job.parent / 'ctx'}" in result.stderr and "Traceback" not in result.stderr
    assert not (distrun_home / "envs").exists() or not any((distrun_home / "envs").iterdir())


def test_the_context_may_still_name_its_own_files(run_cli, write_job, distrun_home):
    job = _job(
        write_job,
        "COPY . /app\nWORKDIR /app\nRUN pip install --no-index -f ./wheels -r req.txt ./pkg\n",
        {"req.txt": "-c constraints.txt\n", "constraints.txt": "", "wheels/.keep": "", "pkg/setup.py": ""},
    )
    result = run_cli("plan", str(job), env={"DISTRUN_CONTAINERS": "off"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runs in: build context ctx/Dockerfile, built as a uv environment" in result.stdout
