"""A tiny non-torch rank that hangs: it says it is up, stamps the moment of its last word, then sleeps.

The last rank sleeps in another function (`odd_one`): the rank a hung job must be blamed on.
BENCH_OUT holds the stamps (`silent_<rank>`); BENCH_WORLD is the number of ranks.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stamps import rank, stamp


def stuck() -> None:
    time.sleep(3600)


def odd_one() -> None:
    time.sleep(3600)


print("up", rank(), flush=True)
stamp("silent")
if rank() == int(os.environ["BENCH_WORLD"]) - 1:
    odd_one()
else:
    stuck()
