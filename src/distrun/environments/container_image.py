"""Which image a job on local compute or Slurm would run in, and whether it runs in a container of it.

Decided here, below the engines, because two layers need the same answer: the backends choose
the container (`distrun.backends.container_choice`), and the job's preparation gives a job that
runs in distrun's own Python instead (its image unused: no engine here, or containers switched
off) a layer of its own over that Python, so that its `pip install` never changes distrun's
environment (`distrun.environments.own_layer`).
"""

from __future__ import annotations

from pathlib import Path

from distrun.environments.container_engine import find_engine
from distrun.environments.container_settings import switched_off


def job_image(spec: object) -> str | None:
    """The image of an inline environment that is an image alone; None otherwise."""
    environment = getattr(spec, "environment", None)
    image = getattr(environment, "image", None)
    if not image or getattr(environment, "conda_file", None) is not None or getattr(environment, "build", None):
        return None
    return str(image)


def curated_image(spec: object, config_path: Path) -> str | None:
    """The image of a curated environment name, where this machine's engine has it in its store and
    containers are on; None otherwise (the name then runs as `environments.curated` says: this
    Python, or its specification built). A name config.yaml maps is the user's, not curated."""
    environment = getattr(spec, "environment", None)
    if not isinstance(environment, str):
        return None
    from distrun.environments.curated import build_curated, find_curated
    from distrun.environments.image_build import image_in_store
    from distrun.environments.named import named_or_none

    curated = find_curated(environment)
    if curated is None or build_curated() or named_or_none(environment, config_path) is not None:
        return None
    engine = find_engine()
    if engine is None or switched_off(config_path) is not None:
        return None
    name, program = engine
    return curated.image if image_in_store(program, name, curated.image) else None


def runs_in_container(spec: object, config_path: Path) -> bool:
    """Whether the job's processes run in a container of its image (one built from a build
    context aside: that one always does), as `choose_container` will decide."""
    image = job_image(spec) or curated_image(spec, config_path)
    if image is None:
        return False
    try:
        if switched_off(config_path) is not None:
            return False
    except Exception:  # a broken containers section is reported when the container is chosen
        return False
    return find_engine() is not None
