"""What /proc says about this machine's processes: the one place distrun reads it.

distrun finds a job's processes by the markers in their environments (a rank may start children
that leave its process group, and those must be found too). A process can end between any two
reads, so every reader here answers "gone" rather than raise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


def environments() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, its environment's `NAME=value` entries) for every process whose environment we may read."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        yield int(entry), environ.split(b"\0")


def _stat_fields(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (state, parent, ...); [] when gone.

    The name is in parentheses and may itself hold spaces and parentheses, so the fields start
    after the last ")".
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2 :].split()


def is_alive(pid: int) -> bool:
    """False for a process that is gone or a zombie (dead, only waiting to be reaped)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 else None


def reapable_children(parent: int) -> list[int]:
    """The zombie children of `parent`: their exit status waits for it to collect."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if len(fields) > 1 and fields[0] in (b"Z", b"X") and int(fields[1]) == parent:
                found.append(int(entry))
    return found


def command_line(pid: int) -> bytes:
    """The process's arguments, NUL-separated; b"" when gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def listening_sockets(port: int) -> set[int]:
    """The inodes of the TCP sockets listening on `port` (any address, IPv4 or IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "ADDR:PORT" (hex), state 0A = LISTEN, inode is the tenth field
            if len(fields) > 9 and fields[3] == b"0A" and int(fields[1].rsplit(b":", 1)[1], 16) == port:
                found.add(int(fields[9]))
    return found


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds open; empty when gone or not ours to read."""
    found = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            found.add(int(target[8:-1]))
    return found


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of stat); None when gone.

    With the pid it names one process for good: a pid reused later has another start time.
    """
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else None
