"""Writing the files a node's processes read (an MPI hostfile), before any of them starts."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from distrun.core.file_modes import make_dirs, write_file
from distrun.plan.model import NodePlan


def write_node_files(node: NodePlan, job_dir: Path) -> None:
    """Each `NodePlan.files` entry, at its job-relative path; a path leaving the job folder is refused."""
    for relative, content in node.files.items():
        parts = PurePosixPath(relative).parts
        if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
            raise OSError(f"node file path {relative!r} is not inside the job folder")
        path = job_dir.joinpath(*parts)
        make_dirs(path.parent)
        write_file(path, content.encode("utf-8"))
