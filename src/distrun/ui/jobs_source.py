"""Where the web UI gets jobs from: the orchestrator (`distrun.runner.jobs`), as the CLI and the SDK do.

The UI never asks which engine a job runs on: it lists, reads and cancels jobs through these
calls, whatever backend ran them (an engine job's record is brought up to date from its engine
by the orchestrator), and finds each job's folder through the store's layout.
"""

from __future__ import annotations

from distrun.runner import jobs
from distrun.store.index import JobRecord
from distrun.store.layout import JobFolder, Layout


class JobsSource:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def list(self, limit: int = 200) -> list[JobRecord]:
        if not self.layout.db_path.exists():
            return []  # no job yet: do not create an empty index just to show none
        return jobs.list_jobs(self.layout, limit)

    def get(self, name: str) -> JobRecord:
        return jobs.get_job(self.layout, name)

    def cancel(self, name: str) -> JobRecord:
        """Blocks until the job's record says it ended (up to its grace period and the backend's margin)."""
        return jobs.cancel_job(self.layout, name)

    def fetch_logs(self, record: JobRecord) -> None:
        """Bring an engine job's per-rank logs into its folder (a no-op where nodes share it)."""
        jobs.fetch_logs(self.layout, record)

    def folder(self, record: JobRecord) -> JobFolder:
        return self.layout.job(record.name)
