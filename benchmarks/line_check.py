"""B4's checker: did every rank's lines arrive whole, once, in order, under the right label?

A per-rank log must equal what the rank wrote, byte for byte; the live stream, once each line's
`[label] ` is taken off and the lines are grouped by label, must too. Only when they differ is
every line classified, so a clean run costs one comparison, and a damaged one says how:

- lost: a record that does not arrive at all, not even in pieces (the damaged lines glued back);
- split: a line that holds a piece of a record (a record cut in two gives two such lines);
- fused: a line that holds pieces of two or more records;
- mislabelled: a whole record under another rank's label;
- duplicated: a record that arrives whole more than once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields

from benchmarks.workloads.numbered_lines import HEADER, RECORD, line, payload


@dataclass
class LineCheck:
    expected: int = 0
    intact: int = 0
    lost: int = 0
    split: int = 0
    fused: int = 0
    mislabelled: int = 0
    duplicated: int = 0
    out_of_order: bool = False

    @property
    def damaged(self) -> int:
        return self.lost + self.split + self.fused + self.mislabelled + self.duplicated

    def __add__(self, other: LineCheck) -> LineCheck:
        total = LineCheck()
        for item in fields(LineCheck):
            setattr(total, item.name, getattr(self, item.name) + getattr(other, item.name))
        total.out_of_order = self.out_of_order or other.out_of_order
        return total

    def summary(self) -> str:
        text = f"{self.intact}/{self.expected} intact, lost {self.lost}, split {self.split}, fused {self.fused}"
        if self.mislabelled or self.duplicated:
            text += f", mislabelled {self.mislabelled}, duplicated {self.duplicated}"
        return text + (", out of order" if self.out_of_order else "")


def check_rank(data: bytes, rank: int, expected: bytes, count: int) -> LineCheck:
    """One rank's output (a per-rank log, or its lines of the stream) against what it wrote."""
    if data == expected:
        return LineCheck(expected=count, intact=count)
    return _classify(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"), rank, count)


def check_stream(
    data: bytes, labels: Mapping[bytes, int], expected: Mapping[int, tuple[bytes, int]]
) -> tuple[LineCheck, int]:
    """The live stream: `<label>line` for the ranks (`labels`: each full label, all of the form
    `[...]` and one more byte, e.g. `[0/1] ` or `[default1]:`); anything else is the tool's own text.

    Returns the check and the number of lines without a rank label (headers, summary).
    """
    by_rank: dict[int, list[bytes]] = {rank: [] for rank in expected}
    stray: list[bytes] = []
    for text in data.split(b"\n"):
        end = text.find(b"]") + 2 if text.startswith(b"[") else 0
        rank = labels.get(text[:end]) if end else None
        if rank is None:
            if text:
                stray.append(text)
        else:
            by_rank[rank].append(text[end:])
    result = LineCheck()
    for rank, lines in by_rank.items():
        body = b"\n".join(lines) + b"\n" if lines else b""
        result += check_rank(body, rank, *expected[rank])
    # A record outside any label was cut off or glued to distrun's own text.
    for text in stray:
        headers = len(HEADER.findall(text))
        if headers > 1:
            result.fused += 1
        elif headers == 1:
            result.split += 1
    return result, len(stray)


def _classify(lines: list[bytes], rank: int, count: int) -> LineCheck:
    seen: Counter[int] = Counter()
    broken: list[bytes] = []
    result = LineCheck(expected=count)
    last = -1
    for text in lines:
        match = RECORD.fullmatch(text)
        if match:
            seq = int(match[2])
            if seq < count and match[3] == payload(seq):
                if int(match[1]) != rank:
                    result.mislabelled += 1
                    continue
                seen[seq] += 1
                result.out_of_order = result.out_of_order or seq < last
                last = seq
                continue
        broken.append(text)
        if len(HEADER.findall(text)) > 1:
            result.fused += 1
        else:
            result.split += 1
    result.intact = len(seen)
    result.duplicated = sum(n - 1 for n in seen.values())
    missing = [seq for seq in range(count) if seq not in seen]
    # A record that is not whole anywhere is lost unless its bytes are in the damaged lines
    # (glued back together): then it arrived, split or fused. Searching is for small damage only.
    glued = b"".join(broken)
    if len(missing) * len(glued) > 1 << 32:
        result.lost = len(missing)
    else:
        result.lost = sum(1 for seq in missing if line(rank, seq)[:-1] not in glued)
    return result
