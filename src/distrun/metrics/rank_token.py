"""The ranks' MLflow token: in an owner-only file of the job folder, never one of its variables
(plan, bindings and record are readable by others); the node agent gives it to the ranks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from distrun.core.file_modes import write_all
from distrun.core.safe_files import read_text

TOKEN_FILE = "tracking.token"
TOKEN_VARIABLE = "MLFLOW_TRACKING_TOKEN"


def write_token(job_dir: Path, token: str) -> None:
    write_owner_only(job_dir / TOKEN_FILE, token)


def write_owner_only(path: Path, text: str) -> None:
    """`text` in a file only its owner reads, never through a link, never left half written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        write_all(fd, text.encode("utf-8"))
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)


def read_token(job_dir: Path) -> str | None:
    """None when the job has none (or the file is not distrun's: the job's processes can replace it)."""
    try:
        return read_text(job_dir / TOKEN_FILE, 256, root=job_dir).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def with_token(environment: Mapping[str, str], token: str | None) -> dict[str, str]:
    """`environment` with the job's token over any other (distrun's server admits only its own)."""
    return {**environment, TOKEN_VARIABLE: token} if token else dict(environment)
