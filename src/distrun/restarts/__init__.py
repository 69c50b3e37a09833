"""Restarts: the policy a job's limits set, attempts kept and read back, and their logs."""
