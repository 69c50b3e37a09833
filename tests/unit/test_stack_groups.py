"""Folding stacks into groups and naming the odd one out (pure), and the hang watch's progress rule."""

from __future__ import annotations

import time

from distrun.agent.hang_report import hang_root_cause
from distrun.agent.hang_watch import HangWatch
from distrun.agent.stack_groups import group_stacks, grouped_text, names_of, odd_one_out, summary
from distrun.agent.stacks import Frame, ProcessStacks, ThreadStack

TRAIN = "/job/code/train.py"
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def frame(function: str, file: str, line: int) -> Frame:
    short = "torch/distributed/distributed_c10d.py" if file == C10D else file.rsplit("/", 1)[-1]
    return Frame(function, file, short, line)


IN_ALL_REDUCE = (frame("all_reduce", C10D, 2501), frame("main", TRAIN, 41), frame("<module>", TRAIN, 50))
SLEEPING = (frame("stall", TRAIN, 22), frame("main", TRAIN, 38), frame("<module>", TRAIN, 50))
IN_TRAIN_STEP = (frame("step", TRAIN, 30), frame("main", TRAIN, 39), frame("<module>", TRAIN, 50))


def rank(number: int, frames: tuple[Frame, ...], *, node: int = 0, extra_thread: bool = False) -> ProcessStacks:
    pid = 1000 + number
    threads = [ThreadStack("MainThread", pid, False, frames)]
    if extra_thread:  # a background thread elsewhere does not make a process odd
        threads.insert(0, ThreadStack("pin_memory", pid + 50, True, (frame("loop", TRAIN, 7 + number),)))
    return ProcessStacks(f"rank_{number}", f"rank {number}", node, pid, threads)


def test_identical_stacks_fold_and_the_one_apart_is_named():
    processes = [rank(0, IN_ALL_REDUCE), rank(1, IN_ALL_REDUCE, extra_thread=True), rank(2, IN_ALL_REDUCE, node=1)]
    processes.append(rank(3, SLEEPING, node=1))
    groups = group_stacks(processes)
    assert [g.headline() for g in groups] == [
        "3 processes (rank 0, 1, 2): all_reduce at torch/distributed/distributed_c10d.py:2501"
        " <- main at train.py:41 <- <module> at train.py:50",
        "rank 3: stall at train.py:22 <- main at train.py:38 <- <module> at train.py:50",
    ]
    odd = odd_one_out(groups)
    assert odd is not None and odd.process is processes[3]
    assert odd.reason == (
        "rank 3 on node 1 is at stall at train.py:22 <- main at train.py:38 <- <module> at train.py:50; "
        "3 processes (rank 0, 1, 2) wait at all_reduce at torch/distributed/distributed_c10d.py:2501"
    )
    assert odd.traceback.splitlines() == [
        "Stack of rank 3 (pid 1003, most recent call last):",
        f'  File "{TRAIN}", line 50, in <module>',
        f'  File "{TRAIN}", line 38, in main',
        f'  File "{TRAIN}", line 22, in stall',
    ]


def test_all_alike_names_the_common_frame():
    groups = group_stacks([rank(0, SLEEPING), rank(1, SLEEPING)])
    odd = odd_one_out(groups)
    assert odd is not None and odd.process is None
    assert odd.reason == "every process (rank 0, 1) is at stall at train.py:22"


def test_processes_without_stacks_group_by_reason():
    shell = ProcessStacks("rank_2", "rank 2", 1, 77, error="not a Python process (bash)")
    gone = ProcessStacks("rank_3", "rank 3", 1, 78, error="not a Python process (bash)")
    groups = group_stacks([rank(0, IN_ALL_REDUCE), rank(1, SLEEPING), shell, gone])
    assert groups[0].headline() == "2 processes (rank 2, 3): not a Python process (bash)"
    odd = odd_one_out(groups)
    # Two groups of one apart from the largest: the first found is named.
    assert odd is not None and odd.process is not None and odd.process.who == "rank 0"
    assert odd.reason.endswith("; 2 processes (rank 2, 3) say: not a Python process (bash)")


