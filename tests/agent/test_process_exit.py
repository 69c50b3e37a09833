"""The `distrun` command ends without Python's teardown, owing nothing: atexit handlers run,
buffered output is written, the exit code is the command's; with another thread alive it
exits the ordinary way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.core.process_exit import exit_status
from support.cli import SRC

# argv[1]: a file the atexit handler writes; argv[2]: a file written when the interpreter tears
# down __main__'s globals (only then does the witness's __del__ run); argv[3]: "thread" keeps
# a second thread alive at the end; the rest is the distrun command line.
_PROBE = """
import atexit, os, sys, threading, time
handler_file, teardown_file, mode = sys.argv[1:4]
atexit.register(lambda: open(handler_file, "w").write("ran"))

class Witness:
    def __del__(self):
        fd = os.open(teardown_file, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"torn down")
        os.close(fd)

witness = Witness()
if mode == "thread":
    # A daemon thread, alive however long distrun takes on a loaded machine; the ordinary exit
    # does not wait for it.
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
sys.stdout.write("x" * 200_000)  # buffered, never flushed by the probe
sys.argv = ["distrun", *sys.argv[4:]]
from distrun.cli.entry import main
main()
"""


def _run(tmp_path: Path, mode: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    handler, teardown = tmp_path / "handler", tmp_path / "teardown"
    src = str(SRC)
    env = {**os.environ, "DISTRUN_HOME": str(tmp_path / "home"), "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(handler), str(teardown), mode, *args],
        stdin=subprocess.DEVNULL,  # under PYTHONINSPECT the prompt that follows reads it: EOF ends it
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return done, handler, teardown


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["job", "show", "no_such_job"], 2)])
def test_the_command_leaves_without_teardown_owing_nothing(tmp_path, args, code):
    done, handler, teardown = _run(tmp_path, "alone", *args)
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith("x" * 200_000)  # what was buffered reached the reader
    if code == 0:
        assert "version" in done.stdout[200_000:]
    else:
        assert "no_such_job" in done.stderr
    assert handler.read_text() == "ran"
    assert not teardown.exists()  # the interpreter was not torn down


def test_with_another_thread_alive_the_command_exits_the_ordinary_way(tmp_path):
    done, handler, teardown = _run(tmp_path, "thread", "--version")
    assert done.returncode == 0, done.stderr
    assert handler.read_text() == "ran"
    assert teardown.read_text() == "torn down"


def test_under_python_inspect_the_command_exits_the_ordinary_way(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONINSPECT", "1")  # as `python -i`: Python's prompt follows the command
    done, handler, teardown = _run(tmp_path, "alone", "--version")
    assert "version" in done.stdout
    assert handler.read_text() == "ran"
    assert teardown.read_text() == "torn down"


def test_a_job_runs_and_fails_with_its_exit_code_through_the_early_exit(tmp_path):
    job = tmp_path / "job.yml"
    job.write_text('command: "echo done; exit 3"\n')
    done, handler, teardown = _run(tmp_path, "alone", "run", str(job))
    assert done.returncode == 1, done.stderr
    assert "done" in done.stdout and "exited with code 3" in done.stdout
    assert handler.read_text() == "ran" and not teardown.exists()


def test_exit_status_is_what_sys_exit_gives_or_none_for_the_ordinary_way():
    assert exit_status(None) == 0
    assert exit_status(0) == 0 and exit_status(2) == 2 and exit_status(True) == 1
    assert exit_status("a message") is None  # Python prints it and exits 1
    assert exit_status(2**40) is None
