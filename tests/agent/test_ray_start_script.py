"""`type: ray`'s start script on a node: a failed `ray start` is retried within its budget, its logs shown,
its leftovers ended; the raylet gets the agent port file it waits for."""

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
    assert "ray start failed (exit code 1), attempt 1, " in text and "; trying again." in text
    assert "raylet: timed out waiting for the agent" in text  # the end of Ray's log, shown
    daemon = int((tmp_path / "daemon").read_text())
    give_up = time.monotonic() + 30
    while running(daemon):
        assert time.monotonic() < give_up, "the failed attempt's daemon was left running"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # a started node: the stop goes to `ray start`
    assert proc.wait(30) == 143


# A `ray start` that never starts: the raylet's log names the cause among the workers' chatter.
FAILING_RAY_START = """\
import pathlib, sys
root = pathlib.Path(sys.argv[1])
logs = root / "session_latest" / "logs"
logs.mkdir(parents=True, exist_ok=True)
(logs / "raylet.out").write_text("Check failed: Timed out waiting for file dashboard_agent_listen_port\\nstack\\n")
for n in range(5):
    (logs / f"python-core-worker-{n}.log").write_text("task events sent: 0\\n")
sys.exit(1)
"""


def test_type_ray_start_script_gives_up_after_its_budget_naming_the_raylet_cause(tmp_path: Path) -> None:
    import subprocess
    import sys

    from distrun.plan.ray import START_SCRIPT

    (tmp_path / "start_node.py").write_text(START_SCRIPT)
    (tmp_path / "ray_start.py").write_text(FAILING_RAY_START)
    argv = [sys.executable, str(tmp_path / "start_node.py"), "0", sys.executable, str(tmp_path / "ray_start.py")]
    done = subprocess.run([*argv, str(tmp_path), f"--temp-dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    # A spent budget still gets a second attempt: one slow start is not a verdict.
    assert done.stdout.count("ray start failed (exit code 1)") == 2, done.stdout
    assert "attempt 2, " in done.stdout and "; giving up." in done.stdout
    # The raylet's cause is shown although five workers' logs changed after it.
    assert done.stdout.count("Check failed: Timed out waiting for file dashboard_agent_listen_port") >= 2
    assert "Ray did not start on this node in 2 attempts over " in done.stderr


# A stand-in for `ray start` whose raylet (a process named .../raylet with Ray's flags) needs the
# dashboard agent's port file within 15 s, and whose agent never writes it (a machine too busy
# for the agent to import in time).
SLOW_AGENT_RAY_START = """\
import os, pathlib, subprocess, sys
session = pathlib.Path(sys.argv[1]) / "session_1"
session.mkdir(parents=True, exist_ok=True)
raylet = subprocess.run(
    ["bash", "-c", 'exec -a "$0" "$@"', "/opt/ray/core/raylet", sys.executable, "-c",
     "import pathlib, sys, time\\n"
     "node, session = (arg.split('=', 1)[1] for arg in sys.argv[1:])\\n"
     "target = pathlib.Path(session) / ('dashboard_agent_listen_port_' + node)\\n"
     "give_up = time.monotonic() + 15\\n"
     "while not target.exists() and time.monotonic() < give_up:\\n"
     "    time.sleep(0.05)\\n"
     "sys.exit(0 if target.exists() and target.read_text() == '8123' else 1)",
     "--node_id=00ab", f"--session_dir={session}"],
)
if raylet.returncode:
    sys.exit("Check failed: Timed out waiting for file dashboard_agent_listen_port")
print("Ray runtime started.", flush=True)
"""


def test_type_ray_start_script_writes_the_agent_port_file_the_raylet_waits_for(tmp_path: Path) -> None:
    import subprocess
    import sys

    from distrun.plan.ray import START_SCRIPT

    (tmp_path / "start_node.py").write_text(START_SCRIPT)
    (tmp_path / "ray_start.py").write_text(SLOW_AGENT_RAY_START)
    argv = [sys.executable, str(tmp_path / "start_node.py"), "0", sys.executable, str(tmp_path / "ray_start.py")]
    done = subprocess.run(
        [*argv, str(tmp_path), "--dashboard-agent-listen-port=8123"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ray runtime started" in done.stdout and "ray start failed" not in done.stdout
    assert (tmp_path / "session_1" / "dashboard_agent_listen_port_00ab").read_text() == "8123"
    assert [p.name for p in (tmp_path / "session_1").iterdir()] == ["dashboard_agent_listen_port_00ab"]
