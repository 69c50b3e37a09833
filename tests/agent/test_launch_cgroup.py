"""The launch's cgroup: ranks are born in it while the agent holds it, and the agent leaves again."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from distrun.agent.cgroup import LaunchCgroup


def test_processes_started_while_the_agent_holds_the_cgroup_are_born_members():
    home = Path("/proc/self/cgroup").read_text()
    cgroup = LaunchCgroup.create(f"test-births-{uuid.uuid4().hex}")
    assert cgroup is not None, "cgroup v2 is not writable here: the launch cgroup cannot be tested"
    try:
        with cgroup.births() as inside:
            assert inside
            child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
        # The agent is back where it was: stopping the launch kills the cgroup, not the agent.
        assert Path("/proc/self/cgroup").read_text() == home
        members = cgroup.pids()
        assert child.pid in members and os.getpid() not in members
    finally:
        cgroup.close()
    assert child.wait(timeout=30) == -9  # killed with the cgroup
    assert not cgroup.path.exists()
