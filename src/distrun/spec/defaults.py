"""Defaults of the job schema that the launch side needs without loading the schema (pydantic)."""

from __future__ import annotations

DEFAULT_GRACE_PERIOD = 10.0  # limits.grace_period: seconds between SIGTERM and SIGKILL
