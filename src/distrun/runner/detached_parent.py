"""A parent job (a pipeline, a sweep) supervised from a background process: `distrun run -d`,
`job create` without --stream, the SDK's `jobs.create_or_update`, and a pipeline's sweep step.

The parent is recorded here (Queued, this process its launcher until the supervisor takes it
over), what its supervisor is to run is written to its folder (`RUN_FILE`), and the supervisor
(`python -m distrun.runner.parent_run NAME`) is started in a session of its own, its lines going
to the parent's `system_logs/launcher.txt`. The request names the parent's kind, so the one
supervisor loads each kind through its row in `distrun.runner.job_kinds`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.runner.parent_policy import DetachedParent

if TYPE_CHECKING:
    from distrun.runner.parent_policy import ParentPolicy
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

RUN_FILE = "run_request.json"  # what the background supervisor is asked to run
SUPERVISOR_MODULE = "distrun.runner.parent_run"  # run as `python -m MODULE NAME`


def detached(
    policy: ParentPolicy,
    file: str | None,
    overrides: list[str],
    compute: str | None,
    document: dict[str, Any] | None = None,
    base_dir: Path | None = None,
    **more: Any,
) -> DetachedParent:
    """The parent a policy runs, to start in the background: from its `file` as given (with
    `overrides`), or from the `document` of a parent built in Python, its relative paths starting
    at `base_dir`. `more`: the kind's own keys of the request (a pipeline's sweep step: `step`)."""
    request = {
        "file": None if file is None else str(Path(file).resolve()),
        "overrides": overrides,
        "compute": compute,
        "base_dir": None if base_dir is None else str(base_dir),
        **more,
    }
    fields = {"steps": policy.steps(), **policy.record_fields()}
    return DetachedParent(
        policy.kind, policy.name, policy.spec, policy.record_compute, fields, request, document, policy.built_file
    )


def start_detached(layout: Layout, parent: DetachedParent) -> JobRecord:
    """Record the parent (Queued) and start its background supervisor; its record."""
    from distrun.runner.parent_record import record_parent
    from distrun.store.index import JobIndex

    index = JobIndex(layout.db_path)
    record_parent(
        index,
        layout,
        parent.name,
        JobStatus.QUEUED,
        parent.header,
        kind=JobKind(parent.kind),
        compute=parent.compute,
        **parent.fields,
    )
    request = {"kind": parent.kind, **parent.request}
    if parent.built is not None:  # written to the parent's folder (JSON is YAML)
        from distrun.core.file_modes import write_file_beneath

        root = layout.job(parent.name).root
        built = root / parent.built_file
        write_file_beneath(root, built, (json.dumps(parent.built, indent=2) + "\n").encode("utf-8"))
        request["file"] = str(built.resolve())
    start_supervisor(layout, parent.name, request)
    return index.get(parent.name)


def start_supervisor(layout: Layout, name: str, request: dict[str, Any]) -> None:
    """The recorded parent `name` supervised from a new background process, which reads `request`
    from the parent's folder; what it says goes to the parent's `system_logs/launcher.txt`."""
    import subprocess
    import sys

    from distrun.core.file_modes import make_dirs_beneath, open_append, write_file_beneath
    from distrun.store.index import JobIndex

    folder = layout.job(name)
    # Made and written without following a link planted on the way (`core.safe_files`).
    make_dirs_beneath(folder.root, folder.system_logs.name)
    write_file_beneath(folder.root, folder.root / RUN_FILE, json.dumps(request).encode("utf-8"))
    log = os.fdopen(open_append(folder.launcher_log, root=folder.root), "ab")
    env = dict(os.environ, DISTRUN_HOME=str(layout.home))
    proc = subprocess.Popen(
        [sys.executable, "-m", SUPERVISOR_MODULE, name],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    log.close()
    JobIndex(layout.db_path).set_launcher(name, proc.pid)


def read_request(layout: Layout, name: str) -> dict[str, Any]:
    """What `start_supervisor` asked of this background supervisor."""
    from distrun.core.safe_files import read_text

    return json.loads(read_text(layout.job(name).root / RUN_FILE))
