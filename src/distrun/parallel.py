"""`azure.ai.ml.parallel` for distrun: parallel jobs (`parallel_run_function`, `RunFunction`) are
not provided yet, so importing this module (`from distrun.parallel import ...`) says what to do
instead, as `from distrun import parallel` does, rather than "No module named"."""

from distrun.sdk import not_provided

raise not_provided.import_error(not_provided.ROOT, "parallel")
