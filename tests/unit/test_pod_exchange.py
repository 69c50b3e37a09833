"""Node 0's pod exchange over real HTTP on 127.0.0.1: what one pod's agent writes reaches the
others through node 0's folder, and a request without the job's token is refused.
The whole path (two pods, `job stacks` through the API's pod proxy, a hang) is
tests/engines/kubernetes/test_kubernetes_hangs.py."""

from __future__ import annotations

import base64
import json
import socket
import urllib.error
from pathlib import Path

import pytest

from distrun.backends.kubernetes.pod_exchange import EXCHANGE_PATH, ExchangeHub, ExchangeLink, post_json
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.stacks_ask import node0_pod, secret_token

TOKEN = "t" * 32


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_pods_see_each_others_progress_and_requests_through_node_0(tmp_path: Path) -> None:
    hub_dir, one, two = (tmp_path / n for n in ("node0", "node1", "node2"))
    for folder in (hub_dir, one, two):
        folder.mkdir()
    port = free_port()
    hub = ExchangeHub(hub_dir, TOKEN, port, {0, 1, 2}, 6)
    links = [ExchangeLink(folder, TOKEN, "127.0.0.1", port, rank) for rank, folder in ((1, one), (2, two))]
    try:
        (one / "progress").mkdir()
        (one / "progress" / "node1").write_text("1700000000.000")
        assert links[0].exchange_once() and links[1].exchange_once()
        assert (hub_dir / "progress" / "node1").read_text() == "1700000000.000"
        assert (two / "progress" / "node1").read_text() == "1700000000.000"
        # What node 0's folder has (a stack request) reaches both; a removal travels too.
        (hub_dir / "stacks" / "requests").mkdir(parents=True)
        (hub_dir / "stacks" / "requests" / "0123456789abcdef").write_text("{}")
        assert links[0].exchange_once() and links[1].exchange_once()
        assert (one / "stacks" / "requests" / "0123456789abcdef").exists()
        (hub_dir / "stacks" / "requests" / "0123456789abcdef").unlink()
        assert links[0].exchange_once()
        assert not (one / "stacks" / "requests" / "0123456789abcdef").exists()
        # A path outside the exchanged folders is not written on node 0.
        forged = {"written": {"../evil": base64.b64encode(b"x").decode()}, "removed": []}
        body = json.dumps({"node": 1, "changes": forged}).encode()
        post_json(f"http://127.0.0.1:{port}{EXCHANGE_PATH}", TOKEN, body)
        assert not (tmp_path / "evil").exists()
        with pytest.raises(urllib.error.HTTPError) as refused:
            post_json(f"http://127.0.0.1:{port}{EXCHANGE_PATH}", "wrong", body)
        assert refused.value.code == 403
    finally:
        for link in links:
            link.close()
        hub.close()


def test_a_link_whose_hub_is_gone_sends_everything_again(tmp_path: Path) -> None:
    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "node1").write_text("1.0")
    link = ExchangeLink(tmp_path, TOKEN, "127.0.0.1", free_port(), 1)
    try:
        assert not link.exchange_once()
        assert link.side.changes().written == {"progress/node1": b"1.0"}
    finally:
        link.close()


def test_the_client_finds_node_0s_pod_and_the_token() -> None:
    layout = PodLayout("j", True, (PodRole("worker", 2, 0, "img"),))

    def pod(index: int, phase: str) -> dict:
        env = [{"name": "DISTRUN_K8S_EXCHANGE_PORT", "value": "21005"}]
        return {
            "metadata": {
                "name": f"j-worker-0-{index}-x",
                "labels": {"distrun.io/role": "worker"},
                "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            },
            "spec": {"containers": [{"name": "distrun", "env": env}]},
            "status": {"phase": phase},
        }

    assert node0_pod(layout, [pod(1, "Running"), pod(0, "Running")]) == ("j-worker-0-0-x", 21005)
    assert node0_pod(layout, [pod(1, "Running"), pod(0, "Pending")]) is None
    assert secret_token({"data": {"remote-start-token": base64.b64encode(b"abc").decode()}}) == "abc"
    assert secret_token({"stringData": {"remote-start-token": "abc"}}) == "abc"
    assert secret_token(None) is None
