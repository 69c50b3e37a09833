"""Whether a local job runs in a container of its `environment.image`, and with what.

A job whose inline environment is an image alone (no conda_file, no build context) runs each
process in a container of it when this machine has a container engine: podman first, then
docker (whose daemon must answer). Without one, or with `distrun run --no-container`
(DISTRUN_CONTAINERS=off) or config.yaml's `containers: {use: false}`, it runs in this Python as
before, and the note says why. config.yaml's `containers: {mounts: [SRC:DST[:ro], ...]}` adds
mounts to every container.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from distrun.agent.containers import ENGINES, ContainerRun
from distrun.core.errors import DistrunError
from distrun.plan.model import Bindings
from distrun.spec.config_sections import read_section

SWITCH = "DISTRUN_CONTAINERS"  # "off": what `distrun run --no-container` sets
DOCKER_ANSWER_SECONDS = 5.0


@dataclass(frozen=True)
class ContainerChoice:
    run: ContainerRun | None
    note: str | None  # what `run` and `plan` say once; None: the job has no image to run


def job_image(spec: object) -> str | None:
    """The image of an inline environment that is an image alone; None otherwise."""
    environment = getattr(spec, "environment", None)
    image = getattr(environment, "image", None)
    if not image or getattr(environment, "conda_file", None) is not None or getattr(environment, "build", None):
        return None
    return str(image)


def choose_container(
    spec: object, config_path: Path, job_dir: Path, bindings: Bindings, gpus: bool, state_dir: Path
) -> ContainerChoice:
    image = job_image(spec)
    if image is None:
        return ContainerChoice(None, None)
    settings = _settings(config_path)
    if os.environ.get(SWITCH, "").lower() == "off":
        return ContainerChoice(None, _own_python(image, "--no-container"))
    if settings.get("use") is False:
        return ContainerChoice(None, _own_python(image, f"containers.use is false in {config_path}"))
    engine = find_engine()
    if engine is None:
        why = "no container engine on this machine (podman, then docker, were looked for)"
        return ContainerChoice(None, _own_python(image, why))
    name, program = engine
    uid, gid = os.getuid(), os.getgid()
    user = None if name == "podman" and uid != 0 else f"{uid}:{gid}"
    run = ContainerRun(
        engine=name,
        program=program,
        image=image,
        mounts=_mounts(job_dir, bindings),
        extra_mounts=_extra_mounts(settings, config_path),
        user=user,
        gpus=gpus,
        config_dir=str(state_dir),
    )
    return ContainerChoice(run, f"local compute runs each process in a container of image {image} ({name})")


def _own_python(image: str, why: str) -> str:
    import sys

    return f"environment.image {image} is not used: {why}; local compute runs in this Python ({sys.executable})"


@functools.lru_cache(maxsize=1)
def find_engine() -> tuple[str, str] | None:
    """(name, executable) of the first engine that can run containers here, or None."""
    for name in ENGINES:
        program = shutil.which(name)
        if program is None:
            continue
        if name == "docker" and not _docker_answers(program):
            continue  # the client alone, with no daemon to talk to
        return name, program
    return None


def _docker_answers(program: str) -> bool:
    try:
        done = subprocess.run(
            [program, "version", "--format", "{{.Server.Version}}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=DOCKER_ANSWER_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _mounts(job_dir: Path, bindings: Bindings) -> tuple[str, ...]:
    """The job folder (its code, outputs and logs), and every data input and output outside it."""
    paths = [str(job_dir)]
    for path in [*bindings.input_paths.values(), *bindings.outputs.values(), *bindings.python_layer.values()]:
        if path.startswith("/") and not any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths):
            paths.append(path)
    return tuple(paths)


def _settings(config_path: Path) -> dict[str, object]:
    section, smap = read_section(config_path, "containers", "containers: {use: false}")
    known = {"use", "mounts"}
    for key in section:
        if key not in known:
            raise DistrunError(
                f"{smap.find(('containers', key))}: containers.{key}: not a setting",
                "containers takes use (true/false) and mounts (a list of SRC:DST[:ro])",
            )
    if "use" in section and not isinstance(section["use"], bool):
        raise DistrunError(f"{smap.find(('containers', 'use'))}: containers.use: expected true or false")
    return dict(section)


def _extra_mounts(settings: dict[str, object], config_path: Path) -> tuple[str, ...]:
    mounts = settings.get("mounts", [])
    if not isinstance(mounts, list) or not all(isinstance(m, str) and ":" in m for m in mounts):
        raise DistrunError(
            f"{config_path}: containers.mounts: expected a list of SRC:DST[:OPTIONS]",
            "e.g. containers: {mounts: ['/data:/data:ro']}",
        )
    return tuple(mounts)
