"""Where the web UI gets jobs from: the one place it touches distrun's job calls.

The UI never asks which engine a job runs on: it lists, reads, cancels and finds the folder
of a job through these functions, whatever backend ran it (a Slurm job's record is brought up
to date from Slurm by the index itself).
"""

from __future__ import annotations

from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout


class JobsSource:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _index(self) -> JobIndex:
        # A fresh index object per call: requests are served on several threads, and an index
        # keeps one connection per thread.
        return JobIndex(self.layout.db_path)

    def list(self, limit: int = 200) -> list[JobRecord]:
        if not self.layout.db_path.exists():
            return []
        return self._index().list(limit)

    def get(self, name: str) -> JobRecord:
        return self._index().get(name)

    def cancel(self, name: str) -> JobRecord:
        """Blocks until the job's record says it ended (up to its grace period and a little more)."""
        from distrun.cancel import cancel_job

        return cancel_job(self.layout, name)

    def folder(self, record: JobRecord) -> JobFolder:
        return self.layout.job(record.name)
