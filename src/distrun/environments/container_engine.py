"""Which container engine this machine has for jobs, and the settings distrun runs it with.

podman first, then docker (whose daemon must answer: a docker client alone runs nothing).
podman runs with a containers.conf of distrun's own (given with CONTAINERS_CONF, never written
over the machine's) that sets no default ulimits (raising them needs CAP_SYS_RESOURCE) and no
pids limit. Only the standard library: a node's agent imports this (`container_settings` reads
config.yaml, on the submitting side).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

ENGINES = ("podman", "docker")  # tried in this order
DOCKER_ANSWER_SECONDS = 5.0
PODMAN_CONF = """\
# Written by distrun for its own podman runs (given with CONTAINERS_CONF).
[containers]
default_ulimits = []
pids_limit = 0
"""


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


def podman_conf(folder: Path) -> Path:
    """distrun's containers.conf, written once (atomically) into `folder`."""
    path = folder / "containers.conf"
    try:
        if path.read_text(encoding="utf-8") == PODMAN_CONF:
            return path
    except OSError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".containers.conf.{os.getpid()}"
    tmp.write_text(PODMAN_CONF, encoding="utf-8")
    os.replace(tmp, path)
    return path


def engine_env(engine: str, config_dir: Path) -> dict[str, str]:
    """What the engine's own process needs in its environment (podman: distrun's containers.conf)."""
    return {"CONTAINERS_CONF": str(podman_conf(config_dir))} if engine == "podman" else {}
