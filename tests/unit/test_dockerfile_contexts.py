"""Docker build contexts without a container engine: the Dockerfile parser (continuations,
comments, JSON and shell forms) and what a context of pip/conda steps amounts to (a conda
file's mapping, ENV values), or the Dockerfile line that needs a container engine."""

from __future__ import annotations

from pathlib import Path

from distrun.core.errors import Position
from distrun.environments.build_context import ContextRequest, read_build_context
from distrun.environments.conda_spec import cache_key, read_conda_data
from distrun.environments.dockerfile import Instruction, parse_dockerfile


def test_parser_joins_continuations_drops_comments_and_reads_both_forms() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "FROM python:3.10-slim\n"
        "\n"
        "# a comment line\n"
        "RUN pip install a \\\n"
        "    # a comment inside the continuation\n"
        "    b \\\n"
        "\n"
        "    c\n"
        'CMD ["python", "-c", "print(1)"]\n'
        "run [not json\n"
        "ENV A=1 \\\n"
    )
    assert parse_dockerfile(text) == [
        Instruction("FROM", "python:3.10-slim", None, 2),
        Instruction("RUN", "pip install a b c", None, 5),
        Instruction("CMD", '["python", "-c", "print(1)"]', ("python", "-c", "print(1)"), 10),
        Instruction("RUN", "[not json", None, 11),
        Instruction("ENV", "A=1", None, 12),
    ]


def test_parser_keeps_an_instructions_flags_apart() -> None:
    text = "FROM --platform=linux/amd64 python:3.12 AS base\nRUN --mount=type=cache,target=/root/.cache pip install x\n"
    text += 'COPY --from=build --chown=1000 ["a b", "/c/"]\n'
    assert parse_dockerfile(text) == [
        Instruction("FROM", "python:3.12 AS base", None, 1, ("--platform=linux/amd64",)),
        Instruction("RUN", "pip install x", None, 2, ("--mount=type=cache,target=/root/.cache",)),
        Instruction("COPY", '["a b", "/c/"]', ("a b", "/c/"), 3, ("--from=build", "--chown=1000")),
    ]


def test_parser_escape_directive() -> None:
    text = "# escape=`\nFROM python:3.11\nRUN pip install `\n  x\nWORKDIR C:\\app\n"
    assert parse_dockerfile(text) == [
        Instruction("FROM", "python:3.11", None, 2),
        Instruction("RUN", "pip install x", None, 3),
        Instruction("WORKDIR", "C:\\app", None, 5),
    ]


