"""How the `distrun` command ends: without Python's interpreter teardown, where that is safe.

When a command is done, CPython still tears its interpreter down: it clears every module
(about 320 after `distrun run`), collects garbage and frees memory. Nothing of that is seen
outside the process, yet it took 35-40 ms of each `distrun run` on a 2-core machine (a bare
Python holding only pydantic, ruamel.yaml and click takes 17 ms), a sixth of the command.

So the command leaves once it has done what an exit owes others: the atexit handlers run
(libraries register theirs: coverage data, temporary folders, Ray's shutdown), and stdout and
stderr are flushed. distrun keeps no other file open across the end of a command: the job
record is in SQLite (committed), logs and record files are written with os.write and closed.
Where leaving early cannot be done cleanly (another thread still runs, a stream cannot be
flushed, the exit code is not a number, Python is to show its prompt after the command) the
command exits the ordinary way.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

# What an int exit code can be at the C level; anything else takes the ordinary way.
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def leave(code: object) -> NoReturn:
    """End the process with `code` as sys.exit(code) would, skipping the interpreter's teardown."""
    status = exit_status(code)
    inspect = sys.flags.inspect or os.environ.get("PYTHONINSPECT")  # `python -i`: the prompt follows
    if status is None or inspect or threading.active_count() > 1:
        raise SystemExit(code)  # the ordinary exit: Python prints a message code and joins the threads
    # CPython's own call at exit: runs each handler once and forgets it, so the ordinary exit
    # below, should it still be taken, does not run them again.
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a reader gone, a stream closed: Python's own exit reports it
        raise SystemExit(code) from None
    if threading.active_count() > 1:  # an atexit handler started one
        raise SystemExit(code)
    os._exit(status)


def exit_status(code: object) -> int | None:
    """The process status sys.exit(code) gives, for a code that is None or an int; else None."""
    if code is None:
        return 0
    if isinstance(code, int) and _INT_MIN <= code <= _INT_MAX:
        return code
    return None