def test_a_rank_that_exited_while_the_others_wait_is_the_odd_one_out():
    exited = ProcessStacks("rank_3", "rank 3", 1, 78, error="has exited with code 0")
    groups = group_stacks([rank(0, IN_ALL_REDUCE), rank(1, IN_ALL_REDUCE), rank(2, IN_ALL_REDUCE), exited])
    odd = odd_one_out(groups)
    assert odd is not None and odd.process is exited
    assert odd.reason.startswith(
        "rank 3 on node 1 has exited with code 0; 3 processes (rank 0, 1, 2) wait at all_reduce"
    )
    assert odd.traceback == "rank 3: has exited with code 0"


def test_tied_groups_have_no_majority():
    odd = odd_one_out(group_stacks([rank(0, SLEEPING), rank(1, IN_TRAIN_STEP)]))
    assert odd is not None and odd.process is not None and odd.process.who == "rank 0"
    assert odd.reason.endswith("; no majority: 1 other process stands elsewhere")


def test_of_two_ranks_the_one_outside_the_collective_is_named():
    for order in ([rank(0, IN_ALL_REDUCE), rank(1, SLEEPING)], [rank(1, SLEEPING), rank(0, IN_ALL_REDUCE)]):
        odd = odd_one_out(group_stacks(order))
        assert odd is not None and odd.process is not None and odd.process.who == "rank 1"
        assert odd.reason == (
            "rank 1 on node 0 is at stall at train.py:22 <- main at train.py:38 <- <module> at train.py:50; "
            "1 process (rank 0) waits inside a collective at all_reduce at torch/distributed/distributed_c10d.py:2501"
        )


def test_two_waiting_against_two_apart_and_an_exited_rank_against_a_waiting_one():
    ranks = [rank(0, IN_ALL_REDUCE), rank(1, SLEEPING), rank(2, IN_ALL_REDUCE, node=1), rank(3, SLEEPING, node=1)]
    odd = odd_one_out(group_stacks(ranks))
    assert odd is not None and odd.process is ranks[1]
    assert odd.reason.endswith(
        "; 2 processes (rank 0, 2) wait inside a collective at all_reduce at torch/distributed/distributed_c10d.py:2501"
    )
    exited = ProcessStacks("rank_1", "rank 1", 0, 78, error="has exited with code 0")
    odd = odd_one_out(group_stacks([rank(0, IN_ALL_REDUCE), exited]))
    assert odd is not None and odd.process is exited
    assert odd.reason.startswith("rank 1 on node 0 has exited with code 0; 1 process (rank 0) waits inside")


def test_ranks_each_in_a_different_collective_have_no_majority():
    in_broadcast = (frame("broadcast", C10D, 2600), frame("main", TRAIN, 45), frame("<module>", TRAIN, 50))
    odd = odd_one_out(group_stacks([rank(0, IN_ALL_REDUCE), rank(1, in_broadcast)]))
    assert odd is not None and odd.process is not None and odd.process.who == "rank 0"
    assert odd.reason.endswith("; no majority: 1 other process stands elsewhere")


def test_text_shows_every_group_and_says_how_to_see_other_threads():
    text = grouped_text(group_stacks([rank(0, IN_ALL_REDUCE, extra_thread=True), rank(1, SLEEPING)]))
    assert "(+1 other thread: -o json shows them)" in text
    assert f'    File "{TRAIN}", line 22, in stall' in text
    every = grouped_text(group_stacks([rank(0, IN_ALL_REDUCE, extra_thread=True)]), every_thread=True)
    assert "    thread pin_memory:\n      loop at train.py:7" in every


def test_long_stacks_are_cut_in_one_line_and_names_of_other_roles_are_kept():
    deep = tuple(frame(f"f{i}", TRAIN, i) for i in range(6))
    assert summary(deep) == "f0 at train.py:0 <- f1 at train.py:1 <- f2 at train.py:2 <- f3 at train.py:3 <- ..."
    assert summary(()) == "no Python frame"
    worker = ProcessStacks("worker_0", "worker 0", 0, 1)
    chief = ProcessStacks("chief_0", "chief 0", 0, 2)
    assert names_of([worker, chief]) == "worker 0, chief 0"


def test_the_hang_root_cause_has_a_failed_process_shape():
    processes = [rank(0, IN_ALL_REDUCE), rank(1, IN_ALL_REDUCE), rank(3, SLEEPING, node=1)]
    hosts = {0: "n1", 1: "n2"}
    root = hang_root_cause(processes, "hung: no progress for 5 s", 6200.0, hosts, {"rank_3": "/logs/3.txt"})
    assert (root["rank"], root["node_rank"], root["name"], root["log"]) == (3, 1, "rank_3", "/logs/3.txt")
    assert root["host"] == "n2"  # the odd process's node, whichever node's agent saw the hang
    assert root["reason"].startswith("hung: no progress for 5 s: rank 3 on node 1 is at stall at train.py:22")
    assert root["traceback"].endswith("line 22, in stall") and root["hang"] == "hang/stacks.json"


