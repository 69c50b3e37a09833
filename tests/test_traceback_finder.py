"""The root cause's traceback: found in a rank's log, whole, and nothing else."""

from __future__ import annotations

from pathlib import Path

from distrun.agent.traceback_finder import last_traceback

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
    text = "epoch 1\n" + SIMPLE.replace("bad batch", "an older one") + "\nretrying\n" + SIMPLE + "\nbye\n"
    assert last_traceback(log(tmp_path, text)) == SIMPLE


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
