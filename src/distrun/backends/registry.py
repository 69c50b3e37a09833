"""Compute type -> backend, loaded only when a job needs it.

The table (`BACKENDS`, one line per backend) is `distrun.prepare.compute`'s: each entry names the module
that defines `BACKEND` (an instance of `distrun.backends.base.Backend`), the pip extra that
brings its engine's client, if any, and whether users create its targets (`USER_KINDS`, what
`distrun compute create --type` offers) or distrun provides it (local). A backend whose package
or engine library is missing from this install is reported with what to install, never with a
traceback.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from distrun.core.errors import DistrunError
from distrun.prepare.compute import BACKENDS, COMPUTE_TYPES, USER_KINDS, BackendEntry

if TYPE_CHECKING:
    from distrun.backends.base import Backend

__all__ = ["BACKENDS", "COMPUTE_TYPES", "USER_KINDS", "BackendEntry", "backend_for"]

_loaded: dict[str, Backend] = {}


def backend_for(kind: str) -> Backend:
    """The backend of compute type `kind`; a clear `DistrunError` when it is unknown or not installed."""
    if kind in _loaded:
        return _loaded[kind]
    entry = BACKENDS.get(kind)
    if entry is None:
        raise DistrunError(f"compute type {kind!r} is not supported by this version of distrun")
    try:
        module = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        if entry.module != missing and not entry.module.startswith(missing + "."):
            what = f"it needs the Python package {missing!r}"
        else:
            what = f"this install has no {kind} backend"
        install = f"pip install 'distrun[{entry.extra}]'" if entry.extra else "reinstall distrun"
        raise DistrunError(
            f"compute type {kind!r} is not available in this install of distrun: {what}",
            f"{install}, then try again",
        ) from None
    backend: Backend = module.BACKEND
    _loaded[kind] = backend
    return backend
