"""`distrun job download`: copy a finished job's artifacts and named outputs, like `az ml`.

    <path>/artifacts/outputs, logs          what processes wrote to ./outputs and ./logs
    <path>/artifacts/user_logs, system_logs
    <path>/named-outputs/<name>/
Symbolic links are copied as links, never followed, so nothing outside the job folder is read.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from distrun.errors import DistrunError
from distrun.jobs import get_job
from distrun.store.layout import ARTIFACT_DIRS, Layout


def download_job(layout: Layout, name: str, dest: Path, output_name: str | None, everything: bool) -> list[Path]:
    record = get_job(layout, name)
    if not record.terminal:
        raise DistrunError(
            f"job {name} is {record.status}; download works once it has ended", f"wait with `distrun job stream {name}`"
        )
    folder = layout.job(name)
    pairs: list[tuple[Path, Path]] = []
    if output_name is None or everything:
        for sub in ARTIFACT_DIRS:
            pairs.append((folder.code / sub, dest / "artifacts" / sub))
        pairs.append((folder.user_logs, dest / "artifacts" / "user_logs"))
        pairs.append((folder.system_logs, dest / "artifacts" / "system_logs"))
    names = sorted(p.name for p in folder.named_outputs.iterdir()) if folder.named_outputs.is_dir() else []
    if output_name is not None:
        if output_name not in names:
            raise DistrunError(
                f"job {name} has no named output {output_name!r}", f"its outputs: {', '.join(names) or 'none'}"
            )
        names = [output_name]
    elif not everything:
        names = []
    for out in names:
        pairs.append((folder.named_output(out), dest / "named-outputs" / out))
    written = []
    for source, target in pairs:
        if not source.exists():
            continue
        folder.inside(source)
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        written.append(target)
    return written
