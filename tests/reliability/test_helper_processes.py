"""Processes distrun starts outside the rank gang end with distrun (class 5).

An environment build runs uv, and uv runs the package's build backend in a Python of its own:
a grandchild of distrun with no death signal. Here the backend is a real one, in a local sdist,
that holds the build while a flag file exists (at most HOLD_S seconds: whatever happens, it ends).
distrun is killed with SIGKILL while the backend holds: nothing of the build may be left running,
and the next job's build must not be disturbed by one that runs on (on the old code, uv went on
installing into the build folder the next job had cleaned up).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

from distrun.core import procfs
from support.cli import cli_env, distrun_cli
from support.jobs import wait_for
from support.reliability import processes_with
from support.wheelhouse import local_wheel_environment

PACKAGE = "distrun-slow-pkg"
HOLD_S = 120

BACKEND = """
import base64, hashlib, os, time, zipfile

FLAG = {flag!r}
STARTED = {started!r}
HOLD_S = {hold}


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(STARTED, "a") as handle:
        handle.write(f"{{os.getpid()}}\\n")
    for _ in range(HOLD_S * 10):
        if not os.path.exists(FLAG):
            break
        time.sleep(0.1)
    name = "distrun_slow_pkg-1.0-py3-none-any.whl"
    files = {{
        "distrun_slow_pkg.py": b"VALUE = 'slow-1.0'\\n",
        "distrun_slow_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: distrun-slow-pkg\\nVersion: 1.0\\n",
        "distrun_slow_pkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        ),
    }}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{{member}},sha256={{digest}},{{len(data)}}")
        record.append("distrun_slow_pkg-1.0.dist-info/RECORD,,")
        archive.writestr("distrun_slow_pkg-1.0.dist-info/RECORD", "\\n".join(record) + "\\n")
    return name
"""

PYPROJECT = """
[build-system]
requires = []
build-backend = "slow_backend"
backend-path = ["."]

[project]
name = "distrun-slow-pkg"
version = "1.0"
"""


def _slow_sdist(folder: Path, flag: Path, started: Path) -> None:
    """distrun_slow_pkg-1.0.tar.gz in `folder`: its build backend holds while `flag` exists."""
    folder.mkdir(parents=True, exist_ok=True)
    members = {
        "pyproject.toml": PYPROJECT,
        "slow_backend.py": BACKEND.format(flag=str(flag), started=str(started), hold=HOLD_S),
        "PKG-INFO": "Metadata-Version: 2.1\nName: distrun-slow-pkg\nVersion: 1.0\n",
    }
    with tarfile.open(folder / "distrun_slow_pkg-1.0.tar.gz", "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"distrun_slow_pkg-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _job(folder: Path, wheels: Path) -> Path:
    job = folder / "job.yml"
    job.write_text(
        "command: python -c \"import distrun_slow_pkg; print('built', distrun_slow_pkg.VALUE)\"\n"
        + local_wheel_environment(wheels, f"{PACKAGE}==1.0")
    )
    return job


def _of_this_test(home: Path) -> list[int]:
    """Every live process started by this test's distrun: they all carry its DISTRUN_HOME."""
    return processes_with(f"DISTRUN_HOME={home}")


def test_sigkill_to_distrun_during_an_environment_build_ends_the_whole_build(
    distrun_home: Path, tmp_path: Path
) -> None:
    flag, started = tmp_path / "hold", tmp_path / "backend-started"
    flag.write_text("")
    wheels = tmp_path / "wheels"
    _slow_sdist(wheels, flag, started)
    job = _job(tmp_path, wheels)
    extra = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "DISTRUN_ENV_INSTALLER": "uv"}

    distrun = subprocess.Popen(
        [sys.executable, "-m", "distrun", "run", str(job)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_env(distrun_home, extra),
    )
    try:
        wait_for(lambda: started.exists() and started.read_text().strip(), timeout=120)
        backend = int(started.read_text().split()[0])
        assert procfs.is_alive(backend)
        assert list((distrun_home / "envs").glob(".build-*"))  # the build is under way
        distrun.send_signal(signal.SIGKILL)
        distrun.wait()
        try:
            wait_for(lambda: not _of_this_test(distrun_home), timeout=15)
        except AssertionError:
            left = _of_this_test(distrun_home)
            described = [procfs.command_line(pid).replace(b"\0", b" ").decode(errors="replace") for pid in left]
            raise AssertionError(f"left running after distrun was killed: {described}") from None
        assert not procfs.is_alive(backend)
    finally:
        flag.unlink(missing_ok=True)  # a backend left running ends its hold now
        if distrun.poll() is None:
            distrun.kill()
            distrun.wait()
        for pid in _of_this_test(distrun_home):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    # The next job builds the environment (nothing of the killed build is in its way) and runs.
    done = distrun_cli(distrun_home, "run", str(job), env=extra, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "built slow-1.0" in done.stdout
    assert not list((distrun_home / "envs").glob(".build-*"))  # and no killed build made one again
    wait_for(lambda: not _of_this_test(distrun_home), timeout=15)  # its build's guard leaves after it
