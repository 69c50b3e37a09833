"""Stacks of many processes folded into groups, so that the odd one out stands out.

Pure functions over `ProcessStacks`. Two processes are alike when their main threads stand at
the same frames (function, file, line), or, without stacks, when they fail for the same
reason. In a hung collective every rank but one waits inside it at the same line: the group
of one is the rank that never arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrun.agent.stacks import Frame, ProcessStacks, ThreadStack

# Frames in a one-line summary: enough to show the call into the collective and the user's line.
SUMMARY_FRAMES = 4
# Where a process waits for its peers: the communication code of the frameworks distrun runs
# (py-spy's short file names). A rank standing in one of these waits for a rank that is not.
COLLECTIVE_FILES = ("torch/distributed/", "horovod/", "deepspeed/comm/", "mpi4py/", "tensorflow/python/distribute/")


@dataclass(frozen=True)
class StackGroup:
    members: tuple[ProcessStacks, ...]
    frames: tuple[Frame, ...]  # the common main-thread stack, innermost first; () without stacks
    error: str | None  # the common reason there are no stacks

    @property
    def names(self) -> str:
        return names_of(self.members)

    def headline(self) -> str:
        """`3 processes (rank 0, 1, 2): all_reduce at ...:NN <- main at train.py:41`, or `rank 3: ...`."""
        who = self.names if len(self.members) == 1 else f"{len(self.members)} processes ({self.names})"
        return f"{who}: {self.error if self.error is not None else summary(self.frames)}"


@dataclass(frozen=True)
class OddOneOut:
    """What a hang is blamed on: the process apart from the majority, or the frame all share."""

    process: ProcessStacks | None  # None when every process stands at the same place
    reason: str
    traceback: str


def main_thread(process: ProcessStacks) -> ThreadStack | None:
    """The thread Python started with: the one whose id is the process's, else `MainThread`, else the first."""
    pid = process.python_pid or process.pid
    for thread in process.threads:
        if thread.os_thread_id == pid:
            return thread
    for thread in process.threads:
        if thread.name == "MainThread":
            return thread
    return process.threads[0] if process.threads else None


def signature(process: ProcessStacks) -> tuple[object, ...]:
    """What two alike processes share: their main thread's frames, or their error."""
    if process.error is not None:
        return ("error", process.error)
    thread = main_thread(process)
    frames = thread.frames if thread is not None else ()
    # Native frames (--native; line 0) carry addresses that differ from process to process:
    # alike processes are alike in their Python frames.
    python = [f for f in frames if f.line > 0] or list(frames)
    # The file as py-spy shortens it (`train.py`, `torch/distributed/...`): each node of a job
    # on Ray or Kubernetes runs its own copy of the code, under a folder of its own.
    return ("stack", tuple((f.function, f.short_file, f.line) for f in python))


def group_stacks(processes: list[ProcessStacks]) -> list[StackGroup]:
    """Alike processes together; the largest group first, then by their first process's place in `processes`."""
    keyed: dict[tuple[object, ...], list[ProcessStacks]] = {}
    for process in processes:
        keyed.setdefault(signature(process), []).append(process)
    groups = []
    for members in keyed.values():
        thread = main_thread(members[0])
        frames = thread.frames if thread is not None and members[0].error is None else ()
        groups.append(StackGroup(tuple(members), frames, members[0].error))
    order = {id(p): index for index, p in enumerate(processes)}
    return sorted(groups, key=lambda g: (-len(g.members), order[id(g.members[0])]))


