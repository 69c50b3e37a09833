"""The root cause's traceback: found in a rank's log, whole, and nothing else."""

from __future__ import annotations

from pathlib import Path

from distrun.agent.traceback_finder import last_traceback, log_tail

SIMPLE = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    step()
ValueError: bad batch"""

CHAINED = """Traceback (most recent call last):
  File "x.py", line 3, in <module>
    foo()
KeyError: 'a'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "x.py", line 5, in <module>
    raise RuntimeError("boom")
RuntimeError: boom"""


def log(tmp_path: Path, text: str) -> str:
    path = tmp_path / "std_log_process_00.txt"
    path.write_text(text)
    return str(path)


def test_the_last_traceback_and_only_it(tmp_path):
    text = "epoch 1\n" + SIMPLE.replace("bad batch", "an older one") + "\nretrying\n" + SIMPLE + "\n\nbye\n"
    assert last_traceback(log(tmp_path, text)) == SIMPLE
    after = SIMPLE + "\n[W1122 10:00:01.123 ProcessGroupGloo.cpp:12] destroyed\n"
    assert last_traceback(log(tmp_path, after)) == SIMPLE


def test_a_multi_line_exception_message_is_kept_whole(tmp_path):
    message = "ValueError: config is invalid:\n  lr must be positive\nbatch_size is missing"
    text = SIMPLE.replace("ValueError: bad batch", message)
    assert last_traceback(log(tmp_path, "start\n" + text + "\n")) == text
    prefixed = "\n".join("[rank1]: " + line for line in text.splitlines())
    assert last_traceback(log(tmp_path, prefixed + "\n")) == text
    endless = SIMPLE + "\n" + "\n".join(f"detail {n}" for n in range(500)) + "\n"
    assert len(last_traceback(log(tmp_path, endless)).splitlines()) <= 80


def test_the_tail_of_a_log_without_a_traceback(tmp_path):
    text = "\n".join(f"line {n}" for n in range(50)) + "\npython: can't open file '/job/trian.py': [Errno 2]\n"
    tail = log_tail(log(tmp_path, text))
    assert tail.splitlines()[-1] == "python: can't open file '/job/trian.py': [Errno 2]"
    assert len(tail.splitlines()) == 10 and "line 41" in tail
    assert log_tail(str(tmp_path / "missing.txt")) == ""
    assert log_tail(log(tmp_path, "")) == ""


def test_a_chain_of_exceptions_is_kept_whole(tmp_path):
    assert last_traceback(log(tmp_path, "start\n" + CHAINED + "\n")) == CHAINED


def test_torch_rank_prefixes_are_taken_off(tmp_path):
    prefixed = "\n".join("[rank2]: " + line for line in SIMPLE.splitlines())
    assert last_traceback(log(tmp_path, "step 3\n" + prefixed + "\n")) == SIMPLE


def test_a_stdout_line_between_the_frames_is_left_out(tmp_path):
    # stdout and stderr of one process reach the log unordered (e.g. split from mpirun's output).
    lines = SIMPLE.splitlines()
    mixed = "\n".join([*lines[:2], "failing at 1795242953.70", *lines[2:]])
    assert last_traceback(log(tmp_path, mixed + "\n")) == SIMPLE


def test_no_traceback_and_no_log(tmp_path):
    assert last_traceback(log(tmp_path, "all fine\n")) == ""
    assert last_traceback(str(tmp_path / "missing.txt")) == ""
