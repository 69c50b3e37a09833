"""How node agents tell the backend (and each other) how their nodes ended: the `OutcomeChannel`.

Each agent publishes one `NodeOutcome`; the backend reads all of them to decide the job's status
(the earliest failure across nodes is the root cause). Peer markers carry job-wide facts between
agents while the job runs: `MAIN_WORK_DONE` ("this node's training processes all completed") lets
parameter servers on every node stop only once every node's training is done.

`FolderOutcomeChannel` is the implementation for engines whose nodes share the job folder (local,
Slurm): one JSON file per node and one empty file per marker, written whole (rename), so a reader
on another host never sees half a file, and made in the channel's folder opened without following
a link (the job's processes can write it: `agent.folder_writes`). A backend whose nodes share no
filesystem supplies its own (an actor's return value, a pod's termination message, a key-value store).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from distrun.agent.folder_writes import write_beneath
from distrun.agent.node_facts import NodeOutcome
from distrun.core.safe_files import read_text
from distrun.store.layout import NodeChannelPaths

# The marker an agent sets when its node's main (non-auxiliary) processes all completed.
MAIN_WORK_DONE = "main_done"


class OutcomeChannel(Protocol):
    """Where node agents publish their outcomes and peer markers, and where they (and the backend) read them.

    Every method may be called from any node of the job and from the submitting machine.
    Publishing is idempotent per node rank (the last outcome published for a node wins) and never
    leaves a partial value visible to readers.
    """

    def publish(self, outcome: NodeOutcome) -> None:
        """Record `outcome` as node `outcome.node_rank`'s final report. Raises OSError if it cannot."""
        ...

    def outcomes(self, node_ranks: Iterable[int] | None = None) -> dict[int, NodeOutcome]:
        """The outcomes published so far by `node_ranks` (default: every node), by node rank.

        A node that has not reported is absent. Never raises for a missing or unreadable report
        (that node is simply absent). Cheap enough to poll a few times a second."""
        ...

    def set_marker(self, marker: str, node_rank: int) -> None:
        """Say `marker` (e.g. `MAIN_WORK_DONE`) for node `node_rank`; setting it twice is harmless."""
        ...

    def marked(self, marker: str) -> set[int]:
        """The node ranks that have set `marker` so far."""
        ...


class FolderOutcomeChannel:
    """An `OutcomeChannel` in a folder every node sees (the job folder on a shared filesystem)."""

    def __init__(self, paths: NodeChannelPaths, node_count: int) -> None:
        self.paths = paths
        self.node_count = node_count

    def publish(self, outcome: NodeOutcome) -> None:
        self._write_whole(self.paths.outcome(outcome.node_rank), json.dumps(outcome.to_dict(), indent=2, default=str))

    def outcomes(self, node_ranks: Iterable[int] | None = None) -> dict[int, NodeOutcome]:
        self._revalidate()
        found: dict[int, NodeOutcome] = {}
        for node_rank in range(self.node_count) if node_ranks is None else node_ranks:
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                # In the job folder, which the ranks can write: never through a link or a pipe.
                data = json.loads(read_text(self.paths.outcome(node_rank), root=self.paths.folder.parent))
                found[node_rank] = NodeOutcome.from_dict(data)
        return found

    def set_marker(self, marker: str, node_rank: int) -> None:
        self._write_whole(self.paths.marker(marker, node_rank), "done")

    def marked(self, marker: str) -> set[int]:
        self._revalidate()
        return {rank for rank in range(self.node_count) if self.paths.marker(marker, rank).exists()}

    def _revalidate(self) -> None:
        with contextlib.suppress(OSError):
            os.listdir(self.paths.folder)  # revalidates NFS's cached view of the folder

    def _write_whole(self, path: Path, text: str) -> None:
        """Whole or not at all: readers on other hosts never see half a file."""
        folder = self.paths.folder
        write_beneath(folder.parent, folder.name, path.name, (text + "\n").encode())


class ChannelPeers:
    """The gang's `MainWorkPeers` over a channel: this node's marker, and every node's."""

    def __init__(self, channel: OutcomeChannel, node_rank: int, node_count: int) -> None:
        self.channel = channel
        self.node_rank = node_rank
        self.node_count = node_count

    def mark_done(self) -> None:
        # A channel folder the job's processes replaced with a link refuses the marker: the
        # other nodes then see this node's work as not done, and the job's limits apply.
        with contextlib.suppress(OSError):
            self.channel.set_marker(MAIN_WORK_DONE, self.node_rank)

    def all_done(self) -> bool:
        return len(self.channel.marked(MAIN_WORK_DONE)) >= self.node_count
