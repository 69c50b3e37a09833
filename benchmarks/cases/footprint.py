"""B6 footprint: what the supervisor itself costs while 8 idle ranks (`sleep`) run for 10 s.

The supervisor is every process the command started except the ranks: for distrun the CLI
and its watchdog; for torchrun its agent; for TorchX its CLI, the shell and the torchrun it
starts. Measured from /proc once all ranks run and a second has passed: CPU (user + system)
over the window, as % of one core; RSS and PSS (which shares pages between forked
processes fairly) at the end of the window.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench import Bench, CaseError
from benchmarks.harness import SAMPLE_MARKER, Method, alternate, kill_marked, marked_pids, new_marker
from benchmarks.results import DISTRUN, CaseResult, Row

TITLE = "footprint while supervising idle ranks"
CPU = "CPU % of a core"
RSS = "RSS MB"
PSS = "PSS MB"
PROCS = "supervisor processes"
RANK_COMMAND = "sleep"
TICKS = os.sysconf("SC_CLK_TCK")


def _is_rank(pid: int) -> bool:
    """Ranks are the processes with LOCAL_RANK set: distrun and torchrun set it, nothing else does."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(item.startswith(b"LOCAL_RANK=") for item in environ)


def _cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _memory_mb(pid: int) -> tuple[float, float]:
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, pss


@dataclass
class Idle:
    """The supervisor of a command whose ranks all run and idle, seen from /proc over a window."""

    cpu_percent: float  # user + system over the window, % of one core
    memory_mb: list[tuple[float, float]]  # (RSS, PSS) of each supervisor process at the end
    fds: int  # open file descriptors of the supervisor processes, in all
    output: Path  # the command's stdout and stderr


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def watch_idle(
    bench: Bench, what: str, argv: list[str], env: dict[str, str], cwd: Path | None, ranks: int, window: float
) -> Idle:
    """Start the command, wait until its `ranks` ranks run, measure its supervisor, then stop it (SIGTERM)."""
    marker = new_marker()
    output = bench.folder(what) / "output.txt"
    log = output.open("wb")
    proc = subprocess.Popen(
        argv,
        env={**env, SAMPLE_MARKER: marker},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        give_up = time.monotonic() + 60 + ranks * 0.5
        while len([p for p in marked_pids(marker) if _is_rank(p)]) < ranks:
            if proc.poll() is not None or time.monotonic() > give_up:
                raise CaseError(f"{what}: the {ranks} ranks did not all start (exit {proc.poll()})")
            time.sleep(0.05 if ranks <= 32 else 0.2)  # every look reads all of /proc
        time.sleep(1.0)  # past the start-up
        supervisors = [p for p in marked_pids(marker) if not _is_rank(p)]
        before = {p: _cpu_seconds(p) for p in supervisors}
        started = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - started
        cpu = sum(_cpu_seconds(p) - before[p] for p in supervisors)
        memory = [_memory_mb(p) for p in supervisors]
        fds = sum(_fds(p) for p in supervisors)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=40 + ranks * 0.1)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_marked(marker)
        log.close()
    return Idle(100 * cpu / elapsed, memory, fds, output)


def _measure(bench: Bench, what: str, argv: list[str], env: dict[str, str], cwd: Path | None) -> dict[str, float]:
    idle = watch_idle(bench, what, argv, env, cwd, bench.sizes.footprint_ranks, bench.sizes.footprint_window)
    return {
        CPU: idle.cpu_percent,
        RSS: sum(m[0] for m in idle.memory_mb),
        PSS: sum(m[1] for m in idle.memory_mb),
        PROCS: float(len(idle.memory_mb)),
    }


def _sampler(
    bench: Bench, what: str, argv: list[str], env: dict[str, str], cwd: Path | None = None
) -> Callable[[], dict[str, float]]:
    return lambda: _measure(bench, what, argv, env, cwd)


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B6", TITLE)
    ranks = bench.sizes.footprint_ranks
    idle = "600"  # the harness ends every sample itself
    job = bench.job_file(f"{RANK_COMMAND} {idle}", per_node=ranks)
    penv = bench.base_env()
    methods = [Method(DISTRUN, _sampler(bench, "b6-distrun", bench.distrun("run", str(job)), bench.distrun_env()))]
    if bench.wants("torchrun"):
        argv = [
            *bench.peers.torchrun,
            "--standalone",
            "--nproc-per-node",
            str(ranks),
            "--no-python",
            RANK_COMMAND,
            idle,
        ]
        methods.append(Method("torchrun", _sampler(bench, "b6-torchrun", argv, penv)))
    if bench.wants("torchx") and bench.peers.torchx:
        # TorchX runs every rank's script with python: there the ranks are sleeping interpreters.
        script = bench.folder("b6-torchx-script") / "idle.py"
        script.write_text(f"import time\n\ntime.sleep({idle})\n")
        argv = [*bench.peers.torchx, "run", "-s", "local_cwd", "dist.ddp", "-j", f"1x{ranks}", "--script", str(script)]
        methods.append(Method("torchx", _sampler(bench, "b6-torchx", argv, penv, script.parent), reps=1))
    reps = bench.reps(2)
    case = f"{ranks} idle ranks, {bench.sizes.footprint_window:g} s"
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        values = samples[method.name].values
        result.reps[method.name] = len(values.get(CPU, []))
        for metric in (CPU, RSS, PSS, PROCS):
            if metric in values:
                result.rows.append(Row(case, method.name, metric, values[metric]))
    result.notes.append("CPU from /proc tick counts (10 ms): 0 means under 0.1 % of a core over the window")
    result.notes.append(
        "the ranks (processes with LOCAL_RANK set) run `sleep`, under TorchX a sleeping Python script; everything"
        " else the command started counts as its supervisor"
    )
    return result
