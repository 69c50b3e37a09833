"""The exchange of stack requests, answers and progress between copies of a job folder (Ray)."""

from __future__ import annotations

import os

from distrun.agent.folder_mirror import FROM_NODES, SHARED, Changes, MirrorSide


def exchange(hub: MirrorSide, node: MirrorSide) -> Changes:
    """One poll: the hub's changes go down, the node's come back up (as the Ray driver does)."""
    node.apply(Changes.from_dict(hub.changes().to_dict()))
    up = Changes.from_dict(node.changes().to_dict())
    hub.apply(up)
    return up


def test_requests_go_down_answers_come_up_and_removals_follow(tmp_path):
    hub_root, node_root = tmp_path / "hub", tmp_path / "node"
    hub, node = MirrorSide(hub_root, SHARED), MirrorSide(node_root, FROM_NODES)
    (hub_root / "stacks" / "requests").mkdir(parents=True)
    (hub_root / "stacks" / "requests" / "00112233aabbccdd").write_text('{"native": false}')
    assert exchange(hub, node).written == {}  # nothing new on the node: nothing comes back
    assert (node_root / "stacks" / "requests" / "00112233aabbccdd").read_text() == '{"native": false}'
    answers = node_root / "stacks" / "answers"
    answers.mkdir(parents=True)
    (answers / "00112233aabbccdd-node1.json").write_text('{"node_ranks": [1]}')
    (node_root / "hang").mkdir()
    (node_root / "hang" / "stacks.txt").write_text("every stack")
    up = exchange(hub, node)
    assert sorted(up.written) == ["hang/stacks.txt", "stacks/answers/00112233aabbccdd-node1.json"]
    assert (hub_root / "stacks" / "answers" / "00112233aabbccdd-node1.json").read_text() == '{"node_ranks": [1]}'
    assert not (hub_root / "hang").exists()  # the hub's side takes hang/ only as the backend writes it
    # The asker removes its request and the answers: the node's copies go too, and nothing echoes back.
    os.unlink(hub_root / "stacks" / "requests" / "00112233aabbccdd")
    os.unlink(hub_root / "stacks" / "answers" / "00112233aabbccdd-node1.json")
    assert exchange(hub, node) == Changes()
    assert os.listdir(node_root / "stacks" / "requests") == [] and os.listdir(answers) == []


def test_a_link_planted_by_the_job_is_not_followed_and_garbage_is_ignored(tmp_path):
    hub_root, node_root = tmp_path / "hub", tmp_path / "node"
    (node_root / "progress").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("not the job's")
    (node_root / "progress" / "node1").symlink_to(secret)
    node = MirrorSide(node_root, FROM_NODES)
    assert node.changes() == Changes()
    assert Changes.from_dict("not a dict") == Changes()
    hub = MirrorSide(hub_root, SHARED)
    hub.apply(Changes({"../../escape": b"x", "hang/stacks.txt": b"x", "progress/.hidden": b"x"}, []))
    assert not (tmp_path / "escape").exists() and not hub_root.exists()
