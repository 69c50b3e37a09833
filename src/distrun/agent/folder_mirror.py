"""Keeping the small files node agents exchange alike in two copies of a job folder.

Where a job's nodes share no filesystem (Ray), each node has its own copy of the job folder,
and the machine that runs `distrun` has the job's own. The files the agents and `distrun job
stacks` exchange through the job folder (stack requests and answers, each node's last
progress: `agent.stack_requests`, `agent.job_progress`) must reach every copy, and a hung
job's `hang/` must come back. The backend carries them on its own channel (Ray: each poll of
a node's actor): each side of a pair of copies is a `MirrorSide`, which says what was made,
changed or removed there since the last exchange, and applies what the other side said.

Every name in these folders is made by one writer (a request id, an answer's id and node, a
node's progress), so the two sides never change the same file and nothing needs merging.
Files are read and written with the job folder's safe paths: the job's processes can write
these folders on any copy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from distrun.agent.folder_writes import listed_beneath, remove_beneath, write_beneath
from distrun.agent.hang_report import HANG_FOLDER, STACKS_JSON_LIMIT
from distrun.agent.job_progress import PROGRESS
from distrun.agent.stack_requests import ANSWERS, REQUESTS
from distrun.core.safe_files import MAX_METADATA_BYTES, open_beneath, read_fd

# Both ways: what `job stacks` and the node agents ask and answer, and each node's progress.
SHARED = (REQUESTS, ANSWERS, PROGRESS)
# Only from the nodes: what a hung job leaves.
FROM_NODES = (*SHARED, HANG_FOLDER)
_LIMITS = {HANG_FOLDER: STACKS_JSON_LIMIT}


@dataclass
class Changes:
    """What one side made or changed (relative path -> bytes) and removed since the last exchange."""

    written: dict[str, bytes] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"written": self.written, "removed": self.removed}

    @classmethod
    def from_dict(cls, data: object) -> Changes:
        if not isinstance(data, dict):
            return cls()
        written = data.get("written") or {}
        removed = data.get("removed") or []
        return cls(
            {str(k): bytes(v) for k, v in written.items() if isinstance(v, bytes)},
            [str(r) for r in removed],
        )


class MirrorSide:
    """One copy of a job folder's exchanged folders, and what the other copy was last told."""

    def __init__(self, root: Path, folders: Sequence[str]) -> None:
        self.root = root
        self.folders = tuple(folders)
        self.told: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime) when last exchanged

    def changes(self) -> Changes:
        """What changed here since the last exchange; from now on the other side is taken to have it."""
        found = Changes()
        present: set[str] = set()
        for folder in self.folders:
            for name in listed_beneath(self.root, folder):
                if name.startswith("."):
                    continue  # a file being written (folder_writes' temporary name)
                relative = f"{folder}/{name}"
                read = self._read_if_changed(relative, _LIMITS.get(folder, MAX_METADATA_BYTES))
                if read is None:
                    continue
                present.add(relative)
                if read[1] is not None:
                    found.written[relative] = read[1]
        for relative in [r for r in self.told if r not in present]:
            del self.told[relative]
            found.removed.append(relative)
        return found

    def apply(self, changes: Changes) -> None:
        """Write what the other side made or changed (in this side's folders only), remove what it removed."""
        for relative, data in changes.written.items():
            folder, _, name = relative.rpartition("/")
            if folder not in self.folders or not name or name.startswith("."):
                continue
            try:
                write_beneath(self.root, folder, name, data)
            except OSError:
                continue
            self.told.pop(relative, None)
            self._read_if_changed(relative, len(data))  # the other side has it: not to be sent back
        for relative in changes.removed:
            folder, _, name = relative.rpartition("/")
            if folder in self.folders and name:
                remove_beneath(self.root, folder, [name])
                self.told.pop(relative, None)

    def _read_if_changed(self, relative: str, limit: int) -> tuple[tuple[int, int], bytes | None] | None:
        """None when the file is not there (or not a plain file); its bytes only when it changed."""
        try:
            fd = open_beneath(self.root, relative)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            key = (st.st_size, st.st_mtime_ns)
            if self.told.get(relative) == key:
                return key, None
            try:
                data = read_fd(fd, limit, f"{self.root}/{relative}")
            except OSError:
                return None
            self.told[relative] = key
            return key, data
        finally:
            os.close(fd)
