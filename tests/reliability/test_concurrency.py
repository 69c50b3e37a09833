"""8 jobs at once in one DISTRUN_HOME while 20 processes read `job list`/`show`/`logs` in a loop.

Promises checked: no "database is locked" or any other error for readers or launchers, no
record seen half-written (a terminal status without its end time or processes), no torn
log line, no two jobs given the same port, every job completed, nothing left running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distrun.store.index import JobIndex
from support.cli import cli_env
from support.jobs import wait_for
from support.reliability import assert_nothing_left

JOBS = 8
READERS = 20
READER = Path(__file__).parents[1] / "support" / "concurrent_reader.py"

# Rank 0 binds its MASTER_PORT (it fails at once if another job holds it); rank 1 writes lines.
JOB = """
    command: >-
      if [ "$RANK" = 0 ]; then exec python bind.py; fi;
      for i in $(seq 1 150); do echo "line $i"; sleep 0.02; done
    code: src
    resources:
      instance_count: 1
    distribution:
      type: pytorch
      process_count_per_instance: 2
"""
BIND = """
    import os, socket, time
    port = int(os.environ["MASTER_PORT"])
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    print("bound", port, flush=True)
    time.sleep(4)
"""


@pytest.mark.slow
def test_eight_jobs_and_twenty_readers(write_job, distrun_home, tmp_path):
    stop = tmp_path / "stop"
    env = cli_env(distrun_home)
    job = write_job(JOB, {"bind.py": BIND})
    # The readers start first, on an empty index, and keep reading through every job's life.
    readers = [
        subprocess.Popen(
            [sys.executable, str(READER), str(stop), str(tmp_path / f"reader{i}.json")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(READERS)
    ]
    launchers = []
    try:
        wait_for(lambda: (distrun_home / "jobs.db").exists(), timeout=60)
        launchers = [
            subprocess.Popen(
                [sys.executable, "-m", "distrun", "run", str(job), "--name", f"many{i}"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for i in range(JOBS)
        ]
        outputs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in launchers]
        time.sleep(1)  # readers see the final records too
    finally:
        stop.touch()
        for proc in readers + launchers:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    for proc, output in zip(launchers, outputs, strict=True):
        assert proc.returncode == 0, output
        assert "database is locked" not in output and "Traceback" not in output
    index = JobIndex(distrun_home / "jobs.db")
    records = {f"many{i}": index.get(f"many{i}") for i in range(JOBS)}
    assert {r.status for r in records.values()} == {"Completed"}
    ports = [json.loads((Path(r.folder) / "plan.json").read_text())["master_port"] for r in records.values()]
    assert len(set(ports)) == JOBS, f"two jobs were given one port: {ports}"
    total_calls = 0
    for i, reader in enumerate(readers):
        out = reader.stdout.read().decode(errors="replace") if reader.stdout else ""
        summary = json.loads((tmp_path / f"reader{i}.json").read_text())
        assert summary["errors"] == [], (summary["errors"], out)
        assert summary["calls"] > 0
        total_calls += summary["calls"]
    for name in records:
        log = (distrun_home / "jobs" / name / "user_logs" / "std_log_process_01.txt").read_text()
        assert log == "".join(f"line {i}\n" for i in range(1, 151))
        assert_nothing_left(name)
    print(f"{JOBS} jobs, {READERS} readers, {total_calls} reader calls, 0 errors")


HOLD_LEASE = """
import sys, time
from distrun.store.port_leases import PortLeases
leases = PortLeases()
assert leases.take(int(sys.argv[1]))
print("held", flush=True)
time.sleep(300)
"""


def test_a_port_leased_to_a_running_job_is_not_given_to_another(monkeypatch, distrun_home):
    from distrun.backends import ports
    from distrun.store.port_leases import PortLeases

    port = 24001
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LEASE, str(port)], env=cli_env(distrun_home), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # Only two ports to choose from, one of them leased: always the other one.
        monkeypatch.setattr(ports, "PORT_RANGE", (port, port + 1))
        for _ in range(20):
            leases = PortLeases()
            assert ports.free_ports(1, leases) == [port + 1]
            leases.release()
        # The lease dies with its holder, however it ends.
        holder.kill()
        holder.wait()
        leases = PortLeases()
        assert sorted(ports.free_ports(2, leases)) == [port, port + 1]
        leases.release()
    finally:
        holder.kill()
        holder.wait()


FIRST_CONTACT = """
import sys, time
from pathlib import Path
from distrun.store.index import JobIndex, JobRecord
db, n, start = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
JobIndex(db).insert(JobRecord(name="j" + n, status="Queued", compute="local", folder="/x", created_at=time.time()))
print(len(JobIndex(db).list()))
"""


def test_many_processes_opening_a_new_index_at_once(distrun_home, tmp_path):
    """Jobs started together in a fresh DISTRUN_HOME all set the index up at the same moment."""
    for attempt in range(4):
        db = tmp_path / f"home{attempt}" / "jobs.db"
        start = time.time() + 1.0
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", FIRST_CONTACT, str(db), str(i), str(start)],
                env=cli_env(distrun_home),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(12)
        ]
        outputs = [p.communicate(timeout=120)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * 12, outputs
        assert len(JobIndex(db).names()) == 12
