"""Starting a job's processes so that none can outlive it, and finding any that try.

Four layers, because each alone has a hole:
1. Every process starts in its own session (its own process group, no terminal) with
   PR_SET_PDEATHSIG=SIGKILL: if the agent dies, even by SIGKILL, the kernel kills it.
   util-linux's `setpriv --pdeathsig KILL` sets it just before exec'ing the command; only
   where setpriv is missing does a preexec hook set it (see `distrun.core.death_signal`).
2. Every process carries a launch marker in its environment (`DISTRUN_LAUNCH_ID`), which its
   children inherit; `marked_pids` finds them all, also grandchildren that called setsid()
   and were reparented away.
3. The agent is a child subreaper, so daemonized descendants are reparented to it while it
   lives, and a watchdog (`distrun.agent.watchdog`) kills the marked processes if it dies.
4. Where cgroup v2 is writable, every process also joins the launch's cgroup
   (`distrun.agent.cgroup`), which finds the descendants that cleared their environment too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping

from distrun.agent.cgroup import LaunchCgroup
from distrun.agent.containers import ContainerRun, engine_process_env, passed_env, run_argv
from distrun.core import procfs
from distrun.core.death_signal import setpriv_prefix
from distrun.core.launch_leftovers import LAUNCH_MARKER, kill_pids, marked_pids
from distrun.plan.model import ProcessSpec

__all__ = [
    "LAUNCH_MARKER",
    "alive_pids",
    "become_subreaper",
    "child_env",
    "kill_pids",
    "marked_pids",
    "reap_orphans",
    "signal_group",
    "spawn",
]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc: ctypes.CDLL | None = None


def _prctl(option: int, value: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(option, value, 0, 0, 0)


def become_subreaper() -> None:
    """Orphaned descendants of our processes are reparented to us, not to init."""
    try:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def child_env(
    spec: ProcessSpec, base: Mapping[str, str], launch_id: str, own: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The inherited environment, the plan's defaults and the process's own variables (`own`:
    `LaunchPlan.environment(spec)`, which adds what the plan keeps once, e.g. TF_CONFIG)."""
    env = dict(base)
    for key, value in spec.env_defaults.items():
        env.setdefault(key, value)
    env.update(spec.env if own is None else own)
    env[LAUNCH_MARKER] = launch_id
    return env


def _child_setup(cgroup: LaunchCgroup | None) -> Callable[[], None]:
    if cgroup is None:
        return _die_with_parent

    def setup() -> None:  # in the child: join the cgroup before exec, so nothing escapes it
        _die_with_parent()
        cgroup.join()

    return setup


def _launch_prefix(cgroup: LaunchCgroup | None) -> tuple[str, ...]:
    """setpriv (the death signal) when it works and no cgroup must be joined, else ().

    Joining the launch's cgroup happens in a preexec hook, before exec, so nothing the process
    starts can escape it; that costs the fast vfork path (about 10 ms more a process). A
    `/bin/sh` wrapper writing its own pid into the cgroup was tried instead and, now and then,
    left daemons behind after a SIGKILL of distrun: correctness first. The gang passes a
    cgroup here only where it cannot hold the cgroup itself while it spawns
    (`LaunchCgroup.births`: the ranks are then born in it, on the fast path).
    """
    return () if cgroup is not None else setpriv_prefix("KILL")


def spawn(
    spec: ProcessSpec,
    base_env: Mapping[str, str],
    launch_id: str,
    cgroup: LaunchCgroup | None = None,
    own: Mapping[str, str] | None = None,
    container: tuple[ContainerRun, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start one process: stdout and stderr into one pipe, stdin closed, own session.

    `container`: (how, its name): the process is the engine's `run` of the job's image instead.
    """
    prefix = _launch_prefix(cgroup)
    env = child_env(spec, base_env, launch_id, own)
    argv: list[str] = list(spec.argv)
    if container is not None:
        run, name = container
        passed = passed_env(spec, spec.env if own is None else own, base_env)
        passed[LAUNCH_MARKER] = launch_id
        argv = run_argv(run, spec, passed, name)
        env = engine_process_env(run, env)
    return subprocess.Popen(
        [*prefix, *argv],
        cwd=spec.cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=None if prefix else _child_setup(cgroup),
        close_fds=True,
    )


def signal_group(pgid: int, sig: int) -> None:
    """Signal a whole process group; a group already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def alive_pids(pids: Iterable[int]) -> list[int]:
    return [pid for pid in pids if procfs.is_alive(pid)]


def reap_orphans(known: set[int]) -> None:
    """Collect the exit statuses of reparented descendants (we are their subreaper).

    Only pids we did not start ourselves: our own children are reaped by their Popen, which
    needs their status.
    """
    for pid in procfs.reapable_children(os.getpid()):
        if pid not in known:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
