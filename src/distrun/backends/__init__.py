"""Backends: each turns a prepared job into its engine's request, runs it, and maps state back.

The contract every backend implements in full is `distrun.backends.base.Backend`, through one
of its two families: `engine` (an engine keeps the job's state: Slurm, Kubernetes) and
`supervised` (a distrun process here supervises it: local, Ray). The registry
(`distrun.backends.registry`) maps a compute type to its backend and imports it only when a job
needs it. Adding a backend is one package plus one registry line (in `distrun.prepare.compute.BACKENDS`).
Here: `local` (simulated nodes on this machine, one in-process gang), `slurm`; `cluster` holds
what every cluster backend shares (first failure across node outcomes, record refresh),
`values` the values the contract passes, `ports` the one free-port finder, `targets` the compute
targets of config.yaml (`distrun.prepare.compute`'s). Only the orchestrator (`distrun.runner.jobs`, and
`distrun.runner.attach` for `distrun run`) calls a backend; a backend never prints.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from distrun.backends.base import Backend

__all__ = ["backend_for"]


def backend_for(kind: str) -> Backend:
    """The registry's `backend_for`, imported when first called: a module of a backend (a node's
    ports step, distrun.backends.ports) imports this package and must not pay for the registry."""
    from distrun.backends.registry import backend_for as registered

    return registered(kind)
