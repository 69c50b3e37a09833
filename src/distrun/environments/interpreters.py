"""Which Python interpreters this machine has, by major.minor version.

An environment asking for a Python that is not here is an error before anything starts:
distrun never downloads interpreters (uv's downloads are turned off), it uses the ones
installed: distrun's own, `pythonX.Y` on PATH, and those uv already manages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from distrun.core.death_signal import setpriv_prefix
from distrun.environments.installer import uv_binary


def own_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def find_python(version: str | None) -> Path | None:
    """An interpreter of `version` (major.minor; None: distrun's own), or None if there is none."""
    if version is None or version == own_version():
        return Path(sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path and _version_of(on_path) == version:
        return Path(on_path)
    return _uv_managed(version)


def available_versions() -> list[str]:
    """Versions found, for the message that says which one is missing."""
    found = {own_version()}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            tail = name.removeprefix("python")
            if name.startswith("python3.") and tail.replace(".", "").isdigit():
                found.add(tail)
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


@cache
def _version_of(executable: str) -> str | None:
    try:
        out = subprocess.run(
            [*setpriv_prefix("KILL"), executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _uv_managed(version: str) -> Path | None:
    uv = uv_binary()
    if uv is None:
        return None
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    try:
        out = subprocess.run(
            [*setpriv_prefix("KILL"), uv, "python", "find", version],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    path = out.stdout.strip()
    return Path(path) if out.returncode == 0 and path and _version_of(path) == version else None
