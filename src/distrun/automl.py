"""`azure.ai.ml.automl` for distrun: AutoML jobs (`automl.classification(...)`, ...) are not
provided yet, so importing this module (`from distrun.automl import ...`) says what to do instead,
as `from distrun import automl` does, rather than "No module named"."""

from distrun.sdk import not_provided

raise not_provided.import_error(not_provided.ROOT, "automl")
