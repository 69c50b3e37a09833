"""The remote start that lets mpirun reach other nodes through their node agents (distrun.agent.remote_start).

A real server on loopback, the real client as mpirun runs it (a subprocess): output and exit
code relayed, a wrong token refused, and a stopped client ends the remote command's processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distrun.agent.remote_start import HOSTS_ENV, TOKEN_ENV, RemoteStartServer, agent_of
from distrun.backends.ports import free_ports
from support.cli import SRC

TOKEN = "s3cret-job-token"


@pytest.fixture
def server() -> Iterator[tuple[RemoteStartServer, int]]:
    port = free_ports(1)[0]
    started = RemoteStartServer(TOKEN, port, host="127.0.0.1")
    yield started, port
    started.close()


def client(port: int, *command: str, token: str = TOKEN) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ, PYTHONPATH=str(SRC), **{HOSTS_ENV: json.dumps({"node1": f"127.0.0.1:{port}"}), TOKEN_ENV: token}
    )
    return subprocess.Popen(
        [sys.executable, "-m", "distrun.agent.remote_start", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def alive(pid: int) -> bool:
    try:
        return b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False


def test_runs_the_command_on_the_node_and_relays_its_output_and_exit_code(server):
    _, port = server
    proc = client(port, "node1", "echo", "out", "$((40+2));", "echo err >&2;", "exit 3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert out == b"out 42\n" and err == b"err\n"


def test_commands_start_in_the_nodes_code_folder_with_outputs_and_logs_there(tmp_path: Path):
    # The ranks mpirun starts on a node that does not share the job folder (Ray, Kubernetes)
    # write ./outputs like node 0's ranks do: the folder is there before any command comes.
    code = tmp_path / "job" / "code"
    code.mkdir(parents=True)
    port = free_ports(1)[0]
    started = RemoteStartServer(TOKEN, port, host="127.0.0.1", cwd=str(code))
    try:
        proc = client(port, "node1", "echo from-node1 > outputs/x.txt && echo log > logs/y.txt && pwd")
        out, err = proc.communicate(timeout=60)
    finally:
        started.close()
    assert proc.returncode == 0, err
    assert out.decode().strip() == str(code)
    assert (code / "outputs" / "x.txt").read_text() == "from-node1\n"
    assert (code / "logs" / "y.txt").read_text() == "log\n"


def test_a_wrong_token_or_an_unknown_host_runs_nothing(server, tmp_path: Path):
    _, port = server
    flag = tmp_path / "ran"
    proc = client(port, "node1", "touch", str(flag), token="guess")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 255 and b"wrong job token" in err
    proc = client(port, "node9", "touch", str(flag))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 255 and b"node9 is not a node of this job" in err
    assert not flag.exists()


def test_a_host_is_found_by_its_first_label_when_that_is_unambiguous():
    # Open MPI asks for `pod-0` where the hostfile says `pod-0.job` (the full name is where to connect).
    hosts = {"pod-0.job": "pod-0.job:7001", "pod-1.job": "pod-1.job:7002", "10.0.0.1": "10.0.0.1:7003"}
    assert agent_of(hosts, "pod-1.job") == "pod-1.job:7002"
    assert agent_of(hosts, "pod-1") == "pod-1.job:7002"
    assert agent_of(hosts, "pod-2") is None
    assert agent_of({"a.x": "a.x:1", "a.y": "a.y:2"}, "a") is None  # two hosts share it: none
    assert agent_of(hosts, "10") is None


def test_a_stopped_client_ends_the_remote_command_and_its_children(server, tmp_path: Path):
    _, port = server
    pids = tmp_path / "pids"
    proc = client(port, "node1", f"sleep 300 & echo $$ $! > {pids}; wait")
    give_up = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().endswith("\n")):
        assert time.monotonic() < give_up
        time.sleep(0.05)
    shell, child = (int(p) for p in pids.read_text().split())
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    give_up = time.monotonic() + 30
    while any(alive(pid) for pid in (shell, child)):
        assert time.monotonic() < give_up, "the remote command outlived its client"
        time.sleep(0.05)


def test_the_client_waits_for_an_agent_that_is_not_listening_yet():
    port = free_ports(1)[0]
    proc = client(port, "node1", "echo late agent")  # node k's agent may start after node 0's mpirun asks
    time.sleep(1.5)
    late = RemoteStartServer(TOKEN, port, host="127.0.0.1")
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        late.close()
    assert proc.returncode == 0, err
    assert out == b"late agent\n"
