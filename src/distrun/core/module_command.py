"""How a distrun process starts another distrun module: `python -m MODULE`, or through the zip it runs from.

A Kubernetes pod runs distrun from the zip its job's ConfigMap carries, with any image's Python
(which need not have distrun installed): the processes it starts (the helper guard, mpirun's
remote start) must find distrun the same way, so they run `python ZIP MODULE`, whose
`__main__.py` runs MODULE from the zip.
"""

from __future__ import annotations

import os
import sys


def distrun_root() -> str:
    """The folder (or zip) the running distrun package lies in: site-packages, src/, or the pod's zip."""
    core = os.path.dirname(os.path.abspath(__file__))  # .../distrun/core
    return os.path.dirname(os.path.dirname(core))


def running_zip() -> str | None:
    """The zip this distrun was imported from (zipimport), or None for an installed distrun."""
    root = distrun_root()
    return root if os.path.isfile(root) else None


def module_argv(module: str, python: str | None = None) -> list[str]:
    """The command that runs `python -m MODULE` with this process's distrun."""
    archive = running_zip()
    exe = python or sys.executable
    return [exe, archive, module] if archive else [exe, "-m", module]
