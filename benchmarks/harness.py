"""Running the measured commands: one sample at a time, methods alternating (A B A B ...).

Every sample's processes carry a marker in their environment (`BENCH_SAMPLE_ID`). After a
sample returns, whatever still carries its marker is counted (a tool that leaves processes
behind shows it in the results) and killed, so no sample disturbs the next.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from distrun.core import procfs

SAMPLE_MARKER = "BENCH_SAMPLE_ID"
_TICKS = os.sysconf("SC_CLK_TCK")
Metrics = dict[str, float]


@dataclass
class Run:
    """One execution of one or more commands started together."""

    returncodes: list[int | None]  # None: still running at the cap, killed
    started: float  # time.time() just before the first process was created
    ended: float  # time.time() when the last one was reaped
    wall: float  # seconds, from a monotonic clock
    user_cpu: float = 0.0  # of the commands and every descendant they reaped (wait4)
    sys_cpu: float = 0.0
    own_cpu: float = 0.0  # of the commands' own processes only (the tool, not its ranks)
    max_rss_kb: int = 0  # largest direct child (includes its parent's size at fork: see peak_rss.py)
    leftovers: int = 0  # processes still alive with the sample's marker after the return
    marker: str = ""

    @property
    def timed_out(self) -> bool:
        return any(code is None for code in self.returncodes)

    @property
    def ok(self) -> bool:
        return all(code == 0 for code in self.returncodes)


def new_marker() -> str:
    return uuid.uuid4().hex


def run_commands(
    argvs: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    stdout: IO[bytes] | int = subprocess.DEVNULL,
    timeout: float = 120.0,
    marker: str | None = None,
    on_start: Callable[[list[int]], None] | None = None,
) -> Run:
    """Start every argv at once, wait for all (or the cap), clean up what they left."""
    marker = marker or new_marker()
    full_env = {**env, SAMPLE_MARKER: marker}
    started = time.time()
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            list(argv),
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout is not subprocess.DEVNULL else subprocess.DEVNULL,
            start_new_session=True,
        )
        for argv in argvs
    ]
    if on_start is not None:
        on_start([p.pid for p in procs])
    deadline = t0 + timeout
    codes: list[int | None] = [None] * len(procs)
    user = system = own = 0.0
    max_rss = 0
    pidfds = {os.pidfd_open(p.pid): i for i, p in enumerate(procs)}
    last_exit = t0
    while pidfds:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        ready, _, _ = select.select(list(pidfds), [], [], left)
        for fd in ready:
            i = pidfds.pop(fd)
            os.close(fd)
            own += _own_cpu(procs[i].pid)  # still a zombie: its /proc/PID/stat is there
            _, status, usage = os.wait4(procs[i].pid, 0)
            last_exit = time.perf_counter()
            codes[i] = os.waitstatus_to_exitcode(status)
            procs[i].returncode = codes[i]
            user += usage.ru_utime
            system += usage.ru_stime
            max_rss = max(max_rss, usage.ru_maxrss)
    wall = last_exit - t0
    for fd, i in pidfds.items():  # past the cap
        os.close(fd)
        _kill_group(procs[i].pid)
        procs[i].wait()
    if pidfds:
        wall = time.perf_counter() - t0
    ended = started + wall
    leftovers = kill_marked(marker)
    return Run(codes, started, ended, wall, user, system, own, max_rss, leftovers, marker)


def _own_cpu(pid: int) -> float:
    """User + system seconds of this process alone (not its children), 10 ms resolution."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return math.nan
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def run_command(argv: Sequence[str], **kwargs: object) -> Run:
    return run_commands([argv], **kwargs)  # type: ignore[arg-type]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def marked_pids(marker: str) -> list[int]:
    """Live (not zombie) processes whose environment carries this sample's marker."""
    needle = f"{SAMPLE_MARKER}={marker}".encode()
    return [pid for pid, environ in procfs.environments() if needle in environ and procfs.is_alive(pid)]


def kill_marked(marker: str, settle: float = 0.15) -> int:
    """SIGKILL what a sample left behind; returns how many there were.

    A short settle first: a tool that has just returned may still be reaping its children.
    """
    pids = marked_pids(marker)
    if not pids:
        return 0
    time.sleep(settle)
    pids = marked_pids(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    give_up = time.monotonic() + 5
    while marked_pids(marker) and time.monotonic() < give_up:
        time.sleep(0.05)
    return len(pids)


# ---------------------------------------------------------------- alternating samples


@dataclass
class Method:
    """One way of doing the thing a case measures: `sample()` runs it once, returns metrics."""

    name: str
    sample: Callable[[], Metrics]
    reps: int | None = None  # fewer repetitions for a slow peer; None: the case's count


@dataclass
class Samples:
    method: str
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, metrics: Metrics) -> None:
        for key, value in metrics.items():
            self.values.setdefault(key, []).append(value)


def alternate(
    methods: Sequence[Method],
    reps: int,
    log: Callable[[str], None],
    *,
    warmup: bool = False,
    balanced: bool = False,
) -> dict[str, Samples]:
    """Run A B C A B C ...: load that drifts during the run touches every method alike.

    `warmup`: first one sample of each method, not kept (a JVM's first start on a machine reads
    its jars from disk, whichever method comes first would pay it). `balanced`: every other
    round runs in reverse order (A B, B A, A B ...), so that a drift within a round (a machine
    calming down after the last sample) does not always favour the same method.
    """
    if warmup:
        for method in methods:
            method.sample()
            log(f"    warm-up {method.name}: not kept")
    collected = {m.name: Samples(m.name) for m in methods}
    for rep in range(reps):
        order = list(reversed(methods)) if balanced and rep % 2 else list(methods)
        for method in order:
            if method.reps is not None and rep >= method.reps:
                continue
            metrics = method.sample()
            collected[method.name].add(metrics)
            shown = ", ".join(f"{k} {_short(v)}" for k, v in metrics.items())
            log(f"    {rep + 1}/{reps} {method.name}: {shown}")
    return collected


def _short(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    return f"{value:.4g}"
