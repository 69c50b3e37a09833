"""What a Ray job's driver writes into the job folder on its own machine, from its nodes' replies.

The nodes' per-rank log bytes are appended to `user_logs/` (and their agents' own output to
`system_logs/`); the files the nodes exchange through the job folder (stack requests and
answers, progress: `agent.folder_mirror`) are kept per node, and a node's `hang/` files (every
node's stacks, read by the node that saw the job hang) land in the job folder here. Every file
is made and opened without following a link below the job folder (`core.safe_files`).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from distrun.agent.folder_mirror import SHARED, Changes, MirrorSide
from distrun.agent.folder_writes import write_beneath
from distrun.agent.hang_report import HANG_FOLDER
from distrun.backends.ray.placement import PlacementRequest
from distrun.core.file_modes import open_append, write_all, write_file_beneath
from distrun.core.json_encoding import compact_json
from distrun.plan.model import LaunchPlan
from distrun.store.layout import JobFolder

DRIVER_LOG = "system_logs/ray_driver.txt"  # what the driver itself has to say of the run
PLACEMENT_FILE = "ray_placement.json"  # in system_logs/: the placement group, where each node is


class DriverFiles:
    """The job folder as the driver fills it: logs held open for appending, one mirror side per node."""

    def __init__(self, folder: JobFolder) -> None:
        self.folder = folder
        self.log_fds: dict[str, int] = {}
        self.mirrors: dict[int, MirrorSide] = {}

    def append(self, relative: str, data: bytes) -> None:
        fd = self.log_fds.get(relative)
        if fd is None:
            fd = self.log_fds[relative] = open_append(self.folder.root / relative, root=self.folder.root)
        write_all(fd, data)

    def mirror(self, node_rank: int) -> MirrorSide:
        """The job folder's exchanged files as node `node_rank` was last told them."""
        side = self.mirrors.get(node_rank)
        if side is None:
            side = self.mirrors[node_rank] = MirrorSide(self.folder.root, SHARED)
        return side

    def changes_for(self, node_rank: int) -> dict[str, Any]:
        """What node `node_rank` has not been told yet of the exchanged files, as its poll carries it."""
        return self.mirror(node_rank).changes().to_dict()

    def take_mirrored(self, node_rank: int, data: object) -> None:
        """A node's new stack requests and answers and progress, for `job stacks` and the other
        nodes; its hang/ (every node's stacks, read by the node that saw the job hang)."""
        changes = Changes.from_dict(data)
        self.mirror(node_rank).apply(changes)
        for relative, content in changes.written.items():
            folder, _, name = relative.rpartition("/")
            if folder == HANG_FOLDER and name and not name.startswith("."):
                with contextlib.suppress(OSError):
                    write_beneath(self.folder.root, HANG_FOLDER, name, content)

    def write_plan(self, plan: LaunchPlan, request: PlacementRequest, wheres: list[dict[str, Any]]) -> None:
        """plan.json, and where Ray placed each node (system_logs/ray_placement.json)."""
        write_file_beneath(self.folder.root, self.folder.plan_json, compact_json(plan.to_dict()))
        placed = {"placement_group": request.to_dict(), "nodes": wheres}
        logs = self.folder.system_logs.name
        write_beneath(self.folder.root, logs, PLACEMENT_FILE, json.dumps(placed, indent=2).encode("utf-8"))

    def close(self) -> None:
        for fd in self.log_fds.values():
            os.close(fd)
        self.log_fds.clear()
