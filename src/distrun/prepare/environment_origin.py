"""Where a job's processes run, and how distrun got there: for `distrun plan`.

One line of words per job (per role where roles differ, on image backends): an explicit image,
a build context built as a uv environment (its cache key), a curated name (its image and its
specification), a conda file (the environment's key and folder), a name config.yaml maps, or
distrun's own Python. Built from the job's spec and its bindings (which already hold the built
environment's folder), so nothing here builds or resolves anything twice.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distrun.environments.own_layer import IN_OWN_LAYER

IMAGE_KINDS = frozenset({"kubernetes"})


def environment_origin(environment: Any, python_layer: Mapping[str, str], kind: str, images: Mapping[str, str]) -> str:
    """In words: what the processes run in. `images`: role -> pod image, for image backends."""
    if kind in IMAGE_KINDS:
        return _images(environment, images)
    built = python_layer.get("built")
    if built and Path(built) == Path(sys.prefix):  # the job's own layer over distrun's Python: nothing was built
        return f"{_origin(environment, '')}; {IN_OWN_LAYER}"
    return _origin(environment, built)


def _origin(environment: Any, built: str | None) -> str:
    where = f"cache key {Path(built).name[:12]}: {built} (each job in its own layer over it)" if built else ""
    if environment is None:
        return f"distrun's own Python ({sys.executable}): the job names no environment"
    if isinstance(environment, str):
        return _by_name(environment, where)
    if getattr(environment, "conda_file", None) is not None:
        shown = environment.conda_file if isinstance(environment.conda_file, str) else "inline"
        return f"conda_file ({shown}) -> {where}"
    build = getattr(environment, "build", None)
    if build is not None:
        dockerfile = f"{build.path or '.'}/{build.dockerfile_path or 'Dockerfile'}"
        return f"build context {dockerfile}, built as a uv environment (no container engine) -> {where}"
    image = getattr(environment, "image", None)
    return f"distrun's own Python ({sys.executable}); image {image} is kept for image-based backends"


def _by_name(reference: str, where: str) -> str:
    from distrun.environments.curated import BUILD_SETTING, find_curated

    if where:
        curated = find_curated(reference)
        if curated is not None and not _mapped(reference):
            return (
                f"curated {curated.name}:{curated.version} (image {curated.image}); its specification "
                f"(azureml-assets {curated.commit[:12]}) built as a uv environment -> {where}"
            )
        return f"{reference}, named in config.yaml -> {where}"
    if _mapped(reference):
        return f"{reference}, named in config.yaml -> the Python it names (PATH, VIRTUAL_ENV below)"
    curated = find_curated(reference)
    if curated is not None:
        return (
            f"distrun's own Python ({sys.executable}); {reference} is curated {curated.name}:{curated.version} "
            f"(image {curated.image}; {BUILD_SETTING}=build builds its specification)"
        )
    return f"distrun's own Python ({sys.executable}); {reference} is not an environment distrun knows"


def _mapped(reference: str) -> bool:
    from distrun.prepare.job_notes import named_in_config

    return named_in_config(reference) is not None


def _images(environment: Any, images: Mapping[str, str]) -> str:
    shown = sorted(set(images.values()))
    if len(shown) <= 1:
        image = shown[0] if shown else "(none)"
        return f"image {image} ({_image_origin(environment, image)})"
    return "; ".join(
        f"{role}: image {image} ({_image_origin(environment, image)})" for role, image in sorted(images.items())
    )


def _image_origin(environment: Any, image: str) -> str:
    """How the image backend came to `image` (`job_image` tries these in this order)."""
    if getattr(environment, "image", None) == image:
        return "environment.image"
    if isinstance(environment, str):
        from distrun.environments.curated import find_curated
        from distrun.prepare.job_notes import named_in_config

        named = named_in_config(environment)
        if named is not None and named.body.get("image") == image:
            return f"{environment}, named in config.yaml"
        curated = find_curated(environment)
        if curated is not None and curated.image == image:
            return f"curated {curated.name}:{curated.version}, from {environment}"
    return "the compute target's image, or the role's own environment"


def pod_images(objects: list[dict[str, Any]]) -> dict[str, str]:
    """role -> the image its pods run, from Kubernetes objects (a JobSet's replicated jobs, or Jobs)."""
    images: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") == "JobSet":
            for replicated in obj["spec"]["replicatedJobs"]:
                images[replicated["name"]] = _first_image(replicated["template"]["spec"])
        elif obj.get("kind") == "Job":
            images[obj["metadata"].get("labels", {}).get("distrun.io/role", obj["metadata"]["name"])] = _first_image(
                obj["spec"]
            )
    return images


def _first_image(job_spec: dict[str, Any]) -> str:
    containers = job_spec["template"]["spec"].get("containers") or [{}]
    return str(containers[0].get("image", ""))
