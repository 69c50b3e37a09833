"""What a node whose job folder is its own sends back of it: the job's outputs, as one archive.

On engines whose nodes share nothing with the machine that runs `distrun` (Ray, Kubernetes)
each node writes its named outputs and `./outputs`, `./logs` into its own copy of the job
folder. When its processes have ended, the node packs those folders (`pack_outputs`), the
engine carries the bytes back (Ray: the actor's return value; Kubernetes: the pod's log), and
`distrun` unpacks them into the job folder (`unpack_outputs`), where a later job or pipeline
step reads them as it reads any job's outputs.

The folders were written by the job's processes, so an archive is untrusted on the way in:
only regular files and folders are unpacked, only under the folders packed, never through a
link, never outside the job folder.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath

NAMED_OUTPUTS = "named-outputs"
# `./outputs` and `./logs` of the code folder: Azure ML's artifact folders (store.layout.ARTIFACT_DIRS);
# `hang`: every process's stacks, when the node's agent ended the job hung (agent.hang_report).
ARCHIVED = (NAMED_OUTPUTS, "code/outputs", "code/logs", "hang")


def pack_outputs(job_dir: Path, folders: tuple[str, ...] = ARCHIVED) -> bytes:
    """A gzipped tar of `folders` under `job_dir` that exist; links are stored as links, never followed.

    Empty (b"") when none of them holds a file: nothing needs to travel.
    """
    present = [name for name in folders if (job_dir / name).is_dir() and not (job_dir / name).is_symlink()]
    if not any(_holds_entries(job_dir / name) for name in present):
        return b""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for name in present:
            archive.add(job_dir / name, arcname=name)  # recursive; links stored, FIFOs and devices as such
    return buffer.getvalue()


def unpack_outputs(data: bytes, job_dir: Path, folders: tuple[str, ...] = ARCHIVED) -> list[str]:
    """Unpack an archive of `pack_outputs` into `job_dir`; returns what was left out, and why.

    Kept: regular files and folders whose names lie under one of `folders`. Left out: links,
    devices, pipes, and any name outside those folders. Python's `data` filter also refuses a
    member whose path, links resolved, would leave `job_dir`.
    """
    if not data:
        return []
    left_out: list[str] = []

    def only_outputs(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        name = PurePosixPath(member.name)
        if not (member.isfile() or member.isdir()):
            left_out.append(f"{member.name}: not a regular file or folder")
            return None
        if name.is_absolute() or ".." in name.parts or not any(_under(name, folder) for folder in folders):
            left_out.append(f"{member.name}: outside {', '.join(folders)}")
            return None
        try:
            return tarfile.data_filter(member, dest)
        except tarfile.FilterError as exc:
            left_out.append(f"{member.name}: {exc}")
            return None

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(job_dir, filter=only_outputs)
    return left_out


def _holds_entries(folder: Path) -> bool:
    """Whether anything but folders is below `folder` (os.walk follows no link)."""
    return any(files or any(os.path.islink(os.path.join(top, d)) for d in dirs) for top, dirs, files in os.walk(folder))


def _under(name: PurePosixPath, folder: str) -> bool:
    top = PurePosixPath(folder)
    return name == top or top in name.parents
