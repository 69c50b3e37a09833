"""The Python stacks of a job's processes, read from outside with py-spy (`py-spy dump --json`).

py-spy reads another process's memory through ptrace: the process is not signalled, so a rank
that ignores signals, holds the GIL in C code or sits in a collective is read all the same.
It needs ptrace permission: the same user and Yama's `kernel.yama.ptrace_scope` at 0 (at 1
only ancestors may trace, and py-spy is the ranks' sibling), or CAP_SYS_PTRACE (containers:
`--cap-add SYS_PTRACE`).

Every process is answered for, within `timeout` seconds each: its threads' stacks, or why
there are none (exited, not Python, not allowed, no answer in time). A rank that is not
Python itself (`bash -c "cd src && python train.py"`, mpirun) is answered with the Python
processes it started. A rank in a container is the engine's client (`podman run`), whose
container is not its child: the container's processes are found through the engine
(`podman inspect`: the pid of its init on this machine) and read the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from distrun.core import procfs

PY_SPY_VERSION = "0.4.3"
INSTALL_HINT = f"pip install 'distrun[hangs]' (or pip install py-spy=={PY_SPY_VERSION})"
DEFAULT_TIMEOUT = 5.0
# py-spy pauses each process while it reads it; 8 at a time keeps a 64-rank read near 1 s on 2 cores.
PARALLEL = 8
# A rank that is not Python: how many of the processes it started are looked at.
MAX_CHILDREN = 16
_OUTPUT_LIMIT = 4 << 20
_PTRACE_HINT = (
    "not allowed to read it (ptrace): run distrun as the job's user with kernel.yama.ptrace_scope at 0, "
    "or give py-spy CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE; Kubernetes pods: limits.hang_timeout "
    "or the target's stacks: true adds SYS_PTRACE)"
)


@dataclass(frozen=True)
class StackTarget:
    """A process of the job as its node agent knows it."""

    name: str  # the process's name in the plan (`node1-rank3`)
    who: str  # how the user names it (`rank 3`)
    node_rank: int
    pid: int
    container: tuple[str, str] | None = None  # (the engine's program, the container's name)


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    short_file: str
    line: int


@dataclass(frozen=True)
class ThreadStack:
    name: str
    os_thread_id: int
    active: bool
    frames: tuple[Frame, ...]  # innermost first, as py-spy gives them


@dataclass
class ProcessStacks:
    name: str
    who: str
    node_rank: int
    pid: int
    threads: list[ThreadStack] = field(default_factory=list)
    error: str | None = None  # why there are no stacks
    python_pid: int | None = None  # the process read, when the rank's own process is not Python

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessStacks:
        """From `to_dict`'s output (a file a job could have rewritten: KeyError/TypeError/ValueError when malformed)."""
        threads = [
            ThreadStack(
                str(t["name"]),
                int(t["os_thread_id"]),
                bool(t["active"]),
                tuple(
                    Frame(str(f["function"]), str(f["file"]), str(f["short_file"]), int(f["line"])) for f in t["frames"]
                ),
            )
            for t in data["threads"]
        ]
        error = data.get("error")
        python_pid = data.get("python_pid")
        return cls(
            str(data["name"]),
            str(data["who"]),
            int(data["node_rank"]),
            int(data["pid"]),
            threads,
            None if error is None else str(error),
            None if python_pid is None else int(python_pid),
        )


