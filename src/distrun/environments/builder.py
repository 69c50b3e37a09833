"""Building one environment, once: `$DISTRUN_HOME/envs/<hash>/`, complete or absent.

    envs/.<hash>.lock        held (flock) by the one process building <hash>
    envs/.build-<hash>-<pid> the build in progress
    envs/<hash>/             a finished environment: renamed into place whole, with its manifest

A finished environment is read-only and sealed (`distrun.environments.seal`): a job that
changes it anyway does not change what the next job gets, which finds the seal broken and
builds it again. Nothing in it is a link into the installer's own cache (uv installs by
copying), so no job can change that cache either, nor the environments built from it later.
A job whose environment exists (and is intact) starts without building. Jobs asking for the same one at
once take the lock in turn: the first builds, the others wait, then find it built. A build
that fails (or is killed) leaves only its temporary folder, removed by the next builder, so
no half environment is ever used; the error names the requirement the installer refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from distrun.core.console import say as _say
from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, make_dirs, make_home
from distrun.core.helper_processes import start_helper
from distrun.environments.conda_spec import EnvRequest, Requirement
from distrun.environments.installer import Installer, choose_installer
from distrun.environments.layered import Layer, resolve_layers
from distrun.environments.seal import LAST_USED, MANIFEST, make_read_only, remove_tree, seal_of

__all__ = ["LAST_USED", "MANIFEST", "BuildTarget", "ensure_environment", "env_path", "envs_dir", "is_ready"]
BUILD_TIMEOUT = float(os.environ.get("DISTRUN_ENV_BUILD_TIMEOUT", "3600"))


@dataclass(frozen=True)
class BuildTarget:
    request: EnvRequest
    python: Path  # the interpreter the environment is made from
    python_version: str
    key: str


def envs_dir(home: Path) -> Path:
    return home / "envs"


def env_path(home: Path, key: str) -> Path:
    return envs_dir(home) / key


def is_ready(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def ensure_environment(target: BuildTarget, home: Path, out: TextIO | None = None) -> Path:
    """The environment's folder, built first if it is not in the cache."""
    out = out if out is not None else sys.stderr
    final = env_path(home, target.key)
    if is_ready(final):
        changed = seal_broken(final)
        if changed is None:
            _touch(final)
            _say(out, f"distrun: ranks run in environment {target.key[:12]} (cached): {final}")
            return final
        _say(out, f"distrun: environment {target.key[:12]} {changed}; building it again")
    make_home(home)
    make_dirs(envs_dir(home))
    with _locked(envs_dir(home) / f".{target.key}.lock", target.key, out):
        if is_ready(final) and seal_broken(final) is None:  # another job built it while this one waited
            _touch(final)
            _say(out, f"distrun: ranks run in environment {target.key[:12]} (built by another job): {final}")
            return final
        _build(target, final, out)
    _touch(final)
    return final


def seal_broken(folder: Path) -> str | None:
    """None for an environment as it was built; else what is wrong with it, in words."""
    from distrun.core.safe_files import read_text

    try:
        sealed = json.loads(read_text(folder / MANIFEST)).get("seal")
    except (OSError, ValueError, AttributeError):
        return "has no readable manifest"
    if not isinstance(sealed, str):
        return "has no seal (it was built by an older distrun)"
    if seal_of(folder) != sealed:
        return "was changed after it was built (a file in it was edited, added or removed)"
    return None


