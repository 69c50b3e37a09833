"""No orphans, also when a rank attacks the supervisor (class 6).

A rank (root, here) leaves a daemon that cleared its environment and left its session, then
kills what guards the job and finally distrun itself with SIGKILL. Whatever it could find,
nothing of the job is left running: the watchdog is not in the rank's ancestry (nor a child of
its parent), and the first reader that finds the supervisor gone kills the rest of the launch.
What root inside a job can still escape is listed in docs/guarantees.md.
"""

from __future__ import annotations

import os
import signal

from support.jobs import wait_for
from support.reliability import assert_nothing_left, job_file, processes_with, run_capped

# Started by the rank: a daemon that keeps nothing the marker could find (env -i, setsid,
# closed stdio), then the attack. `hunt` picks what to kill before distrun.
ATTACK = """
import os, signal, subprocess, sys, time

token = sys.argv[1]
hunt = sys.argv[2]
subprocess.Popen(
    ["setsid", "env", "-i", "/bin/bash", "-c", f"exec -a {token} sleep 600"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
)
time.sleep(1)


def ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read()


ancestry = []
pid = os.getpid()
while pid > 1:
    ancestry.append(pid)
    pid = ppid(pid)
supervisor = next(p for p in ancestry if b"distrun" in cmdline(p) and b"-m\\0distrun" in cmdline(p))
targets = set()
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in ancestry:
        continue
    try:
        if token.encode() in cmdline(int(entry)):
            continue  # its own daemon (reparented to the supervisor, the subreaper)
        if hunt == "ancestry" and ppid(int(entry)) in ancestry[: ancestry.index(supervisor) + 1]:
            targets.add(int(entry))  # the supervisor's other children: its watchdog, before
        if hunt == "everywhere" and cmdline(int(entry)) == cmdline(supervisor):
            targets.add(int(entry))  # anything that looks like the supervisor (a fork of it)
    except OSError:
        pass
print("killing", sorted(targets), "then", supervisor, flush=True)
for target in targets:
    os.kill(target, signal.SIGKILL)
time.sleep(0.5)
os.kill(supervisor, signal.SIGKILL)
time.sleep(600)
"""


def _attack(tmp_path, distrun_home, hunt: str, name: str) -> str:
    token = f"attack-{hunt}-{os.getpid()}"
    job = job_file(
        tmp_path,
        f"command: python attack.py {token} {hunt}\ncode: src\nlimits:\n  grace_period: 1\n",
        {"attack.py": ATTACK},
    )
    done = run_capped(distrun_home, "run", str(job), "--name", name, timeout=180)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    assert "killing" in done.stdout
    return token


def test_killing_the_supervisors_other_children_then_distrun_leaves_nothing(tmp_path, distrun_home):
    token = _attack(tmp_path, distrun_home, "ancestry", "hunter")
    assert_nothing_left("hunter", token, within=30)  # the watchdog was not among them
    shown = run_capped(distrun_home, "job", "show", "hunter", "-o", "json")
    assert '"status": "Failed"' in shown.stdout and "launcher lost" in shown.stdout


def test_killing_the_watchdog_wherever_it_is_then_distrun_is_swept_by_the_next_reader(tmp_path, distrun_home):
    token = _attack(tmp_path, distrun_home, "everywhere", "thorough")
    # Nobody guards the launch now; the daemon lives until someone looks at the job.
    shown = run_capped(distrun_home, "job", "show", "thorough")
    assert shown.returncode == 0, shown.stderr
    assert "launcher lost" in shown.stdout
    assert_nothing_left("thorough", token, within=15)


def test_a_daemon_that_leaves_the_launch_cgroup_but_keeps_the_marker_is_stopped(run_cli, write_job, distrun_home):
    token = f"mover-{os.getpid()}"
    job = write_job(
        "command: >-\n"
        "  setsid bash -c 'echo $$ > /sys/fs/cgroup/unified/cgroup.procs 2>/dev/null;"
        f" exec -a {token} sleep 600' < /dev/null > /dev/null 2>&1 & sleep 1; echo started\n"
        "code: src\n"
    )
    done = run_cli("run", str(job), "--name", "mover")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_nothing_left("mover", token, within=15)
    wait_for(lambda: not processes_with(token), timeout=15)
