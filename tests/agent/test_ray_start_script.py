"""`type: ray`'s start script on a node: a failed `ray start` is retried, its logs shown, its leftovers ended."""

from __future__ import annotations

from pathlib import Path

# A stand-in for `ray start --block`: the first attempt writes a log, leaves a daemon behind and
# fails; the next says Ray started and serves until SIGTERM.
FLAKY_RAY_START = """\
import os, pathlib, signal, subprocess, sys, time
root = pathlib.Path(sys.argv[1])
attempt = len(list(root.glob("attempt_*"))) + 1
(root / f"attempt_{attempt}").write_text(str(os.getpid()))
if attempt == 1:
    logs = root / "session_latest" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "raylet.out").write_text("raylet: timed out waiting for the agent\\n")
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (root / "daemon").write_text(str(daemon.pid))
    sys.exit(1)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
print("Ray runtime started.", flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def test_type_ray_start_script_retries_a_failed_start_shows_ray_logs_and_ends_its_leftovers(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from distrun.plan.ray import START_SCRIPT

    (tmp_path / "start_node.py").write_text(START_SCRIPT)
    (tmp_path / "ray_start.py").write_text(FLAKY_RAY_START)
    argv = [sys.executable, str(tmp_path / "start_node.py"), "3", sys.executable, str(tmp_path / "ray_start.py")]
    proc = subprocess.Popen(
        [*argv, str(tmp_path), f"--temp-dir={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    out = b""
    while b"Ray runtime started" not in out:
        line = proc.stdout.readline()
        assert line, out.decode()
        out += line
    text = out.decode()
    assert "ray start failed (exit code 1), attempt 1 of 3" in text
    assert "raylet: timed out waiting for the agent" in text  # the end of Ray's log, shown
    daemon = int((tmp_path / "daemon").read_text())
    give_up = time.monotonic() + 30
    while running(daemon):
        assert time.monotonic() < give_up, "the failed attempt's daemon was left running"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # a started node: the stop goes to `ray start`
    assert proc.wait(30) == 143
