"""Time knobs that only the test suite turns: shorter restart pauses, a short Slurm requeue hold,
and how often tests poll. Each is read from the environment, so a run can set it otherwise
(tests/README.md lists them); `apply_test_time_knobs` gives the suite's defaults to whatever is unset.
"""

from __future__ import annotations

import os

# distrun's own pause between attempts (1, 2, 4 ... s for users), as a factor: 0.1 s, 0.2 s ...
RESTART_BACKOFF_SCALE = ("DISTRUN_RESTART_BACKOFF_SCALE", "0.1")
# How long the Slurm test cluster holds a requeued job before it may start again: slurm.conf's
# AuthInfo cred_expire, whose default is 120 s and whose lowest accepted value is 5 s.
SLURM_REQUEUE_HOLD = ("DISTRUN_TEST_SLURM_CRED_EXPIRE", "5")
# How often a test looks at a job's record or a file while it waits for something.
POLL_INTERVAL = ("DISTRUN_TEST_POLL_S", "0.05")


def apply_test_time_knobs() -> None:
    for name, default in (RESTART_BACKOFF_SCALE, SLURM_REQUEUE_HOLD, POLL_INTERVAL):
        os.environ.setdefault(name, default)


def slurm_cred_expire() -> int:
    return max(int(os.environ.get(SLURM_REQUEUE_HOLD[0], SLURM_REQUEUE_HOLD[1])), 5)


def poll_interval() -> float:
    return float(os.environ.get(POLL_INTERVAL[0], POLL_INTERVAL[1]))
