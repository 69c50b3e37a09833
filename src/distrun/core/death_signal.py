"""A child's parent-death signal (PR_SET_PDEATHSIG) set without running Python in the child.

The signal must be set by the child itself, between fork and exec. A `preexec_fn` does that in
Python, which makes subprocess fork() the whole parent instead of vfork() and run Python in a
copy of a possibly multi-threaded process: unsafe, and slow (128 ranks of a local job took 1.7 s
to start that way on 2 cores; one spawn from a 100-400 MB parent takes 4-11 ms, against 0.3 ms
without). util-linux's `setpriv --pdeathsig SIG --` sets it and execs the
command in the same process, so the parent whose death counts is still ours. An old setpriv
(util-linux before 2.33) lacks the option. Its option table names every long option it
accepts, so "pdeathsig" among the binary's strings answers at the cost of one read (0.05 ms);
a setpriv without that string (another build, a wrapper script) is asked by running it once
per signal and process (2-4 ms, on the way to every job's first rank).
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache


@cache
def setpriv_prefix(signal_name: str) -> tuple[str, ...]:
    """`setpriv --pdeathsig <signal_name> --` where it works here, else () (then a preexec hook must do it)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    prefix = (setpriv, "--pdeathsig", signal_name, "--")
    if _names_option(setpriv, b"pdeathsig"):
        return prefix
    true = shutil.which("true")
    if true is None:
        return ()
    try:
        probe = subprocess.run([*prefix, true], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    return prefix if probe.returncode == 0 else ()


def _names_option(program: str, option: bytes) -> bool:
    """Whether the executable holds `option` as a string of its own (NUL on both sides), as
    getopt_long's table of long options keeps it."""
    try:
        with open(program, "rb") as handle:
            return b"\0" + option + b"\0" in handle.read(_MAX_READ)
    except OSError:
        return False


# setpriv is about 80 KB; a file far larger is not the util-linux tool, and is asked by running it.
_MAX_READ = 4 * 1024 * 1024
