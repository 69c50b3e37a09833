"""distrun: run distributed training jobs written as Azure ML command-job YAML."""

from __future__ import annotations

from distrun.errors import DistrunError, JobFailedError, ValidationError

__version__ = "0.1.0"
__all__ = ["DistrunError", "JobFailedError", "ValidationError", "__version__"]
