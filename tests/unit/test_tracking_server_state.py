"""A state file of DISTRUN_HOME's MLflow server is believed only when its own keeper is alive
and owns the port it names: a stale or planted file never sends ranks to another program's port."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import time
from pathlib import Path

from distrun.core import procfs
from distrun.metrics import server_keeper, tracking_server


def write_state(home: Path, **fields: object) -> None:
    folder = tracking_server.server_folder(home)
    (folder / "state.json").write_text(json.dumps({"advertise": "127.0.0.1", "host": "127.0.0.1", **fields}))


def test_a_state_file_naming_a_foreign_or_gone_process_is_not_believed(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as foreign:  # some program's server, not a keeper
        port = foreign.getsockname()[1]
        me = os.getpid()
        assert procfs.listening_sockets(port) & procfs.socket_inodes(me)  # the check can see an owner
        # This process owns the port and is alive, but holds no keeper's `alive` lock and is no keeper.
        write_state(tmp_path, pid=me, started=procfs.start_time(me), port=port)
        assert tracking_server.read_state(tmp_path) is not None
        assert tracking_server.verified_state(tmp_path) is None
        # A pid whose start time differs (a reused pid) is not believed either.
        write_state(tmp_path, pid=me, started=1, port=port)
        assert tracking_server.verified_state(tmp_path) is None
    # A planted link in place of the state file is not read through.
    (tmp_path / "elsewhere.json").write_text(json.dumps({"pid": me, "port": port}))
    state = tmp_path / "mlflow-server" / "state.json"
    state.unlink()
    state.symlink_to(tmp_path / "elsewhere.json")
    assert tracking_server.read_state(tmp_path) is None and tracking_server.verified_state(tmp_path) is None


def test_a_submitted_jobs_lease_keeps_the_server_for_a_bounded_time_and_only_as_a_regular_file(tmp_path: Path) -> None:
    folder = tracking_server.server_folder(tmp_path)
    now = time.time()
    assert not tracking_server.leased(folder, now)
    tracking_server.leave_lease(tmp_path, "queued_job")
    assert tracking_server.leased(folder, time.time())
    # Past LEASE_SECONDS from its submission a job no longer keeps the server (it waited too long).
    assert not tracking_server.leased(folder, time.time() + tracking_server.LEASE_SECONDS + 1)
    tracking_server.drop_lease(tmp_path, "queued_job")
    assert not tracking_server.leased(folder, time.time())
    # Anything but a regular file in the leases folder (a planted link to a fresh file) is no lease.
    (tmp_path / "fresh").write_text("")
    (folder / tracking_server.LEASES / "planted").symlink_to(tmp_path / "fresh")
    assert not tracking_server.leased(folder, time.time())
    tracking_server.drop_lease(tmp_path, "never_leased")  # nothing to drop: no error


def admitted(host_header: str, allowed: str) -> bool:
    """mlflow server's Host-header check: a pattern with `*` is matched by fnmatch, others compared."""
    return any(fnmatch.fnmatch(host_header, p) if "*" in p else host_header == p for p in allowed.split(","))


def test_the_server_admits_the_name_ranks_are_given_and_loopback_only() -> None:
    for advertise, header in [
        ("127.0.0.1", "127.0.0.1:5000"),
        ("login-1.cluster.example", "login-1.cluster.example:41234"),  # not admitted by mlflow's default
        ("fe80::2", "[fe80::2]:41234"),
    ]:
        allowed = server_keeper.allowed_hosts(advertise)
        assert admitted(header, allowed) and admitted("localhost:5000", allowed) and admitted("[::1]", allowed)
        assert not admitted("attacker.example:5000", allowed) and not admitted("10.1.2.3:5000", allowed)


def test_only_the_first_job_of_a_home_says_its_metrics_store_is_starting(tmp_path: Path) -> None:
    from distrun.metrics.tracking import default_tracking_uri, store_to_make

    uri = default_tracking_uri(tmp_path)
    assert store_to_make(uri, tmp_path)  # a fresh DISTRUN_HOME: its store is made now
    assert not store_to_make(f"sqlite:///{tmp_path / 'mine.db'}", tmp_path)  # a store of the user's own
    assert not store_to_make("http://127.0.0.1:5000", tmp_path)
    (tmp_path / "mlflow.db").touch()
    assert not store_to_make(uri, tmp_path)  # made by an earlier job: nothing to say
