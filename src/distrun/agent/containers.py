"""Running a rank in a container of the job's image: everything distrun passes to podman or docker.

A rank in a container is still one process of the gang: `podman run` in the foreground, whose
output is the rank's output and whose exit status is the rank's (podman gives the command's).
distrun's stop signal reaches the rank through podman (`--sig-proxy`, its default) and `--init`
(a pid 1 that passes signals on: a rank as pid 1 would ignore SIGTERM). Each container has a
name of its own, so that whatever podman leaves behind (its client killed before it could
remove the container) is removed by name when the gang ends (`remove`).

What this machine's podman needs is here and nowhere else: a containers.conf of distrun's own,
given with CONTAINERS_CONF (never written over the machine's), that sets no default ulimits
(raising them needs CAP_SYS_RESOURCE) and no pids limit, and `--runtime runc` (crun refuses
a hybrid cgroup layout).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from distrun.core.launch_leftovers import LAUNCH_MARKER
from distrun.environments.container_engine import ENGINES, engine_env
from distrun.metrics.rank_token import TOKEN_VARIABLE
from distrun.plan.model import ProcessSpec

DOCS = "docs/environments-and-data.md#containers"
# podman and docker exit with 125 when they could not run the container at all.
ENGINE_ERROR_EXIT = 125
# Variables that describe this machine's own layout, not the image's: never passed in.
HOST_LAYOUT = frozenset({"PATH", "LD_LIBRARY_PATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME"})
REMOVE_SECONDS = 30.0
REMOVE_TRIES = 4
REMOVE_PAUSE = 0.5


@dataclass(frozen=True)
class ContainerRun:
    """How every process of a job runs in a container: plain data, decided by the backend."""

    engine: str  # "podman" or "docker"
    program: str  # the engine's executable
    image: str
    mounts: tuple[str, ...]  # host paths mounted at the same path, read-write (job folder, inputs)
    extra_mounts: tuple[str, ...] = ()  # the user's own `SRC:DST[:OPTIONS]` (config.yaml)
    user: str | None = None  # "UID:GID" for --user; None: podman's --userns=keep-id
    gpus: bool = False
    config_dir: str = ""  # where distrun keeps its containers.conf (podman)
    # The image is built from this build context ({"tag", "context", "dockerfile"}): a node whose
    # engine lacks it builds it the same way (`distrun.environments.image_build`); {}: an image.
    image_build: dict[str, str] = field(default_factory=dict)

    def engine_options(self) -> list[str]:
        return ["--runtime", "runc"] if self.engine == "podman" else []

    def engine_env(self) -> dict[str, str]:
        """What the engine's own process needs in its environment (podman: distrun's containers.conf)."""
        return engine_env(self.engine, Path(self.config_dir))

    def describe(self) -> str:
        """ "a container of image I", and what it was built from."""
        built = self.image_build
        if not built:
            return f"a container of image {self.image}"
        return f"a container of image {self.image} (built from build context {built['context']}, {built['dockerfile']})"

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "program": self.program,
            "image": self.image,
            "mounts": list(self.mounts),
            "extra_mounts": list(self.extra_mounts),
            "user": self.user,
            "gpus": self.gpus,
            "config_dir": self.config_dir,
            "image_build": dict(self.image_build),
        }

    @classmethod
    def from_dict(cls, data: object, where: str) -> ContainerRun:
        """What `to_dict` wrote, read back as plain data; ValueError (naming `where`) for anything else:
        the file sits in the job folder, where the job's processes can write."""
        strings = ("engine", "program", "image", "config_dir")
        lists = ("mounts", "extra_mounts")
        ok = (
            isinstance(data, dict)
            and set(data) == {*strings, *lists, "user", "gpus", "image_build"}
            and all(isinstance(data[key], str) for key in strings)
            and all(isinstance(data[key], list) and all(isinstance(v, str) for v in data[key]) for key in lists)
            and (data["user"] is None or isinstance(data["user"], str))
            and isinstance(data["gpus"], bool)
            and data["engine"] in ENGINES
            and isinstance(data["image_build"], dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in data["image_build"].items())
        )
        if not ok:
            raise ValueError(f"{where}: not the container settings distrun wrote")
        assert isinstance(data, dict)
        return cls(
            engine=data["engine"],
            program=data["program"],
            image=data["image"],
            mounts=tuple(data["mounts"]),
            extra_mounts=tuple(data["extra_mounts"]),
            user=data["user"],
            gpus=data["gpus"],
            config_dir=data["config_dir"],
            image_build=dict(data["image_build"]),
        )


