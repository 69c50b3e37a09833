"""Shared-memory files that a framework leaves behind when its ranks end, removed by the node agent.

DeepSpeed's CPU allreduce (its `shm` communication op, used when every rank of a job is on one
machine) gives each rank a file in /dev/shm, `deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_
<MASTER_PORT>_<rank>`, of about 66 MB, and never unlinks it: each 4-rank job left 264 MB of
memory taken until the machine restarted, job after job. The name carries the job's rendezvous
address and port, which distrun leased to that job alone, so once the job's processes on this
node have ended, the files of that address and port are the job's, and nothing maps them.

Only names built from the job's own MASTER_ADDR and MASTER_PORT and the agent's user are
removed: another job's files (another port) and anything else in /dev/shm are never touched.
A link of such a name is removed itself (unlink never follows it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

SHM = Path("/dev/shm")
# name prefixes, with the agent's uid and a rank's MASTER_ADDR and MASTER_PORT; the rank follows
PREFIXES = ("deepspeed_allreduce_buffer_{uid}_{addr}_{port}_",)


def rendezvous_of(environments: Iterable[Mapping[str, str]]) -> set[tuple[str, str]]:
    """The (MASTER_ADDR, MASTER_PORT) pairs the node's processes were given."""
    pairs = ((env.get("MASTER_ADDR"), env.get("MASTER_PORT")) for env in environments)
    return {(addr, port) for addr, port in pairs if addr and port}


def leftover_names(listing: Iterable[str], rendezvous: set[tuple[str, str]], uid: int) -> list[str]:
    """The names in `listing` that the job's frameworks made for `rendezvous`: prefix, then a rank number."""
    prefixes = [p.format(uid=uid, addr=addr, port=port) for p in PREFIXES for addr, port in rendezvous]
    return sorted(name for name in listing if any(name.startswith(p) and name[len(p) :].isdigit() for p in prefixes))


def remove_leftovers(environments: Iterable[Mapping[str, str]], folder: Path = SHM) -> list[str]:
    """Remove from `folder` what the frameworks left for the processes of `environments`; the names removed."""
    try:
        listing = os.listdir(folder)
    except OSError:
        return []  # no /dev/shm here
    stems = tuple(p.split("{", 1)[0] for p in PREFIXES)
    if not any(name.startswith(stems) for name in listing):
        return []  # the usual case: nothing of the kind, and the processes' variables are not looked at
    rendezvous = rendezvous_of(environments)
    removed = []
    for name in leftover_names(listing, rendezvous, os.getuid()):
        try:
            os.unlink(folder / name)
        except OSError:
            continue  # gone already, or not ours to remove
        removed.append(name)
    return removed
