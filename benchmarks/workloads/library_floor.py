"""B1's floor for any launcher built like distrun: a Python process that imports the libraries
distrun is built on and starts the same processes, nothing else.

distrun checks a job with pydantic, reads YAML through ruamel.yaml (which keeps line numbers for
its error messages) and parses its command line with click. This script imports those three,
then starts the ranks the way a launcher must (each in its own session, output into a pipe) and
waits for them. It validates nothing, records nothing and keeps no logs, and it leaves without
the interpreter's teardown (as distrun does, distrun.core.process_exit), so whatever distrun takes
beyond it is distrun's own work; what it takes itself no launcher on these libraries can go
below in a fresh process.

Usage: python library_floor.py RANKS COMMAND [ARG...]
"""

from __future__ import annotations

import os
import subprocess
import sys

import click  # noqa: F401  (imported for its cost)
from pydantic import BaseModel  # noqa: F401
from ruamel.yaml import YAML  # noqa: F401


def main() -> None:
    ranks, command = int(sys.argv[1]), sys.argv[2:]
    procs = [
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
        for _ in range(ranks)
    ]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.read()
        proc.wait()
    sys.stdout.flush()
    os._exit(max(proc.returncode for proc in procs))


if __name__ == "__main__":
    main()
