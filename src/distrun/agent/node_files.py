"""Writing the files a node's processes read (an MPI hostfile), before any of them starts."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from distrun.agent.folder_writes import write_beneath
from distrun.plan.model import NodePlan


def write_node_files(node: NodePlan, job_dir: Path) -> None:
    """Each `NodePlan.files` entry, at its job-relative path; a path leaving the job folder is refused,
    and so is a folder on the way that the job's processes (of an earlier attempt) replaced with a link."""
    for relative, content in node.files.items():
        parts = PurePosixPath(relative).parts
        if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
            raise OSError(f"node file path {relative!r} is not inside the job folder")
        write_beneath(job_dir, "/".join(parts[:-1]), parts[-1], content.encode("utf-8"))
