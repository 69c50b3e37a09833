"""B4's lines: `<rank> <seq:08d> <payload>\n`, the payload's length and letters fixed by seq.

The harness builds each rank's bytes once (`lines_for`) for the writer to send, and the checker
compares what arrived with the same bytes, so it can tell a lost line from a split or fused one.
"""

from __future__ import annotations

import re

_ALPHABET = b"abcdefghijklmnopqrstuvwxyz" * 8
RECORD = re.compile(rb"(\d+) (\d{8}) ([a-z]*)")
HEADER = re.compile(rb"\d+ \d{8} ")


def payload(seq: int) -> bytes:
    start = seq % 26
    return _ALPHABET[start : start + 10 + (seq * 7919) % 120]


def line(rank: int, seq: int) -> bytes:
    return b"%d %08d %s\n" % (rank, seq, payload(seq))


def lines_for(rank: int, size: int) -> tuple[bytes, int]:
    """The whole output of `rank`: whole lines until at least `size` bytes; and the line count."""
    parts = []
    total = seq = 0
    while total < size:
        text = line(rank, seq)
        parts.append(text)
        total += len(text)
        seq += 1
    return b"".join(parts), seq
