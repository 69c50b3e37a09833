"""`azure.ai.ml.dsl` for distrun: `from distrun.dsl import pipeline` (or `from distrun import dsl`,
`@dsl.pipeline(...)`) builds a pipeline job from a Python function whose body calls components."""

from __future__ import annotations

from distrun.sdk.pipeline_job import pipeline

__all__ = ["pipeline"]
