"""`azure.ai.ml.parallel` for distrun: `from distrun.parallel import parallel_run_function, RunFunction`
makes a parallel component in Python, whose call inside an `@pipeline` function is a `type: parallel`
step (docs/parallel.md)."""

from distrun.sdk.parallel_job import ParallelFunction, ParallelNode, RunFunction, parallel_run_function

__all__ = ["ParallelFunction", "ParallelNode", "RunFunction", "parallel_run_function"]
