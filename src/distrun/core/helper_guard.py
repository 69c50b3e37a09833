"""`python -m distrun.core.helper_guard MARKER`: outlive a distrun process, then end its helpers.

Started by `distrun.core.helper_processes` with its stdin the read end of a pipe that only that
distrun holds open. EOF on stdin means distrun has ended (cleanly or killed): every process whose
environment holds `DISTRUN_HELPER_OF=MARKER` is killed, again and again while any is left (a
helper may be forking as it dies).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from distrun.core import procfs
from distrun.core.launch_leftovers import kill_pids

HELPER_MARKER = "DISTRUN_HELPER_OF"
ROUNDS = 250  # 20 ms apart: 5 s at most


def marked_pids(marker: str) -> list[int]:
    needle = f"{HELPER_MARKER}={marker}".encode()
    me = os.getpid()
    return [pid for pid, environ in procfs.environments() if pid != me and needle in environ and procfs.is_alive(pid)]


def sweep(marker: str) -> None:
    for _ in range(ROUNDS):
        pids = marked_pids(marker)
        if not pids:
            return
        kill_pids(pids, signal.SIGKILL)
        time.sleep(0.02)


def main(marker: str) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # meant for distrun, which we outlive
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    sweep(marker)


if __name__ == "__main__":
    main(sys.argv[1])
