"""Backends: each turns a plan into its engine's request, runs it, and maps state back.

A backend module offers `dry_run(loaded, layout, target)`, `run_streaming(prepared, layout,
out, color)`, `submit_detached(prepared, layout)` and `cancel(record, layout)`; a cluster
backend also `preflight(target, spec)` (before anything is recorded) and `refresh(index, record)`
(the record brought up to date from the engine, for records with a backend id).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from distrun.errors import DistrunError

if TYPE_CHECKING:
    from distrun.store.index import JobIndex, JobRecord


def backend_for(kind: str) -> ModuleType:
    if kind == "local":
        from distrun.backends import local

        return local
    if kind == "slurm":
        from distrun.backends import slurm

        return slurm
    if kind == "ray":
        from distrun.backends import ray

        return ray
    raise DistrunError(f"compute type {kind!r} is not supported by this version of distrun")


def refresh_record(index: JobIndex, record: JobRecord) -> JobRecord:
    """A cluster job's record, brought up to date from its engine (Slurm's state, node outcomes)."""
    from distrun.backends.targets import resolve_target
    from distrun.store.layout import Layout

    try:
        kind = resolve_target(record.compute, Layout(index.db_path.parent).config_path).type
        backend = backend_for(kind)
    except DistrunError:
        return record  # the target was removed from config.yaml: show the record as last known
    refresh = getattr(backend, "refresh", None)
    return refresh(index, record) if refresh is not None else record
