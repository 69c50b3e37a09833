"""Escape sequences (class 4): a job's output and names cannot drive the user's terminal.

A rank that prints OSC (clipboard, title, hyperlinks), DCS, APC, cursor movement or C1 controls
has them shown as harmless text in the live stream, `logs`, `job stream` and the execution
summary, while colours (SGR) and `\\r` progress bars stay as they are. The per-rank log files
keep the exact bytes. Names in validation errors are shown the same way.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.core.terminal_text import neutral
from support.cli import cli_env
from support.reliability import run_bytes, run_capped

HOSTILE = (
    b"\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard
    b"\x1b]0;owned title\x1b\\"  # OSC 0: window title, ST-terminated
    b"\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # OSC 8 hyperlink
    b"\x1bP+q544e\x1b\\"  # DCS: query the terminal
    b"\x1b_apc payload\x1b\\"  # APC
    b"\x1b^pm payload\x1b\\"  # PM
    b"\x1b[2J\x1b[H\x1b[1A\x1b[6n"  # clear screen, home, cursor up, report position
    b"\xc2\x9b2J"  # C1 CSI (U+009B) then 2J
    b"\x07\x08\x0e\x7f"  # BEL, BS, shift-out, DEL
)
COLOURED = b"\x1b[31mred\x1b[0m \x1b[1;32mbold green\x1b[0m"
PROGRESS = b"epoch 1: 10%\repoch 1: 50%\repoch 1: 100%"
PRINTER = f"""
import os, sys
out = sys.stdout.buffer
out.write(b"before " + {HOSTILE!r} + b" after\\n")
out.write({COLOURED!r} + b"\\n")
out.write({PROGRESS!r} + b"\\n")
out.flush()
if os.environ.get("FAIL"):
    raise RuntimeError("bad \\x1b]52;c;cHduZWQ=\\x07 news \\x1b[2J")
"""
_SGR = re.compile(rb"\x1b\[[0-9;:]{0,64}m")
_CONTROL = re.compile(rb"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")


def assert_harmless(shown: bytes) -> None:
    """No control sequence but colours; backspace, tab, newline and carriage return allowed."""
    rest = _SGR.sub(b"", shown)
    found = _CONTROL.search(rest)
    assert found is None, rest[max(0, found.start() - 60) : found.end() + 60]


def assert_readable(shown: bytes) -> None:
    assert b"before ^[]52;c;cHduZWQ=^G^[]0;owned title^[\\" in shown
    assert b"^[[2J^[[H^[[1A^[[6n^[[2J" in shown  # the C1 CSI shown as its 7-bit form
    assert COLOURED in shown  # colours pass untouched
    assert PROGRESS in shown  # so do progress bars


def _job(write_job, fail: bool = False):  # type: ignore[no-untyped-def]
    env = "environment_variables:\n  FAIL: '1'\n" if fail else ""
    return write_job(f"command: python printer.py\ncode: src\n{env}", {"printer.py": PRINTER})


def test_the_live_stream_neutralizes_escapes_and_the_log_keeps_them(write_job, distrun_home):
    done = run_bytes(distrun_home, "run", str(_job(write_job)), "--name", "esc")
    assert done.returncode == 0, done.stderr
    assert_harmless(done.stdout)
    assert_readable(done.stdout)
    log = (distrun_home / "jobs" / "esc" / "user_logs" / "std_log_process_00.txt").read_bytes()
    assert b"before " + HOSTILE + b" after\n" in log  # exact bytes on disk


def test_logs_and_job_stream_neutralize_escapes(write_job, distrun_home):
    assert run_bytes(distrun_home, "run", str(_job(write_job)), "--name", "esc").returncode == 0
    for args in (["logs", "esc"], ["logs", "esc", "--tail", "5"], ["job", "stream", "esc"], ["logs", "esc", "-f"]):
        shown = run_bytes(distrun_home, *args)
        assert shown.returncode == 0, (args, shown.stderr)
        assert_harmless(shown.stdout)
        assert_readable(shown.stdout)
    # One rank's log into a file or a pipe is the log, byte for byte.
    exact = run_bytes(distrun_home, "logs", "esc", "--rank", "0")
    assert exact.stdout == (distrun_home / "jobs" / "esc" / "user_logs" / "std_log_process_00.txt").read_bytes()


def test_one_ranks_log_on_a_terminal_is_neutralized(write_job, distrun_home):
    assert run_bytes(distrun_home, "run", str(_job(write_job)), "--name", "esc").returncode == 0
    for extra in ([], ["--tail", "5"]):
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "distrun", "logs", "esc", "--rank", "0", *extra],
            stdout=slave,
            stderr=subprocess.PIPE,
            env=cli_env(distrun_home),
        )
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            shown += chunk
        os.close(master)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()  # type: ignore[union-attr]
        shown = shown.replace(b"\r\n", b"\n")  # the terminal's own newline translation
        assert_harmless(shown)
        assert b"^[]52;c;cHduZWQ=^G" in shown


def test_the_summary_neutralizes_a_traceback_with_escapes(write_job, distrun_home):
    done = run_bytes(distrun_home, "run", str(_job(write_job, fail=True)), "--name", "escfail")
    assert done.returncode == 1, done.stderr
    summary = done.stdout[done.stdout.index(b"Execution Summary") :]
    assert b"RuntimeError: bad ^[]52;c;cHduZWQ=^G news ^[[2J" in summary
    assert_harmless(done.stdout + done.stderr)
    streamed = run_bytes(distrun_home, "job", "stream", "escfail")
    assert_harmless(streamed.stdout + streamed.stderr)
    assert b"RuntimeError: bad ^[]52;c;cHduZWQ=^G" in streamed.stdout


def test_names_in_validation_errors_cannot_drive_the_terminal(distrun_home, tmp_path):
    job = tmp_path / "job.yml"
    job.write_text(
        'command: echo hi\n"comm\\e]52;c;cHduZWQ=\\aand": 1\ninputs:\n  "x\\e[2J\\e]0;t\\a": 1\n'
        'outputs:\n  "o\\x9b2J": {}\n'
    )
    done = run_capped(distrun_home, "run", str(job), text=False)
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr
    assert_harmless(done.stderr)
    assert b"^[]52;c;cHduZWQ=^G" in done.stderr or b"\\x1b]52" in done.stderr
    overridden = run_capped(distrun_home, "job", "validate", "-f", str(job), "--set", "\x1b]0;title\x07=1", text=False)
    assert overridden.returncode == 2
    assert_harmless(overridden.stderr)


_PIECES = st.sampled_from([b"\x1b", b"[", b"]", b"31", b";", b"m", b"\x07", b"\xc2", b"\x9b", b"\r", b"a", b"\\"])


@settings(max_examples=int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "300")), deadline=None)
@given(data=st.one_of(st.binary(max_size=300), st.lists(_PIECES, max_size=60).map(b"".join)))
def test_no_byte_string_gets_a_control_sequence_through(data: bytes) -> None:
    shown = neutral(data)
    assert_harmless(shown)
    if not _CONTROL.search(_SGR.sub(b"", data)):
        assert shown == data  # text with only colours in it is passed on untouched