def py_spy_path() -> str | None:
    """py-spy on PATH, or next to this Python (a virtual environment not activated)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else None


def read_stacks(
    targets: Sequence[StackTarget], *, native: bool = False, timeout: float = DEFAULT_TIMEOUT
) -> list[ProcessStacks]:
    """Every target's stacks (or why not), in the targets' order; never waits more than `timeout` a process."""
    tool = py_spy_path()
    if tool is None:
        return [_failed(t, f"py-spy is not installed: {INSTALL_HINT}") for t in targets]
    if not targets:
        return []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(targets))) as pool:
        found = list(pool.map(lambda t: _read_target(tool, t, native, timeout), targets))
    return [one for group in found for one in group]


def _read_target(tool: str, target: StackTarget, native: bool, timeout: float) -> list[ProcessStacks]:
    threads, error = _dump(tool, target.pid, native, timeout)
    if error is None:
        return [ProcessStacks(target.name, target.who, target.node_rank, target.pid, threads)]
    if not error.startswith("not a Python process"):
        return [_failed(target, error)]
    # A shell or a launcher: the Python processes below it are the ones that hang. In a
    # container, the processes below the container's init (the client's are the engine's own).
    below = procfs.descendants(target.pid)[1:]
    if target.container is not None:
        init = _container_init(*target.container)
        below = procfs.descendants(init) if init is not None else below
    found = []
    for child in below[:MAX_CHILDREN]:
        child_threads, child_error = _dump(tool, child, native, timeout)
        if child_error is None:
            found.append((child, child_threads))
    if not found:
        return [_failed(target, f"{error}, nor is any process it started")]
    many = len(found) > 1
    return [
        ProcessStacks(
            f"{target.name}/{pid}" if many else target.name,
            f"{target.who} (pid {pid})" if many else target.who,
            target.node_rank,
            target.pid,
            threads,
            python_pid=pid,
        )
        for pid, threads in found
    ]


def _container_init(program: str, name: str) -> int | None:
    """The pid, on this machine, of the container's first process (its init), from the engine."""
    try:
        done = subprocess.run(
            [program, "inspect", "--format", "{{.State.Pid}}", name],
            capture_output=True,
            text=True,
            timeout=DEFAULT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        pid = int(done.stdout.strip()) if done.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return pid if pid > 0 else None


def _failed(target: StackTarget, error: str) -> ProcessStacks:
    return ProcessStacks(target.name, target.who, target.node_rank, target.pid, error=error)


def _dump(tool: str, pid: int, native: bool, timeout: float) -> tuple[list[ThreadStack], str | None]:
    if not procfs.is_alive(pid):
        return [], "has exited"
    argv = [tool, "dump", "--pid", str(pid), "--json", *(["--native"] if native else [])]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "RUST_BACKTRACE": "0"},
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return [], f"no answer from py-spy in {timeout:g} s (the process may be stopped, or stuck in the kernel)"
    except OSError as exc:
        return [], f"py-spy could not run: {exc.strerror or exc}"
    if done.returncode != 0:
        return [], why_not_read(pid, done.stderr.decode("utf-8", "replace"))
    try:
        return _threads(json.loads(done.stdout[:_OUTPUT_LIMIT])), None
    except (ValueError, KeyError, TypeError) as exc:
        return [], f"py-spy's answer was not understood ({exc})"


def why_not_read(pid: int, stderr: str) -> str:
    """py-spy's first error line, said in the user's terms where distrun knows them."""
    said = next((line.removeprefix("Error: ").strip() for line in stderr.splitlines() if line.strip()), "")
    if not procfs.is_alive(pid):
        return "has exited"
    lowered = stderr.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return f"{_PTRACE_HINT} (py-spy: {said})"
    if "python version" in lowered or "python interpreter" in lowered:
        program = procfs.command_line(pid).split(b"\0")[0].decode("utf-8", "replace")
        return f"not a Python process ({os.path.basename(program) or 'unknown'}; py-spy: {said})"
    return f"py-spy: {said or 'failed'}"


def _threads(data: Any) -> list[ThreadStack]:
    threads = []
    for thread in data:
        frames = tuple(
            Frame(
                str(frame.get("name") or "?"),
                str(frame.get("filename") or "?"),
                str(frame.get("short_filename") or frame.get("filename") or "?"),
                int(frame.get("line") or 0),
            )
            for frame in thread["frames"]
        )
        threads.append(
            ThreadStack(
                str(thread.get("thread_name") or ""),
                int(thread.get("os_thread_id") or 0),
                bool(thread.get("active")),
                frames,
            )
        )
    return threads
