"""A child's parent-death signal (PR_SET_PDEATHSIG) set without running Python in the child.

The signal must be set by the child itself, between fork and exec. A `preexec_fn` does that in
Python, which makes subprocess fork() the whole parent instead of vfork() and run Python in a
copy of a possibly multi-threaded process: unsafe, and slow (128 ranks of a local job took 1.7 s
to start that way on 2 cores; one spawn from a 100-400 MB parent takes 4-11 ms, against 0.3 ms
without). util-linux's `setpriv --pdeathsig SIG --` sets it and execs the
command in the same process, so the parent whose death counts is still ours. An old setpriv
lacks the option, so it is probed once per signal and process.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache


@cache
def setpriv_prefix(signal_name: str) -> tuple[str, ...]:
    """`setpriv --pdeathsig <signal_name> --` where it works here, else () (then a preexec hook must do it)."""
    setpriv = shutil.which("setpriv")
    true = shutil.which("true")
    if setpriv is None or true is None:
        return ()
    prefix = (setpriv, "--pdeathsig", signal_name, "--")
    try:
        probe = subprocess.run([*prefix, true], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    return prefix if probe.returncode == 0 else ()
