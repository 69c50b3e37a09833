"""`outputs/` and `logs/` in a process's working folder before it starts, as Azure ML makes them.

Scripts written for Azure ML write `./outputs/model.pt` or `> ./outputs/x.txt` without creating
the folder; what lands there is the job's artifacts (`distrun.store.layout.ARTIFACT_DIRS`).
Every node that starts processes makes them: the gang for its own processes, the remote-start
server for the ranks mpirun starts on its node (nodes that do not share the job folder).

The folder may already hold what an earlier attempt's processes left there, a link among it:
each name is made with mkdir relative to the opened working folder, which never follows a link
at that name, and whatever is already there is left as it is. A working folder inside the job
folder is opened from the job folder down without following a link (`code/` swapped for a link
to a folder of the host, which a rank in a container cannot write, gets nothing made there).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from distrun.core.file_modes import DIR_MODE
from distrun.core.safe_files import open_folder_beneath
from distrun.store.layout import ARTIFACT_DIRS


def make_artifact_dirs(working_folders: Iterable[str], job_root: Path | None = None) -> None:
    """Each folder's `outputs/` and `logs/`, made where missing; never raises.

    A working folder that cannot be opened is left to the process's own start to report (it
    fails there with the path), and one that cannot be written (code baked into a read-only
    image) gets nothing: the process then sees what it would see on Azure ML without them.
    """
    for folder in dict.fromkeys(working_folders):
        try:
            fd = _open_working_folder(folder, job_root)
        except OSError:
            continue
        try:
            for name in ARTIFACT_DIRS:
                try:
                    os.mkdir(name, DIR_MODE, dir_fd=fd)
                except OSError:
                    pass  # already there (a folder, or a link or file the job made), or not writable
        finally:
            os.close(fd)


def _open_working_folder(folder: str, job_root: Path | None) -> int:
    """The folder, opened without following a link below `job_root` when it lies in it."""
    if job_root is not None:
        try:
            relative = Path(folder).relative_to(job_root)
        except ValueError:
            pass  # not in the job folder: the job's processes did not make its path
        else:
            return open_folder_beneath(job_root, relative.as_posix())
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