def container_name(launch_id: str, process: str) -> str:
    """A name per process of a launch, made only of what engines accept in a name."""
    digest = hashlib.sha256(launch_id.encode()).hexdigest()[:16]
    return f"distrun-{digest}-{process}"


def run_argv(run: ContainerRun, spec: ProcessSpec, env: Mapping[str, str], name: str) -> list[str]:
    """`podman run ...` for one process; values of `env` reach it by name (`--env KEY`), from the
    engine's own environment, so that no secret a job sets shows on a command line."""
    # The host's network (MASTER_ADDR and ports as without containers) and the host's IPC: the
    # ranks of a node share /dev/shm, one container each, as NCCL's shared-memory transport and
    # DeepSpeed's CPU allreduce need (a private one is 64 MB and seen by its own rank only).
    argv = [run.program, *run.engine_options(), "run", "--rm", "--init", "--name", name, "--network", "host"]
    argv += ["--ipc", "host"]
    argv += ["--user", run.user] if run.user else ["--userns=keep-id"]
    if run.gpus:
        argv += ["--device", "nvidia.com/gpu=all"] if run.engine == "podman" else ["--gpus", "all"]
    for path in run.mounts:
        argv += ["--volume", f"{path}:{path}"]
    for mount in run.extra_mounts:
        argv += ["--volume", mount]
    argv += ["--workdir", spec.cwd]
    for key in sorted(env):
        if key not in HOST_LAYOUT and key != LAUNCH_MARKER:
            argv += ["--env", key]
    # The marker by value: the engine's own processes (conmon, which removes a container whose
    # client was killed) must not carry it, or a sweep of the launch would kill them first.
    argv += ["--env", f"{LAUNCH_MARKER}={env.get(LAUNCH_MARKER, '')}", run.image, *spec.argv]
    return argv


def passed_env(spec: ProcessSpec, own: Mapping[str, str], inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables distrun computes for a process (its own and its defaults): what the container
    gets; with the job's MLflow token from `inherited` (the agent adds it there, never to the plan)."""
    passed = {**spec.env_defaults, **own}
    token = (inherited or {}).get(TOKEN_VARIABLE)
    if token and "MLFLOW_TRACKING_URI" in passed:
        passed.setdefault(TOKEN_VARIABLE, token)
    return passed


def engine_process_env(run: ContainerRun, child: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment: the process's, less the launch marker, plus the engine's own settings."""
    env = {key: value for key, value in child.items() if key != LAUNCH_MARKER}
    env.update(run.engine_env())
    return env


def start_failure(run: ContainerRun, exit_code: int | None, log_tail: str) -> str | None:
    """A clear reason when the engine could not start the container (exit 125), else None."""
    if exit_code != ENGINE_ERROR_EXIT:
        return None
    said = [line.strip() for line in log_tail.splitlines() if line.strip()]
    errors = [line for line in said if line.startswith("Error:")]
    message = (errors or said or [f"it exited with {ENGINE_ERROR_EXIT} and said nothing"])[-1]
    message = message.removeprefix("Error:").strip()
    return f"{run.engine} could not start a container: {message}; see {DOCS}"


def remove(run: ContainerRun, names: Iterable[str]) -> None:
    """Remove the named containers, running or not; ones already gone are no error.

    Tried again a moment later when the engine says no: a container whose processes were just
    killed from outside (a watchdog's sweep) is "improper: stopped" for podman until its state
    catches up, and the first `rm` leaves it Stopping.
    """
    names = list(names)
    force = ["rm", "--force", "--ignore", "--time", "0"] if run.engine == "podman" else ["rm", "--force"]
    for attempt in range(REMOVE_TRIES):
        if not names:
            return
        if attempt:
            time.sleep(REMOVE_PAUSE)
        try:
            done = subprocess.run(
                [run.program, *run.engine_options(), *force, *names],
                env={**os.environ, **run.engine_env()},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=REMOVE_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return  # nothing more distrun can do; `podman ps -a --filter name=distrun-` shows them
        if done.returncode == 0:
            return
