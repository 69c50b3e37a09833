"""A Docker build context (`environment.build`) built into an image by this machine's container engine.

Where local compute and Slurm run containers (`distrun.environments.container_engine`), a build
context is built once into `localhost/distrun-build:<key>`, the key a digest of the Dockerfile's
name and of every file of the context (its path, mode and content, links by their target): the
same context is found again in the engine's store, a changed file builds a new image. Its base
images (FROM) must be in the engine's store already (`podman pull BASE`, or `podman load`):
distrun pulls nothing, so a build never waits on a registry. With a base missing, or no engine,
the context is built as a uv environment where its Dockerfile allows (`build_context`), and
distrun says why.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.safe_files import read_user_file
from distrun.environments.container_engine import engine_env, find_engine
from distrun.environments.container_settings import switched_off
from distrun.environments.dockerfile import parse_dockerfile

TAG_PREFIX = "localhost/distrun-build"
BUILD_SECONDS = 3600.0
ANSWER_SECONDS = 30.0
DOCKERFILE_LIMIT = 1 << 20
CONTEXT_FILE_LIMIT = 1 << 30  # a context file larger than this is hashed by name, size and time only


@dataclass(frozen=True)
class ImageBuild:
    """An image to build from a context: plain data, decided before anything is built."""

    tag: str
    context: str  # the context folder (absolute)
    dockerfile: str  # relative to the context
    engine: str
    program: str

    def to_dict(self) -> dict[str, str]:
        return {"tag": self.tag, "context": self.context, "dockerfile": self.dockerfile}


def context_folder(build: Any, base_dir: Path) -> Path:
    """The build context's folder (`environment.build.path`, relative to the job file's folder)."""
    context = Path(os.path.expanduser(str(build.path or ".")))
    return context if context.is_absolute() else base_dir / context


def planned_build(build: Any, base_dir: Path, config_path: Path) -> tuple[ImageBuild | None, str]:
    """The engine build of `build` and "", or None and why the context is not built into an image."""
    engine = find_engine()
    if engine is None:
        return None, "no container engine on this machine (podman, then docker, were looked for)"
    off = switched_off(config_path)
    if off is not None:
        return None, off
    context = context_folder(build, base_dir)
    dockerfile = str(build.dockerfile_path or "Dockerfile")
    try:
        text = read_user_file(context / dockerfile, DOCKERFILE_LIMIT).decode("utf-8")
    except (OSError, ValueError):
        return None, f"{context / dockerfile} cannot be read"
    name, program = engine
    for base in base_images(text):
        if not image_in_store(program, name, base):
            return None, f"its base image {base} is not in {name}'s store (distrun pulls nothing: `{name} pull {base}`)"
    tag = f"{TAG_PREFIX}:{context_key(context, dockerfile)}"
    return ImageBuild(tag=tag, context=str(context), dockerfile=dockerfile, engine=name, program=program), ""


def base_images(dockerfile_text: str) -> list[str]:
    """The images the Dockerfile's FROM lines start from (not its own stages, not scratch);
    one named through an ARG (`FROM $BASE`) as written, which no store holds."""
    stages: set[str] = set()
    bases: list[str] = []
    for instruction in parse_dockerfile(dockerfile_text):
        if instruction.keyword != "FROM":
            continue
        words = [w for w in instruction.arguments.split() if not w.startswith("--")]
        if not words:
            continue
        image = words[0]
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2].lower())
        if image.lower() not in stages and image != "scratch" and image not in bases:
            bases.append(image)
    return bases


def context_key(context: Path, dockerfile: str) -> str:
    """A digest of the Dockerfile's name and every file of the context (path, mode, content)."""
    digest = hashlib.sha256(f"dockerfile {dockerfile}\n".encode())
    for folder, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder) / name
            relative = path.relative_to(context).as_posix()
            stat = path.lstat()
            digest.update(f"{relative}\0{stat.st_mode:o}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif stat.st_size > CONTEXT_FILE_LIMIT:
                digest.update(f"{stat.st_size}\0{stat.st_mtime_ns}".encode())
            else:
                with open(path, "rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
            digest.update(b"\n")
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def image_in_store(program: str, engine: str, image: str) -> bool:
    """Whether the engine's store holds `image` (nothing is pulled)."""
    argv = [program, "image", "exists", image] if engine == "podman" else [program, "image", "inspect", image]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=ANSWER_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def ensure_built(build: ImageBuild, config_dir: Path) -> bool:
    """Build the image unless the engine has it already; True when it was built now."""
    if image_in_store(build.program, build.engine, build.tag):
        return False
    argv = [build.program, "build", "--file", str(Path(build.context) / build.dockerfile), "--tag", build.tag]
    if build.engine == "podman":
        argv += ["--runtime", "runc", "--pull=never"]
    argv.append(build.context)
    try:
        done = subprocess.run(
            argv,
            env={**os.environ, **engine_env(build.engine, config_dir)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BUILD_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = f"{build.engine} could not build the image of build context {build.context}: {exc}"
        raise DistrunError(said) from None
    if done.returncode != 0:
        said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        errors = [line for line in said if line.lower().startswith("error")]
        message = (errors or said or [f"it exited with {done.returncode}"])[-1]
        raise DistrunError(
            f"{build.engine} could not build the image of build context {build.context}: {message}",
            f"try it yourself: {' '.join(argv)}; or run without containers (`distrun run --no-container`)",
        )
    image_in_store.cache_clear()
    return True
