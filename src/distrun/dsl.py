"""`azure.ai.ml.dsl` (pipelines) has no distrun counterpart: importing it says so."""

from distrun import not_run_here

raise not_run_here("dsl")