def _context(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None) -> ContextRequest:
    (tmp_path / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    for name, content in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    return read_build_context(tmp_path, None)


def test_pip_and_conda_steps_become_a_conda_mapping_with_their_lines(tmp_path: Path) -> None:
    read = _context(
        tmp_path,
        "ARG PY=3.10\n"
        "FROM python:${PY}-slim\n"
        "LABEL maintainer=me\n"
        'ENV GREETING="hello there" \\\n'
        "    PATH=/opt/venv/bin:$PATH\n"
        "ENV OLD_STYLE some value\n"
        "WORKDIR /app\n"
        "COPY --chown=1000:1000 requirements.txt .\n"
        "COPY conf/ /etc/conf/\n"
        "RUN --mount=type=cache,target=/root/.cache pip install --no-cache-dir -r requirements.txt && \\\n"
        "    rm requirements.txt\n"
        "RUN python -m pip install --upgrade 'numpy>=1.26' --extra-index-url=https://example.org/simple\n"
        "RUN conda install -y -c conda-forge pytorch=2.3 'pandas~=2.1.0' && conda clean -a -y\n"
        "RUN conda run -n base pip install -c /etc/conf/constraints.txt mlflow\n"
        "USER 1000\n"
        'CMD ["bash"]\n',
        {"requirements.txt": "six==1.16.0\n", "conf/constraints.txt": "mlflow<3\n"},
    )
    assert read.problems == []
    assert read.conda_data == {
        "dependencies": [
            "python=3.10",
            "pytorch=2.3",
            "pandas~=2.1.0",
            {
                "pip": [
                    f"-r {tmp_path / 'requirements.txt'}",
                    "numpy>=1.26",
                    "--extra-index-url https://example.org/simple",
                    f"-c {tmp_path / 'conf' / 'constraints.txt'}",
                    "mlflow",
                ]
            },
        ]
    }
    assert read.variables == {"GREETING": "hello there", "OLD_STYLE": "some value"}
    assert read.left_out == ["PATH"]
    request, problems = read_conda_data(read.conda_data, tmp_path, "Dockerfile", read.position, "environment.build")
    assert problems == [] and request is not None
    assert request.python == "3.10"
    assert [(r.line, str(r.position)) for r in request.requirements] == [
        ("torch==2.3.*", f"{tmp_path / 'Dockerfile'}:13"),
        ("pandas~=2.1.0", f"{tmp_path / 'Dockerfile'}:13"),
        ("six==1.16.0", f"{tmp_path / 'requirements.txt'}:1"),  # read in: the cache key covers it
        ("numpy>=1.26", f"{tmp_path / 'Dockerfile'}:12"),
        ("--extra-index-url https://example.org/simple", f"{tmp_path / 'Dockerfile'}:12"),
        (f"-c {tmp_path / 'conf' / 'constraints.txt'}", f"{tmp_path / 'Dockerfile'}:14"),
        ("mlflow", f"{tmp_path / 'Dockerfile'}:14"),
    ]


def test_the_cache_key_follows_the_contexts_requirement_files(tmp_path: Path) -> None:
    dockerfile = "FROM python:3.11\nCOPY requirements.txt /tmp/\nRUN pip install -r /tmp/requirements.txt\n"
    keys = []
    for content in ("six==1.16.0\n", "six==1.17.0\n"):
        read = _context(tmp_path, dockerfile, {"requirements.txt": content})
        request, _ = read_conda_data(read.conda_data, tmp_path, "Dockerfile", read.position, "")
        assert request is not None
        keys.append(cache_key(request, "3.11"))
    assert keys[0] != keys[1]


def test_python_version_comes_from_the_base_images_tag(tmp_path: Path) -> None:
    cases = {
        "python:3.12": "3.12",
        "python:3.9.18-bookworm": "3.9",
        "docker.io/library/python:3.11-slim AS base": "3.11",
        "mcr.microsoft.com/aifx/acpt/stable-ubuntu2204-cu126-py310-torch280:latest": "3.10",
        "continuumio/miniconda3:latest": None,  # its own Python: distrun's version, unless conda install says
        "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04": None,
    }
    for image, version in cases.items():
        read = _context(tmp_path, f"FROM {image}\n")
        assert read.problems == []
        assert read.conda_data["dependencies"] == ([f"python={version}"] if version else []), image


def _refusal(tmp_path: Path, dockerfile: str) -> str:
    read = _context(tmp_path, dockerfile, {"requirements.txt": "six\n"})
    assert len(read.problems) == 1, [p.render() for p in read.problems]
    return read.problems[0].render()


def test_steps_a_virtual_environment_cannot_take_are_refused_naming_their_line(tmp_path: Path) -> None:
    where = tmp_path / "Dockerfile"
    apt = _refusal(tmp_path, "FROM python:3.10\n\nRUN apt-get update && \\\n    apt-get install -y curl\n")
    assert apt.startswith(f"{where}:3: environment.build: RUN apt-get update is not a pip or conda install")
    assert "container engine" in apt and "conda_file" in apt
    stages = _refusal(tmp_path, "FROM python:3.10 AS build\nRUN pip install x\nFROM python:3.10-slim\n")
    assert stages.startswith(f"{where}:3: environment.build: a second FROM (a multi-stage build)")
    base = _refusal(tmp_path, "FROM rocker/tidyverse:latest\n")
    assert base.startswith(f"{where}:1: environment.build: FROM rocker/tidyverse:latest is not a Python")
    pipe = _refusal(tmp_path, "FROM python:3.10\nRUN curl -s https://x | sh\n")
    assert pipe.startswith(f"{where}:2: environment.build: RUN uses pipes, redirections or subshells")
    outside = _refusal(tmp_path, "FROM python:3.10\nRUN pip install -r /nowhere/requirements.txt\n")
    assert outside.startswith(f"{where}:2: environment.build: pip -r: the file is not one this Dockerfile copied")
    other = _refusal(tmp_path, "FROM python:3.10\nCOPY --from=builder /app /app\n")
    assert other.startswith(f"{where}:2: environment.build: COPY --from copies from another image")
    several = _refusal(tmp_path, "FROM rocker/r-ver:4\nRUN apt-get install -y r-base\nRUN R -e 'install.packages(1)'\n")
    assert several.startswith(
        f"{where}:1: environment.build: FROM rocker/r-ver:4 is not a Python, conda or Azure ML base image "
        "(lines 2, 3 need a container engine too): distrun builds"
    )
    entry = _refusal(tmp_path, 'FROM python:3.10\nENTRYPOINT ["python"]\n')
    assert entry.startswith(f"{where}:2: environment.build: ENTRYPOINT has no meaning for a virtual environment")


def test_conda_env_file_in_the_context_joins_the_dependencies(tmp_path: Path) -> None:
    read = _context(
        tmp_path,
        "FROM continuumio/miniconda3\nCOPY env.yml /tmp/env.yml\nRUN conda env create -f /tmp/env.yml\n",
        {"env.yml": "dependencies:\n  - python=3.11\n  - numpy=1.26\n  - pip:\n    - six\n"},
    )
    assert read.problems == []
    assert read.conda_data == {"dependencies": ["python=3.11", "numpy=1.26", {"pip": ["six"]}]}
    position = read.position("dependencies", 1)
    assert position == Position(str(tmp_path / "Dockerfile"), 3)
