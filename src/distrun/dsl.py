"""`azure.ai.ml.dsl` for distrun: `from distrun import dsl` imports, so a notebook that imports it
runs; building a pipeline is not supported yet and says so (`distrun.NotSupportedYetError`)."""

from __future__ import annotations

from typing import Any

from distrun.core.errors import NotSupportedYetError

__all__ = ["pipeline"]


def pipeline(func: Any = None, **kwargs: Any) -> Any:
    """`@dsl.pipeline(...)`: pipeline jobs are not supported yet."""
    raise NotSupportedYetError(
        "@dsl.pipeline: pipeline jobs are not supported by distrun yet",
        "run each step as its own command job, passing one job's output to the next "
        "(azureml://jobs/<job>/outputs/<name>)",
    )
