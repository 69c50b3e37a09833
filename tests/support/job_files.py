"""Job files written into a folder and loaded as the CLI loads them."""

from __future__ import annotations

from pathlib import Path

from distrun.loading.loader import LoadedJob, load_job_file


def write_job(folder: Path, text: str, name: str = "job.yml") -> Path:
    """A job file in `folder`, with the `src` code folder most jobs name."""
    (folder / "src").mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def load_text(folder: Path, text: str, overrides: list[str] | None = None) -> LoadedJob:
    return load_job_file(write_job(folder, text), overrides or [])
