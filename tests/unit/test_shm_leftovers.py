"""distrun.agent.shm_leftovers: only the names a framework made for the job's own rendezvous go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from distrun.agent.shm_leftovers import leftover_names, remove_leftovers, rendezvous_of

UID = 1000


def test_only_the_jobs_own_address_port_and_user_with_a_rank_number_are_leftovers() -> None:
    listing = [
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23114_0",
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23114_13",
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23115_0",  # another job's port
        "deepspeed_allreduce_buffer_1000_127.0.0.1_231140_0",  # a longer port
        "deepspeed_allreduce_buffer_1001_127.0.0.1_23114_0",  # another user's
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23114_0x",  # not a rank number
        "libpod_lock",
    ]
    assert leftover_names(listing, {("127.0.0.1", "23114")}, UID) == [
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23114_0",
        "deepspeed_allreduce_buffer_1000_127.0.0.1_23114_13",
    ]
    assert leftover_names(listing, set(), UID) == []


def test_the_rendezvous_comes_from_each_process_environment() -> None:
    envs = [
        {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"},
        {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "RANK": "1"},
        {"RANK": "2"},  # a process without a rendezvous (a Ray node, a parameter server's helper)
    ]
    assert rendezvous_of(envs) == {("10.0.0.1", "29500")}


def test_removing_takes_the_files_and_links_of_those_names_and_nothing_else(tmp_path: Path) -> None:
    uid = os.getuid()
    mine = tmp_path / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_40000_0"
    mine.write_bytes(b"x")
    target = tmp_path / "kept"
    target.write_bytes(b"kept")
    linked = tmp_path / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_40000_1"
    linked.symlink_to(target)
    other = tmp_path / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_40001_0"
    other.write_bytes(b"x")
    job = [{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000", "RANK": str(r)} for r in range(2)]
    removed = remove_leftovers(job, tmp_path)
    assert removed == [mine.name, linked.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, "kept"])
    assert target.read_bytes() == b"kept"  # a link is removed, never followed
    assert remove_leftovers(job, tmp_path / "missing") == []


def test_a_folder_without_such_files_never_has_the_environments_read(tmp_path: Path) -> None:
    (tmp_path / "libpod_lock").write_bytes(b"")

    def environments() -> Iterator[dict[str, str]]:
        raise AssertionError("read although nothing in the folder could be a leftover")
        yield {}

    assert remove_leftovers(environments(), tmp_path) == []
