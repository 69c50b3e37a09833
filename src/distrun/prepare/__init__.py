"""Preparation: compute targets and a job recorded with its folder filled (`PreparedJob`)."""
