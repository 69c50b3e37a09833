"""Whether a job on local compute or Slurm runs in a container of its `environment.image`, and with what.

A job whose inline environment is an image alone (no conda_file, no build context) runs each
process in a container of it when this machine has a container engine: podman first, then
docker (whose daemon must answer). A Slurm job's nodes are told the choice made here
(`container.json` in the job folder) and find the same engine on their own machine. Without
one, or with `distrun run --no-container` (DISTRUN_CONTAINERS=off) or config.yaml's
`containers: {use: false}`, it runs in this Python, in a layer of the job's own over it (the
preparation asks `environments.container_image` the same question), and the note says why.
config.yaml's `containers: {mounts: [SRC:DST[:ro], ...]}` adds mounts to every container.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from distrun.agent.containers import ContainerRun
from distrun.core.errors import DistrunError
from distrun.core.image_reference import IMAGE_HINT, image_reference_problem
from distrun.environments.container_engine import find_engine
from distrun.environments.container_image import curated_image, job_image
from distrun.environments.container_settings import SWITCH, containers_settings, switched_off
from distrun.plan.model import Bindings

__all__ = ["SWITCH", "ContainerChoice", "choose_container", "find_engine", "job_image"]


@dataclass(frozen=True)
class ContainerChoice:
    run: ContainerRun | None
    note: str | None  # what `run` and `plan` say once; None: the job has no image to run


def choose_container(
    spec: object,
    config_path: Path,
    job_dir: Path,
    bindings: Bindings,
    gpus: bool,
    state_dir: Path,
    compute: str = "local compute",
) -> ContainerChoice:
    """`compute` names where the processes run, in the note (local compute, Slurm's nodes)."""
    built = bindings.image_build  # made when the job was prepared, where the engine could build it
    image = built["tag"] if built else job_image(spec) or curated_image(spec, config_path)
    if image is None:
        return ContainerChoice(None, None)
    problem = image_reference_problem(image)
    if problem:  # from config.yaml or a built tag: it reaches the engine's command line all the same
        raise DistrunError(f"environment image: {problem}", IMAGE_HINT)
    settings = containers_settings(config_path)
    off = switched_off(config_path, settings)
    if off is not None:
        return ContainerChoice(None, _own_python(image, off, compute))
    engine = find_engine()
    if engine is None:
        why = "no container engine on this machine (podman, then docker, were looked for)"
        return ContainerChoice(None, _own_python(image, why, compute))
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
        image_build=dict(built),
    )
    said = f"{compute} runs each process in a container of image {image} ({name})"
    if built:
        said += f", built from build context {built['context']} ({built['dockerfile']})"
    return ContainerChoice(run, said)


def _own_python(image: str, why: str, compute: str) -> str:
    import sys

    from distrun.environments.own_layer import IN_OWN_LAYER

    here = f"{compute} runs in this Python ({sys.executable}), {IN_OWN_LAYER}"
    return f"environment.image {image} is not used: {why}; {here}"


def _mounts(job_dir: Path, bindings: Bindings) -> tuple[str, ...]:
    """The job folder (its code, outputs and logs), and every data input and output outside it."""
    paths = [str(job_dir)]
    for path in [*bindings.input_paths.values(), *bindings.outputs.values(), *bindings.python_layer.values()]:
        if path.startswith("/") and not any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths):
            paths.append(path)
    for path in paths:
        if ":" in path or "\n" in path:  # `--volume SRC:DST[:OPTIONS]` would split it into other things
            raise DistrunError(
                f"{path!r} cannot be mounted into a container: a ':' or a newline in a path would be read "
                "as the mount's destination or options",
                "rename the folder, or run without containers (`distrun run --no-container`)",
            )
    return tuple(paths)


def _extra_mounts(settings: dict[str, object], config_path: Path) -> tuple[str, ...]:
    mounts = settings.get("mounts", [])
    if not isinstance(mounts, list) or not all(isinstance(m, str) and ":" in m for m in mounts):
        raise DistrunError(
            f"{config_path}: containers.mounts: expected a list of SRC:DST[:OPTIONS]",
            "e.g. containers: {mounts: ['/data:/data:ro']}",
        )
    return tuple(mounts)
