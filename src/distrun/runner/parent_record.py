"""A parent job's own record (a pipeline's, a sweep's): no processes, its children under `steps`,
the process that supervises it as its launcher, so a parent whose supervisor died is found
"launcher lost" by the next reader, as a job's is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.store.index import JobIndex
    from distrun.store.layout import Layout


def record_parent(
    index: JobIndex,
    layout: Layout,
    name: str,
    status: JobStatus,
    spec: Any,
    *,
    kind: JobKind,
    compute: str,
    steps: dict[str, Any],
    sweep: dict[str, Any] | None = None,
) -> None:
    """Record the parent (no processes; this process its supervisor) of this kind and make its
    folder. `spec`: the parent's model (its `display_name`, `experiment_name` and `tags` are the record's)."""
    import socket

    from distrun.core.file_modes import DIR_MODE, make_dirs
    from distrun.store.index import JobRecord, process_start_time

    folder = layout.job(name)
    if os.path.lexists(folder.root):  # a link there too, even one to nowhere: never made through
        raise DistrunError(f"a job folder for {name!r} already exists at {folder.root}", "choose another name")
    make_dirs(folder.root.parent)
    pid = os.getpid()
    index.insert(
        JobRecord(
            name=name,
            status=status,
            compute=compute,
            folder=str(folder.root),
            created_at=time.time(),
            started_at=time.time(),
            display_name=spec.display_name or name,
            experiment_name=spec.experiment_name,
            distribution=compute,
            tags={str(k): str(v) for k, v in spec.tags.items()},
            launcher_pid=pid,
            launcher_host=socket.gethostname(),
            launcher_started=process_start_time(pid),
            steps=steps,
            sweep=sweep,
            kind=kind,
        )
    )
    folder.root.mkdir(mode=DIR_MODE)  # not exist_ok: a parent and a job never share a folder


def taken_over(index: JobIndex, name: str, recorded: bool, record: Callable[[], None]) -> bool:
    """The parent's record, made now (`record()`), or, `recorded` by `distrun run -d`, marked
    Running by this background supervisor; False when it was canceled before it started."""
    if not recorded:
        record()
        return True
    return index.update(name, status=JobStatus.RUNNING, started_at=time.time())


def not_started(layout: Layout, name: str, exc: Exception) -> int:
    """A background supervisor that could not load what it runs: the parent ends Failed, said."""
    from distrun.store.index import JobIndex

    why = exc.render() if isinstance(exc, DistrunError) else str(exc)
    JobIndex(layout.db_path).update(name, status=JobStatus.FAILED, reason=f"not started: {why}", ended_at=time.time())
    print(why, flush=True)
    return 1
