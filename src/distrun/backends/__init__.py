"""Backends: each turns a plan into its engine's request, runs it, and maps state back.

A backend module offers `dry_run(loaded, layout, target)`, `run_streaming(prepared, layout,
out, color)`, `submit_detached(prepared, layout)` and `cancel(record, layout)`.
"""

from __future__ import annotations

from types import ModuleType

from distrun.errors import DistrunError


def backend_for(kind: str) -> ModuleType:
    if kind == "local":
        from distrun.backends import local

        return local
    raise DistrunError(f"compute type {kind!r} is not supported by this version of distrun")