def test_a_recent_metric_is_progress_and_an_old_one_is_not():
    now = time.monotonic()
    silent = HangWatch(5.0, None)
    assert silent.check_at is not None and not silent.due(now)
    assert silent.hung(now + 6)
    logging = HangWatch(5.0, lambda: time.time())  # a metric logged just now
    assert not logging.hung(now + 6)
    assert logging.check_at is not None and logging.check_at >= now + 6 + 5 - 1
    stale = HangWatch(5.0, lambda: time.time() - 60)
    assert stale.hung(now + 6)
    assert not HangWatch(None, None).hung(now + 1e6)


def test_a_hang_counts_as_a_failure_for_restarts():
    from distrun.core.job_status import JobStatus
    from distrun.restarts.policy import Attempt, RestartPolicy, decide

    root = hang_root_cause([rank(0, SLEEPING)], "hung: no progress for 5 s", 5100.0, {0: "127.0.0.1"}, {})
    hung = Attempt(0, JobStatus.FAILED, root["reason"], root)
    assert decide(RestartPolicy(max_restarts=1), [hung]).reason == "failed: restart 1 of 1"
    assert not decide(RestartPolicy(max_restarts=1), [hung, Attempt(1, JobStatus.FAILED, root["reason"], root)]).restart


def test_the_stacks_are_read_ahead_of_the_timeout_during_the_silence():
    from distrun.agent.hang_watch import read_lead

    assert read_lead(3.0, 64) == 1.5  # at most half the timeout
    assert abs(read_lead(600.0, 64) - 3.56) < 1e-9
    now = time.monotonic()
    silent = HangWatch(10.0, None, lead=4.0)
    assert silent.read_at is not None and not silent.read_due(now)
    assert silent.read_due(now + 6.5) and not silent.due(now + 6.5)
    logging = HangWatch(10.0, lambda: time.time(), lead=4.0)  # a metric logged just now
    assert not logging.read_due(now + 6.5)


def test_native_frames_do_not_split_alike_processes():
    def native(address: str) -> Frame:
        return Frame(address, "/usr/lib/libc.so.6", "libc.so.6", 0)

    first = rank(0, (native("0x7ff285c4524a"), *SLEEPING))
    second = rank(1, (native("0x7ff285c4999b"), *SLEEPING))
    assert [len(g.members) for g in group_stacks([first, second])] == [2]


def test_a_process_py_spy_may_not_read_is_told_how_to_allow_it():
    import os

    from distrun.agent.stacks import why_not_read

    said = why_not_read(os.getpid(), "Error: Permission denied (os error 13)\n")
    assert said.startswith("not allowed to read it (ptrace): ") and "kernel.yama.ptrace_scope" in said
    assert "CAP_SYS_PTRACE" in said and said.endswith("(py-spy: Permission denied (os error 13))")


def test_another_nodes_published_output_is_progress_and_its_own_is_not(tmp_path):
    from distrun.agent.job_progress import ProgressBoard

    node0, node1 = ProgressBoard(tmp_path, [0]), ProgressBoard(tmp_path, [1])
    assert node0.latest_elsewhere() is None
    node0.publish(time.time() - 60)
    assert node0.latest_elsewhere() is None  # its own stamp is not another node's progress
    node1.publish(time.time() - 1)
    seen = node0.latest_elsewhere()
    assert seen is not None and time.time() - 2 < seen <= time.time()
    # A node silent for the timeout while another printed is not hung; once all are silent, it is.
    now = time.monotonic()
    assert not HangWatch(5.0, node0.latest_elsewhere).hung(now + 6)
    node1.publish(time.time() - 30)
    assert HangWatch(5.0, node0.latest_elsewhere).hung(now + 6)
    # A stamp from the future (a forged file) counts as now, and a garbled one not at all.
    (tmp_path / "progress" / "node1").write_text("1e30")
    assert node0.latest_elsewhere() <= time.time()  # type: ignore[operator]
    (tmp_path / "progress" / "node1").write_text("soon")
    assert node0.latest_elsewhere() is None
