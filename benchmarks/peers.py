"""The tools distrun is measured against, installed by the benchmark itself.

torchrun comes with torch. TorchX comes from PyPI into its own virtual environment
(`benchmarks/.peers`, which sees this interpreter's packages, torch included): its
dependencies pin versions (urllib3 < 2) that must not change the environment distrun runs in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TORCHX_VERSION = "0.7.0"
PEERS_DIR = Path(__file__).resolve().parent / ".peers"


@dataclass(frozen=True)
class Peers:
    python: str  # the interpreter every rank runs, whichever tool starts it
    torchrun: list[str]
    torchx: list[str] | None  # None: not installed (see `notes`)
    torch_version: str
    torchx_version: str | None
    notes: tuple[str, ...] = ()

    def path_env(self, base: str) -> str:
        """PATH for the peers: the venv's tools, then this interpreter's (for `torchrun`)."""
        first = [str(PEERS_DIR / "bin")] if self.torchx else []
        first.append(str(Path(self.python).parent))
        return os.pathsep.join([*first, base])


def _venv_python() -> Path:
    return PEERS_DIR / "bin" / "python"


def _torchx_installed() -> str | None:
    python = _venv_python()
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import torchx; print(torchx.__version__)"], capture_output=True, text=True
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def install_torchx(log: object = print) -> str | None:
    """Idempotent: creates the venv and installs TorchX unless the right version is there."""
    version = _torchx_installed()
    if version == TORCHX_VERSION:
        return version
    log(f"setup: installing torchx=={TORCHX_VERSION} into {PEERS_DIR}")  # type: ignore[operator]
    if not _venv_python().exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(PEERS_DIR)], check=True)
    subprocess.run(
        [str(_venv_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"torchx=={TORCHX_VERSION}"],
        check=True,
    )
    return _torchx_installed()


def find_peers(setup: bool, log: object = print) -> Peers:
    # Not `import torch`: it would make this process big, and a process's peak RSS starts from
    # its parent's size at fork, so every measured child would look bigger than it is.
    from importlib.metadata import version

    notes = []
    python = sys.executable
    script = Path(python).parent / "torchrun"
    torchrun = [str(script)] if script.exists() else [python, "-m", "torch.distributed.run"]
    torchx_version = None
    if setup:
        try:
            torchx_version = install_torchx(log)
        except (OSError, subprocess.CalledProcessError) as exc:
            notes.append(f"TorchX could not be installed ({exc}); its rows are missing")
    else:
        torchx_version = _torchx_installed()
        if torchx_version is None:
            notes.append("TorchX is not installed (run without --no-setup to install it); its rows are missing")
    torchx = None
    if torchx_version:
        binary = PEERS_DIR / "bin" / "torchx"
        torchx = [str(binary)] if binary.exists() else [str(_venv_python()), "-m", "torchx.cli.main"]
    if shutil.which("bash") is None:
        notes.append("bash is missing: the bare-loop baselines cannot run")
    return Peers(python, torchrun, torchx, version("torch"), torchx_version, tuple(notes))
