"""Job-wide "the main work is done", for node agents that each see only their own node.

Auxiliary processes (TensorFlow parameter servers, and the workers under a chief) serve until
distrun stops them, once every non-auxiliary process of the *job* has completed. One agent
running every node knows that by itself; an agent per node (Slurm) learns it from its peers:
each writes a marker into the job folder, which every node sees, when its own main processes
have all completed, and stops its auxiliaries once all nodes have written theirs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

# How often an agent waiting only for its peers looks at their markers.
POLL_SECONDS = 0.25


class MainWorkPeers(Protocol):
    def mark_done(self) -> None: ...

    def all_done(self) -> bool: ...


class FolderPeers:
    """Markers `main_done_NN` in a folder on the job's shared filesystem."""

    def __init__(self, folder: Path, node_rank: int, node_count: int) -> None:
        self.folder = folder
        self.node_rank = node_rank
        self.node_count = node_count

    def _marker(self, node_rank: int) -> Path:
        return self.folder / f"main_done_{node_rank:02d}"

    def mark_done(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".main_done_{self.node_rank:02d}.{os.getpid()}"
        tmp.write_text("done\n", encoding="utf-8")
        tmp.replace(self._marker(self.node_rank))

    def all_done(self) -> bool:
        return all(self._marker(rank).exists() for rank in range(self.node_count))
