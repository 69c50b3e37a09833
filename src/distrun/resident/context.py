"""Whether a process forked from the resident would run as the calling command would.

The copy takes the caller's arguments, environment, working folder, umask and standard streams.
Everything else a process inherits it would take from the resident instead, so it must already
be the same; a difference sends the command back to run cold, named, so `distrun resident
status` can say why. Read from /proc, for the caller through the pid the kernel vouches for
(SO_PEERCRED), which is still the caller: it waits on the socket for the answer.
"""

from __future__ import annotations

import os

_NAMESPACES = ("mnt", "net", "pid", "ipc", "uts", "user", "cgroup", "time")
# /proc/<pid>/status lines a child inherits: identity, privileges, where it may run.
_STATUS_FIELDS = (
    "Uid",
    "Gid",
    "Groups",
    "NoNewPrivs",
    "Seccomp",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "Cpus_allowed_list",
    "Mems_allowed_list",
)


def inherited(pid: int | str) -> dict[str, str]:
    """What a child of `pid` would inherit besides what the client sends, as text to compare."""
    base = f"/proc/{pid}"
    facts: dict[str, str] = {}
    for name in _NAMESPACES:
        facts[f"{name} namespace"] = _readlink(f"{base}/ns/{name}")
    facts["root folder"] = _readlink(f"{base}/root")
    facts["cgroup"] = _read(f"{base}/cgroup")
    facts["resource limits"] = _read(f"{base}/limits")
    facts["OOM score adjustment"] = _read(f"{base}/oom_score_adj").strip()
    stat = _read(f"{base}/stat")
    fields = stat[stat.rfind(")") + 2 :].split()
    facts["scheduling niceness"] = fields[16] if len(fields) > 16 else ""
    status = _status(base)
    for name in _STATUS_FIELDS:
        facts[name] = status.get(name, "")
    return facts


def differences(caller: dict[str, str], resident: dict[str, str]) -> list[str]:
    return [name for name, value in caller.items() if resident.get(name) != value]


def umask_of(pid: int) -> int | None:
    value = _status(f"/proc/{pid}").get("Umask")
    return int(value, 8) if value else None


def _status(base: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in _read(f"{base}/status").splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
