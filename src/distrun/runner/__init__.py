"""Orchestration: what the faces call to plan, submit, run, follow, cancel and download jobs."""
