"""Where a path written in a job points on this machine: a local path or file:// URL, resolved
against the job's folder; None for a remote URI (datastores, assets, URLs: `distrun.data`)."""

from __future__ import annotations

from pathlib import Path

from distrun.core.user_paths import expand_user

REMOTE_SCHEMES = ("azureml:", "https://", "http://", "wasbs://", "abfss://", "adl://", "s3://", "gs://")


def local_path(base_dir: Path, text: str) -> Path | None:
    """A local path or file:// URL resolved against the job's folder; None for remote URIs."""
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif text.startswith(REMOTE_SCHEMES) or "://" in text:
        return None
    path = expand_user(Path(text))
    return path if path.is_absolute() else (base_dir / path)
