"""A job cannot change what a later job gets from the environment cache (class 4).

The environment is built with uv from a local wheel folder, into a uv cache of the test's own.
A hostile job gives itself write permission back (it runs as the same user, so it can), edits
the package's module and plants a `.pth` file in site-packages. The next job using the same
cached environment must see the package as built, and uv's cache must hold the module as the
wheel had it (a hard link into the cache would carry the edit into every environment built
from it later, in any DISTRUN_HOME).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.wheelhouse import local_wheel_environment, make_wheel

PACKAGE = "distrun-sealed-pkg"
MODULE = "distrun_sealed_pkg.py"
BODY = "VALUE = 'as-built'\n"

HOSTILE = """
import os, stat, distrun_sealed_pkg
module = distrun_sealed_pkg.__file__
site = os.path.dirname(module)
for path in (site, module):
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
with open(module, "a") as handle:
    handle.write("VALUE = 'tampered'\\n")
with open(os.path.join(site, "zz_planted.pth"), "w") as handle:
    handle.write("import sys; sys.stdout.write('PLANTED\\\\n')\\n")
print("tampered", module)
"""

READER = "python -c \"import distrun_sealed_pkg; print('value', distrun_sealed_pkg.VALUE)\""


def _job(folder: Path, wheels: Path, command: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "hostile.py").write_text(HOSTILE)
    job = folder / "job.yml"
    job.write_text(
        f"""
command: {command}
code: src
{local_wheel_environment(wheels, f"{PACKAGE}==1.0")}"""
    )
    return job


def _cached_modules(uv_cache: Path) -> list[Path]:
    return [p for p in uv_cache.rglob(MODULE) if p.is_file()]


def test_a_job_that_edits_its_environment_changes_neither_the_next_job_nor_uvs_cache(
    distrun_home: Path, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, PACKAGE, "1.0", BODY)
    uv_cache = tmp_path / "uv-cache"  # on the same filesystem as the environment: links were possible
    env = {"UV_CACHE_DIR": str(uv_cache), "DISTRUN_ENV_INSTALLER": "uv"}

    first = distrun_cli(distrun_home, "run", str(_job(tmp_path / "a", wheels, "python hostile.py")), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "tampered" in first.stdout  # the edit was made: the job did get write permission back
    [edited] = [Path(line.split()[-1]) for line in first.stdout.splitlines() if "tampered " in line]
    assert "VALUE = 'tampered'" in edited.read_text()

    cached = _cached_modules(uv_cache)
    assert cached, f"uv kept no copy of {MODULE} in its cache"
    assert all(path.read_text() == BODY for path in cached)

    second = distrun_cli(distrun_home, "run", str(_job(tmp_path / "b", wheels, READER)), env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "value as-built" in second.stdout
    assert "PLANTED" not in second.stdout
    assert "was changed after it was built" in second.stderr and "building it again" in second.stderr
    assert "Traceback" not in second.stderr

    third = distrun_cli(distrun_home, "run", str(_job(tmp_path / "c", wheels, READER)), env=env)
    assert "value as-built" in third.stdout and "(cached)" in third.stderr  # intact now: used as it is
    assert not list((distrun_home / "envs").glob(".discard-*"))
    assert not list((distrun_home / "envs").glob(".build-*"))


def _next_clock_tick(folder: Path, built: Path) -> None:
    """Wait until the kernel's file clock (coarse: a few ms a tick) has moved past `built`'s
    change time, as it has long before any job runs in an environment just built."""
    probe = folder / "clock-probe"
    for _ in range(100_000):
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > built.stat().st_ctime_ns:
            return
    raise AssertionError("the file clock did not move")


@pytest.mark.parametrize(
    "tamper",
    ["edit-and-restore-times", "replace-by-rename", "add-deep", "remove", "chmod", "hard-link", "swap-for-link"],
)
def test_the_seal_sees_every_change_a_job_can_make(tmp_path: Path, tamper: str) -> None:
    from distrun.environments.seal import make_read_only, remove_tree, seal_of

    root = tmp_path / "env"
    module = root / "lib" / "site-packages" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text(BODY)
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to(sys.executable)
    sealed = seal_of(root)  # left writable: what is tested is the seal, not the permission bits
    assert seal_of(root) == sealed  # reading changes nothing
    _next_clock_tick(tmp_path, module)
    if tamper == "edit-and-restore-times":
        before = module.stat()
        module.write_text(BODY.replace("as-built", "tampered"))  # the same size
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif tamper == "replace-by-rename":
        other = tmp_path / "other.py"
        other.write_text(BODY)
        os.replace(other, module)
    elif tamper == "add-deep":
        (module.parent / "__pycache__").mkdir()
    elif tamper == "remove":
        module.unlink()
    elif tamper == "chmod":
        module.chmod(0o644)
        module.chmod(module.stat().st_mode)  # the same mode again: a change time all the same
    elif tamper == "hard-link":
        os.link(module, tmp_path / "kept.py")
    else:
        module.unlink()
        module.symlink_to(tmp_path / "elsewhere.py")
    assert seal_of(root) != sealed
    make_read_only(root)
    remove_tree(root)  # read-only inside, as a sealed environment is
    assert not root.exists()