def odd_one_out(groups: list[StackGroup]) -> OddOneOut | None:
    """The process to blame for a hang; None when there is no process at all.

    With one group, every process stands at the same frame: that frame is the answer. Otherwise
    the majority is the one largest group, and the odd one out is the smallest other group
    (ties: one with stacks before one without, then the first found): its first process is
    named, with its stack (or its reason: `has exited with code 0`) as the traceback. When the
    largest groups are tied (two ranks, each apart), who waits inside a collective decides:
    the groups that do are the waiting side, and the odd one out is among the rest.
    """
    if not groups:
        return None
    if len(groups) == 1:
        only = groups[0]
        where = summary(only.frames[:1]) if only.frames else (only.error or "no stacks")
        return OddOneOut(None, f"every process ({only.names}) is at {where}", traceback_text(only.members[0]))
    largest = len(groups[0].members)
    majority = groups[0] if len(groups[1].members) < largest else None
    waiting = [g for g in groups if in_collective(g)] if majority is None else []
    candidates = [g for g in groups if g is not majority and g not in waiting] or groups
    odd = min(candidates, key=lambda g: (len(g.members), g.error is not None, groups.index(g)))
    process = odd.members[0]
    if candidates is not groups and waiting:
        count = sum(len(g.members) for g in waiting)
        names = names_of([p for g in waiting for p in g.members])
        verb = "waits" if count == 1 else "wait"
        where = summary(waiting[0].frames[:1])
        apart = f"{count} process{'es' if count != 1 else ''} ({names}) {verb} inside a collective at {where}"
    elif majority is None:
        others = sum(len(g.members) for g in groups) - 1
        apart = f"no majority: {others} other process{'es stand' if others != 1 else ' stands'} elsewhere"
    else:
        count = len(majority.members)
        state = f"wait at {summary(majority.frames[:1])}" if majority.error is None else f"say: {majority.error}"
        apart = f"{count} process{'es' if count != 1 else ''} ({majority.names}) {state}"
    at = f"is at {summary(odd.frames)}" if odd.error is None else odd.error
    return OddOneOut(process, f"{process.who} on node {process.node_rank} {at}; {apart}", traceback_text(process))


def in_collective(group: StackGroup) -> bool:
    """Whether the group's processes wait in a framework's communication code (a collective, a
    point-to-point receive, the rendezvous of init_process_group)."""
    return any(f.line > 0 and _framework_file(f) for f in group.frames)


def _framework_file(frame: Frame) -> bool:
    # py-spy names a package's file from its import root; without that name, its installed path tells.
    if frame.short_file.startswith(COLLECTIVE_FILES):
        return True
    return any(f"/site-packages/{folder}" in frame.file for folder in COLLECTIVE_FILES)


def summary(frames: tuple[Frame, ...]) -> str:
    """`all_reduce at torch/distributed/distributed_c10d.py:2501 <- main at train.py:41`, innermost first."""
    if not frames:
        return "no Python frame"
    shown = " <- ".join(f"{f.function} at {f.short_file}:{f.line}" for f in frames[:SUMMARY_FRAMES])
    return shown + (" <- ..." if len(frames) > SUMMARY_FRAMES else "")


def traceback_text(process: ProcessStacks) -> str:
    """The main thread's stack as Python prints a traceback (most recent call last)."""
    if process.error is not None:
        return f"{process.who}: {process.error}"
    thread = main_thread(process)
    lines = [f"Stack of {process.who} (pid {process.python_pid or process.pid}, most recent call last):"]
    for frame in reversed(thread.frames if thread is not None else ()):
        lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
    return "\n".join(lines)


def grouped_text(groups: list[StackGroup], every_thread: bool = False) -> str:
    """The groups' headlines, each followed by its main thread's stack (and, asked for, every other thread's)."""
    out: list[str] = []
    for group in groups:
        out.append(group.headline())
        first = group.members[0]
        if group.error is None:
            out.extend("    " + line for line in traceback_text(first).splitlines()[1:])
            others = [t for t in first.threads if t is not main_thread(first)]
            if every_thread:
                for thread in others:
                    out.append(f"    thread {thread.name or thread.os_thread_id}:")
                    out.extend(f"      {f.function} at {f.short_file}:{f.line}" for f in thread.frames)
            elif others:
                out.append(f"    (+{len(others)} other thread{'s' if len(others) != 1 else ''}: -o json shows them)")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def names_of(processes: tuple[ProcessStacks, ...] | list[ProcessStacks]) -> str:
    """`rank 0, 1, 2` for ranks; the processes' own names otherwise (`worker 0, ps 1`)."""
    whos = [p.who for p in processes]
    if all(w.startswith("rank ") and w[5:].isdigit() for w in whos):
        return "rank " + ", ".join(w[5:] for w in whos)
    return ", ".join(whos)
