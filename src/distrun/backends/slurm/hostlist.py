"""Slurm's compressed host lists (`n[1-3,7],login1`) expanded in Python, as `scontrol show
hostnames` expands them: in order, duplicates kept, numbers padded to the width of the range's
lower bound (`n[08-10]` -> n08 n09 n10).

Each node agent needs its allocation's host names before it starts its ranks; reading them here
spares every node one `scontrol` process. Only the common form is read: names with at most one
bracket, at their end. For anything else (`rack[1-2]n[1-4]`, text after a bracket) this says
None and the caller asks scontrol, which knows every form Slurm writes.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"([^\[\],]*)(?:\[([0-9,\-]+)\])?")
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")
# A range longer than this is not a host list Slurm wrote for an allocation.
MAX_HOSTS = 100_000


def expand_hostlist(node_list: str) -> list[str] | None:
    """The host names of `node_list`, or None when it is not in the form read here."""
    names: list[str] = []
    for item in _items(node_list):
        found = _NAME.fullmatch(item)
        if found is None or not item or item.startswith("-"):
            return None  # not a list (a leading "-" is an option to scontrol)
        prefix, ranges = found.groups()
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            bounds = _RANGE.fullmatch(part)
            if bounds is None:
                return None
            low, high = bounds.group(1), bounds.group(2) or bounds.group(1)
            first, last = int(low), int(high)
            if last < first or len(names) + last - first >= MAX_HOSTS:
                return None
            names += [f"{prefix}{number:0{len(low)}d}" for number in range(first, last + 1)]
    return names or None


def _items(node_list: str) -> list[str]:
    """`node_list` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for at, char in enumerate(node_list):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(node_list[start:at])
            start = at + 1
    items.append(node_list[start:])
    return items