@contextmanager
def _locked(path: Path, key: str, out: TextIO) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(out, f"distrun: waiting for another job building environment {key[:12]}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _build(target: BuildTarget, final: Path, out: TextIO) -> None:
    installer = choose_installer()
    for stale in final.parent.glob(f".build-{target.key}-*"):
        remove_tree(stale)  # a build that was killed; we hold the lock
    if final.exists():  # no manifest, or a broken seal: moved aside whole, then removed
        aside = final.parent / f".discard-{target.key}-{os.getpid()}"
        os.rename(final, aside)
        remove_tree(aside)
    tmp = final.parent / f".build-{target.key}-{os.getpid()}"
    count = len([r for r in target.request.requirements if r.name])
    started = time.monotonic()
    _say(
        out,
        f"distrun: building environment {target.key[:12]} (python {target.python_version}, "
        f"{count} requirement{'s' if count != 1 else ''}) with {installer.name}",
    )
    try:
        _run_step(installer, installer.create(target.python, tmp), target, out, "creating the virtual environment")
        # pip in every environment: a job's `pip install` must reach its own environment, not
        # whichever pip comes next on PATH (the user's, or distrun's). And setuptools where
        # `python -m venv` (and a conda environment's pip) brings it: packages that import
        # pkg_resources at run time (Microsoft's mldesigner) need it.
        seed = installer.seed_pip(tmp, bundled_wheels(tmp / "bin" / "python"))
        if seed is not None:
            _run_step(installer, seed, target, out, "installing pip")
        if target.request.layers:
            _install_layers(installer, tmp, target, out)
        elif target.request.requirements:
            requirements = tmp / "distrun-requirements.txt"
            requirements.write_text("".join(line + "\n" for line in target.request.lines()), encoding="utf-8")
            _run_step(installer, installer.install(tmp, requirements), target, out, "installing the requirements")
        _retarget_scripts(tmp, final)
        make_read_only(tmp)
        _write_manifest(tmp, target, installer, seal_of(tmp))
        os.chmod(tmp, DIR_MODE & ~_umask())
        os.rename(tmp, final)
    except BaseException:
        remove_tree(tmp)
        raise
    _say(out, f"distrun: environment {target.key[:12]} ready in {time.monotonic() - started:.1f} s: {final}")


def _install_layers(installer: Installer, tmp: Path, target: BuildTarget, out: TextIO) -> None:
    """An image's install steps, as the image has them: with pip, each one in turn (`--upgrade`,
    `--no-deps` as the step had them); with uv, each one resolved in turn preferring what the
    earlier ones chose (`layered`), then what they chose installed at once, without
    dependencies (it is the whole environment). Each replacement of an earlier choice is said."""
    layers = target.request.layers
    if installer.binary is None:
        for step, layer in enumerate(layers, start=1):
            requirements = tmp / f"distrun-requirements-{step}.txt"
            requirements.write_text("".join(line + "\n" for line in layer.lines), encoding="utf-8")
            argv = installer.install(tmp, requirements, flags=_layer_flags(layer))
            _run_step(installer, argv, target, out, f"installing step {step} of {len(layers)}")
        return
    folder = tmp / "distrun-layers"
    folder.mkdir()

    def run(argv: list[str], step: int) -> None:
        _run_step(installer, argv, target, out, f"resolving install step {step} of {len(layers)}")

    resolved = resolve_layers(installer.binary, list(layers), ["--python", str(tmp / "bin" / "python")], folder, run)
    if resolved.replaced:
        _say(out, f"distrun: as the image's later install steps do, they replace: {'; '.join(resolved.replaced)}")
    options = list(dict.fromkeys(line for layer in layers for line in layer.lines if line.startswith("-")))
    requirements = tmp / "distrun-requirements.txt"
    requirements.write_text("".join(line + "\n" for line in options + resolved.lines()), encoding="utf-8")
    remove_tree(folder)
    argv = installer.install(tmp, requirements, flags=("--no-deps",))
    _run_step(installer, argv, target, out, "installing the requirements")


def _layer_flags(layer: Layer) -> tuple[str, ...]:
    return (("--upgrade",) if layer.upgrade else ()) + (("--no-deps",) if layer.no_deps else ())


def _umask() -> int:
    from distrun.core.file_modes import current_umask

    return current_umask()


def _run_step(installer: Installer, argv: list[str], target: BuildTarget, out: TextIO, what: str) -> None:
    """Run one installer command as a helper process, its output shown as one progress line."""
    lines: list[str] = []
    try:
        # A helper: it and whatever it starts (build backends, compilers) end with distrun,
        # also when distrun is killed, so no build runs on into a folder the next job cleaned.
        proc = start_helper(
            argv,
            installer.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=target.request.base_dir if target.request.base_dir.is_dir() else None,
        )
    except OSError as exc:
        raise DistrunError(f"could not start {installer.name} ({what}): {exc}", "pip install 'distrun[envs]'") from None
    timer = threading.Timer(BUILD_TIMEOUT, _kill_group, (proc,))
    timer.start()
    progress = _Progress(out, target.key[:12])
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                lines.append(line)
                progress.show(line)
        code = proc.wait()
    except BaseException:
        _kill_group(proc)  # Ctrl-C or job cancel while building: the installer goes too
        proc.wait()
        raise
    finally:
        timer.cancel()
        progress.done()
    if code != 0:
        raise DistrunError(*_failure(target, lines, what, code))


# Printed by the environment's own interpreter: the pip wheel its ensurepip carries (and the
# setuptools wheel, which ensurepip carries up to Python 3.11 and `python -m venv` installs with
# pip there), or those a Debian-style system keeps in /usr/share/python-wheels (whose python3 has
# no ensurepip).
_BUNDLED_WHEELS = """
import glob, os, sys
try:
    import ensurepip
    places = [os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")]
except ImportError:
    places = []
places.append("/usr/share/python-wheels")
for place in places:
    found = sorted(glob.glob(os.path.join(place, "pip-*.whl")))
    if found:
        print(found[-1])
        print(*sorted(glob.glob(os.path.join(place, "setuptools-*.whl")))[-1:])
        break
"""


def bundled_wheels(python: Path) -> tuple[Path, ...]:
    """The pip wheel that comes with `python` (ensurepip's), and its setuptools wheel where it
    has one, for seeding an environment offline as `python -m venv` would; () if none."""
    try:
        out = subprocess.run(
            [str(python), "-c", _BUNDLED_WHEELS], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    found = tuple(Path(line) for line in out.stdout.split() if line.endswith(".whl"))
    return found if out.returncode == 0 else ()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Progress:
    """On a terminal, one line rewritten with the installer's latest output; elsewhere nothing
    (the start and end lines say enough in a log)."""

    def __init__(self, out: TextIO, key: str) -> None:
        self.out = out
        self.key = key
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.started = time.monotonic()

    def show(self, line: str) -> None:
        if self.live:
            text = f"distrun: building {self.key} [{time.monotonic() - self.started:5.1f} s] {line}"
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.out.write("\r\033[K" + text[:width])
            self.out.flush()

    def done(self) -> None:
        if self.live:
            self.out.write("\r\033[K")
            self.out.flush()


def _failure(target: BuildTarget, lines: list[str], what: str, code: int) -> tuple[str, str]:
    """The message for a failed step: which requirement, where it was written, the installer's words."""
    failing = failing_requirement(target.request.requirements, lines)
    tail = "\n".join("      " + line for line in lines[-12:])
    if failing is not None:
        where = f" ({failing.position})" if failing.position else ""
        head = (
            f"building environment {target.key[:12]} failed: requirement {failing.line!r}{where} could not be installed"
        )
        hint = "fix or remove that requirement in the conda file (check its name and version on the package index)"
    else:
        head = f"building environment {target.key[:12]} failed while {what} (exit code {code})"
        hint = "see the installer's output above; nothing was kept, the next job retries the build"
    return f"{head}\n    installer output:\n{tail}", hint


def failing_requirement(requirements: tuple[Requirement, ...], lines: list[str]) -> Requirement | None:
    """The first requirement whose name the installer's error lines mention."""
    errors = [line.lower().replace("_", "-") for line in lines if _is_error_line(line)] or [
        line.lower().replace("_", "-") for line in lines
    ]
    for line in errors:
        for requirement in requirements:
            name = requirement.name
            if name and _mentions(line, name):
                return requirement
    return None


def _is_error_line(line: str) -> bool:
    lowered = line.lower()
    return any(word in lowered for word in ("error", "because", "not found", "no matching", "failed", "\u00d7"))


def _mentions(line: str, name: str) -> bool:
    import re

    return re.search(rf"(?<![a-z0-9.-]){re.escape(name)}(?![a-z0-9-])", line) is not None


def _retarget_scripts(tmp: Path, final: Path) -> None:
    """Scripts in bin/ name the folder they were built in (shebangs, activate): make them name
    the folder the environment is renamed to."""
    old, new = str(tmp).encode(), str(final).encode()
    for script in (tmp / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if old in data and b"\0" not in data[:8192]:
            mode = script.stat().st_mode
            script.write_bytes(data.replace(old, new))
            os.chmod(script, mode)
    for cfg in tmp.glob("lib/python*/site-packages/*.pth"):
        data = cfg.read_bytes()
        if old in data:
            cfg.write_bytes(data.replace(old, new))


def _write_manifest(tmp: Path, target: BuildTarget, installer: Installer, seal: str) -> None:
    manifest = {
        "seal": seal,
        "key": target.key,
        "python": target.python_version,
        "base_interpreter": str(target.python),
        "requirements": target.request.lines(),
        # An image's install steps, installed in turn (with uv: what they chose is distrun-requirements.txt).
        "layers": [{"lines": list(x.lines), "upgrade": x.upgrade, "no_deps": x.no_deps} for x in target.request.layers],
        "origin": target.request.origin,
        "installer": installer.name,
        "created_at": time.time(),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _touch(folder: Path) -> None:
    try:
        (folder / LAST_USED).write_text(str(time.time()), encoding="utf-8")
    except OSError:
        pass  # a read-only shared cache still works; only `env prune --unused` is less exact
