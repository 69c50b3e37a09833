"""Timestamps a rank writes about itself: `<BENCH_OUT>/<what>_<rank>` holding time.time()."""

from __future__ import annotations

import os
import time


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def stamp(what: str, when: float | None = None) -> None:
    """Written to a hidden name, then renamed: a reader never sees a file without its number."""
    folder = os.environ["BENCH_OUT"]
    value = repr(time.time() if when is None else when).encode()
    hidden = f"{folder}/.{what}_{rank()}.{os.getpid()}"
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)
    os.rename(hidden, f"{folder}/{what}_{rank()}")
