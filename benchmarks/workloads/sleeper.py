"""B3: a rank that sleeps; rank BENCH_FAIL_RANK exits 1 after BENCH_FAIL_AFTER seconds.

Writes `start_R`, `fail_R` (just before the failing exit), `term_R` (the moment SIGTERM
arrives) and `gone_R` (just before any exit). Rank BENCH_SLOW_RANK takes BENCH_TERM_DELAY
seconds to clean up after SIGTERM, as a rank saving a checkpoint would. A rank nobody stops
ends by itself after BENCH_SLEEP seconds, with exit status 0.
"""

from __future__ import annotations

import os
import signal
import time

from stamps import rank, stamp


def on_term(signum: int, frame: object) -> None:
    stamp("term")
    if rank() == int(os.environ.get("BENCH_SLOW_RANK", "-1")):
        time.sleep(float(os.environ.get("BENCH_TERM_DELAY", "0")))
    stamp("gone")
    os._exit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, on_term)
    stamp("start")
    if rank() == int(os.environ.get("BENCH_FAIL_RANK", "-1")):
        time.sleep(float(os.environ.get("BENCH_FAIL_AFTER", "1")))
        stamp("fail")
        os._exit(1)
    time.sleep(float(os.environ.get("BENCH_SLEEP", "60")))
    stamp("gone")
    os._exit(0)


if __name__ == "__main__":
    main()
