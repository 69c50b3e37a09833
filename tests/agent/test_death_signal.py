"""A child's parent-death signal, set by setpriv (no Python between fork and exec)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from distrun.backends.ray.actor import RayNodeAgent
from distrun.core.death_signal import setpriv_prefix

# Started through the prefix by a middle process, which is then SIGKILLed: the grandchild must
# receive the asked signal (and write its name) as its parent dies.
_CHILD = """
import os, signal, sys, time
def caught(number, frame):
    # Written aside and renamed into place: the test, polling for the file, never reads it half-written.
    with open(sys.argv[1] + ".part", "w") as said:
        said.write(signal.Signals(number).name)
    os.replace(sys.argv[1] + ".part", sys.argv[1])
    sys.exit(0)
signal.signal(signal.SIGTERM, caught)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(60)
"""

_MIDDLE = """
import subprocess, sys, time
from distrun.core.death_signal import setpriv_prefix
prefix = setpriv_prefix(sys.argv[2])
assert prefix, "setpriv cannot set a death signal here"
subprocess.Popen([*prefix, sys.executable, "-c", sys.argv[3], sys.argv[1]])
time.sleep(60)
"""


def _wait_for(path: Path, timeout: float = 30.0) -> bool:
    give_up = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < give_up:
        time.sleep(0.02)
    return path.exists()


def test_the_prefix_is_setpriv_with_the_asked_signal():
    prefix = setpriv_prefix("TERM")
    assert prefix == (shutil.which("setpriv"), "--pdeathsig", "TERM", "--")
    assert setpriv_prefix("KILL")[2] == "KILL"


def test_a_child_started_through_the_prefix_gets_the_signal_when_its_parent_dies(tmp_path):
    said = tmp_path / "signal.txt"
    middle = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_MIDDLE), str(said), "TERM", textwrap.dedent(_CHILD)],
        stdin=subprocess.DEVNULL,
    )
    try:
        assert _wait_for(Path(f"{said}.ready")), "the child did not start"
        middle.kill()
        middle.wait(timeout=30)
        assert _wait_for(said), "the child got no signal when its parent died"
        assert said.read_text() == "SIGTERM"
    finally:
        middle.kill()
        middle.wait(timeout=30)


def _start_error(python: str) -> str | None:
    agent = RayNodeAgent("death_signal_probe", 0)
    try:
        started = threading.Event()
        agent._keep([python, "-m", "distrun.backends.ray.node_agent", str(agent.workdir)], started)
        assert started.is_set() and agent.ended.is_set()
        return agent.start_error
    finally:
        agent.cleanup()


def test_a_ray_node_actor_names_an_interpreter_that_cannot_run_as_popen_would(tmp_path):
    missing = str(tmp_path / "no-such-python")
    assert _start_error(missing) == f"could not start the node agent ({missing}): No such file or directory"
    not_executable = tmp_path / "python"
    not_executable.write_text("#!/bin/sh\n")
    said = _start_error(str(not_executable))
    assert said == f"could not start the node agent ({not_executable}): Permission denied"
    # Popen says the same where no setpriv is in between.
    for program in (missing, str(not_executable)):
        try:
            subprocess.Popen([program])
        except OSError as exc:
            assert _start_error(program) == f"could not start the node agent ({program}): {exc.strerror}"
        else:
            raise AssertionError(f"{program} ran")


def _fake_setpriv(folder: Path, body: str) -> None:
    folder.mkdir()
    program = folder / "setpriv"
    program.write_bytes(body.encode())
    program.chmod(0o755)


def _prefix_with_path(monkeypatch, folder: Path) -> tuple[str, ...]:
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    setpriv_prefix.cache_clear()
    try:
        return setpriv_prefix("TERM")
    finally:
        setpriv_prefix.cache_clear()


def test_a_setpriv_whose_option_table_names_pdeathsig_is_taken_without_running_it(tmp_path, monkeypatch):
    # Run, this one would fail and leave a trace: taking it proves it was only read.
    ran = tmp_path / "ran"
    _fake_setpriv(tmp_path / "bin", f"#!/bin/sh\ntouch {ran}\nexit 1\n# \0pdeathsig\0\n")
    taken = _prefix_with_path(monkeypatch, tmp_path / "bin")
    assert taken == (str(tmp_path / "bin" / "setpriv"), "--pdeathsig", "TERM", "--")
    assert not ran.exists()


def test_a_setpriv_that_does_not_name_the_option_is_asked_by_running_it(tmp_path, monkeypatch):
    ran = tmp_path / "ran"
    # Only a longer option holds the word: not the option itself.
    _fake_setpriv(tmp_path / "yes", f"#!/bin/sh\ntouch {ran}\nexit 0\n# \0keep-pdeathsig\0\n")
    assert _prefix_with_path(monkeypatch, tmp_path / "yes")[0] == str(tmp_path / "yes" / "setpriv")
    assert ran.exists()
    # An old setpriv refuses the option: no prefix, the caller sets the signal itself.
    _fake_setpriv(tmp_path / "old", "#!/bin/sh\necho \"setpriv: unrecognized option '--pdeathsig'\" >&2\nexit 1\n")
    assert _prefix_with_path(monkeypatch, tmp_path / "old") == ()
