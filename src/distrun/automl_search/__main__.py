"""`python -m distrun.automl_search`: the AutoML job's one process (docs/automl.md)."""

from __future__ import annotations

import sys

from distrun.automl_search.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
