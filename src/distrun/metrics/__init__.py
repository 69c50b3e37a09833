"""Metrics of a job: an MLflow run per job, wired as Azure ML wires it, and reading it back."""
