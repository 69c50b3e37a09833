"""`python benchmarks/workloads/distrun_cli.py ARGS`: the `distrun` command, ending the ordinary way.

distrun's own entry point leaves without Python's teardown (distrun.core.process_exit), which
also skips what a profiler writes at exit: `python -m cProfile -o FILE` runs this instead.
"""

from __future__ import annotations

import sys

from distrun.cli.main import main

if __name__ == "__main__":
    try:
        main()
    except SystemExit as done:
        sys.exit(done.code)
