"""Compute targets, by their older name: they live in `distrun.prepare.compute`, below the backends
(a prepared job names its target, and preparation comes before any backend)."""

from __future__ import annotations

from distrun.prepare.compute import (
    INFRASTRUCTURE_TYPES,
    LOCAL,
    TARGET_TYPES,
    ComputeTarget,
    add_target,
    read_targets,
    resolve_target,
    target_name,
)

__all__ = [
    "INFRASTRUCTURE_TYPES",
    "LOCAL",
    "TARGET_TYPES",
    "ComputeTarget",
    "add_target",
    "read_targets",
    "resolve_target",
    "target_name",
]
