"""This machine's GPUs, for slicing between simulated nodes (`distrun.plan.gpus`).

CUDA_VISIBLE_DEVICES when it is set (also "" or "-1": none), as CUDA itself would see them;
else the driver's list from `nvidia-smi -L`; else none. A probe that fails or hangs means
no GPUs: a CPU job must never fail because of it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from distrun.plan.gpus import VISIBLE_DEVICES, parse_visible_devices

PROBE_TIMEOUT_S = 10.0
# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`; MIG devices are indented lines under it.
_GPU_LINE = re.compile(r"^GPU (\d+):")


def probe_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    env = os.environ if environ is None else environ
    visible = parse_visible_devices(env.get(VISIBLE_DEVICES))
    if visible is not None:
        return visible
    return driver_gpus()


def driver_gpus() -> tuple[str, ...]:
    """GPU indices as `nvidia-smi -L` lists them; () without nvidia-smi or when it fails."""
    program = shutil.which("nvidia-smi")
    if program is None:
        return ()
    try:
        listing = subprocess.run(
            [program, "-L"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if listing.returncode != 0:
        return ()
    return parse_gpu_list(listing.stdout)


def parse_gpu_list(text: str) -> tuple[str, ...]:
    return tuple(match.group(1) for line in text.splitlines() if (match := _GPU_LINE.match(line)))
