"""This machine's GPUs, for slicing between simulated nodes (`distrun.plan.gpus`)
and between a pipeline's local steps: a fact of the machine, read where a job is prepared.

CUDA_VISIBLE_DEVICES when it is set (also "" or "-1": none), as CUDA itself would see them;
else the driver's list from `nvidia-smi -L`; else none. A probe that fails or hangs means
no GPUs: a CPU job must never fail because of it.

One `distrun run` asks several times within a second (its preflight, the preview plan, the
first attempt's plan), and `nvidia-smi` starts NVML on every call: 10-20 ms each on the
one-GPU machine measured. So the driver's answer is reused for `LISTING_REUSE_S`; an attempt
that starts later (a restart after a failure) asks the driver again, so a GPU lost meanwhile is
seen.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping

from distrun.core.death_signal import setpriv_prefix
from distrun.plan.gpus import VISIBLE_DEVICES, parse_visible_devices

PROBE_TIMEOUT_S = 10.0
LISTING_REUSE_S = 30.0
# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`; MIG devices are indented lines under it.
_GPU_LINE = re.compile(r"^GPU (\d+):")


def probe_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    env = os.environ if environ is None else environ
    visible = parse_visible_devices(env.get(VISIBLE_DEVICES))
    if visible is not None:
        return visible
    return driver_gpus()


# (monotonic time the listing ended, the `nvidia-smi` that gave it, the GPUs it listed)
_last_listing: tuple[float, str, tuple[str, ...]] | None = None


def driver_gpus() -> tuple[str, ...]:
    """GPU indices as `nvidia-smi -L` lists them; () without nvidia-smi or when it fails."""
    global _last_listing
    program = shutil.which("nvidia-smi")
    if program is None:
        return ()
    last = _last_listing
    if last is not None and last[1] == program and time.monotonic() - last[0] < LISTING_REUSE_S:
        return last[2]
    gpus = _ask_driver(program)
    _last_listing = (time.monotonic(), program, gpus)
    return gpus


def _ask_driver(program: str) -> tuple[str, ...]:
    try:
        listing = subprocess.run(
            [*setpriv_prefix("KILL"), program, "-L"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if listing.returncode != 0:
        return ()
    return parse_gpu_list(listing.stdout)


def parse_gpu_list(text: str) -> tuple[str, ...]:
    return tuple(match.group(1) for line in text.splitlines() if (match := _GPU_LINE.match(line)))
