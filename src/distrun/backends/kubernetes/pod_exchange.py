"""The pods' exchange: node 0's agent relays the job folder's exchanged files between pods, and
answers `distrun job stacks`.

Each pod has its own job folder, and the pods share nothing but the network. Node 0's pod agent
serves HTTP on the job's exchange port (DISTRUN_K8S_EXCHANGE_PORT, on every address of its pod;
the other pods reach it at MASTER_ADDR, the plan's first host):

- `POST /exchange` from every other pod's agent, every EXCHANGE_SECONDS while its processes run:
  `{"node": k, "changes": ...}`, what changed in that pod's `stacks/requests`, `stacks/answers` and
  `progress/` (`agent.folder_mirror.MirrorSide`); the answer is what changed in node 0's since the
  pod's last exchange. Node 0's folder is the hub: what one pod sends reaches the others on their
  next exchange, so every agent sees the whole job's progress and every stack request, as on a
  shared filesystem (`peers_share_job_folder` stays True);
- `POST /stacks` from the `distrun` client, through the Kubernetes API's pod proxy
  (`pods/<pod>:<port>/proxy/stacks`: no exec or port-forward, only the API the client already
  uses): `{"native": false}`; node 0's agent writes a request in its job folder, as `job stacks`
  does on a shared one, waits for every node's answer and returns
  `{"processes": [...], "missing_nodes": [...]}`.

Every request carries the job's token (X-Distrun-Token; the job's Secret, which every pod gets as
DISTRUN_K8S_EXCHANGE_TOKEN) or is refused with 403: anything in the cluster network can reach the
port. Bodies are bounded; the files are written and read with the job folder's safe paths, as
the Ray relay does (the job's own processes can write them on any pod). Standard library only.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import threading
import urllib.request
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from distrun.agent.folder_mirror import SHARED, Changes, MirrorSide

EXCHANGE_PATH = "/exchange"
STACKS_PATH = "/stacks"
TOKEN_HEADER = "X-Distrun-Token"
EXCHANGE_SECONDS = 0.2
BODY_LIMIT = 32 * 1024 * 1024  # every answer of a job's stack read, a few hundred processes deep
_TIMEOUT = 10.0


def encode_changes(changes: Changes) -> dict[str, Any]:
    """A MirrorSide's changes as JSON (the files' bytes in base64)."""
    return {
        "written": {k: base64.b64encode(v).decode() for k, v in changes.written.items()},
        "removed": list(changes.removed),
    }


def decode_changes(data: object) -> Changes:
    """The changes another side sent; anything that is not what encode_changes makes is left out."""
    if not isinstance(data, dict):
        return Changes()
    written: dict[str, bytes] = {}
    for key, value in (data.get("written") or {}).items():
        if isinstance(value, str):
            try:
                written[str(key)] = base64.b64decode(value, validate=True)
            except ValueError:
                continue
    removed = data.get("removed") or []
    return Changes(written, [str(r) for r in removed] if isinstance(removed, list) else [])


class ExchangeHub:
    """Node 0's side: one MirrorSide of its job folder for each other pod, and `job stacks`' door."""

    def __init__(self, job_dir: Path, token: str, port: int, nodes: Collection[int], processes: int) -> None:
        self.job_dir = job_dir
        self.token = token
        self.nodes = set(nodes)
        self.processes = processes
        self.sides: dict[int, MirrorSide] = {}
        self.lock = threading.Lock()  # one exchange at a time: each pod's side is a running diff
        self.server = ThreadingHTTPServer(("", port), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.2,), daemon=True)
        self.thread.start()

    def exchange(self, node: int, changes: Changes) -> Changes:
        with self.lock:
            side = self.sides.get(node)
            if side is None:
                side = self.sides[node] = MirrorSide(self.job_dir, SHARED)
            side.apply(changes)
            return side.changes()

    def stacks(self, native: bool) -> dict[str, Any]:
        from distrun.agent.stack_requests import answer_wait, ask_nodes

        found, missing = ask_nodes(
            self.job_dir, os.urandom(8).hex(), self.nodes, answer_wait(self.processes), native=native
        )
        return {"processes": [p.to_dict() for p in found], "missing_nodes": missing}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(hub: ExchangeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            given = self.headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode(), hub.token.encode()):
                return self._reply(403, {"error": "the job's token is missing or wrong"})
            try:
                size = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                size = -1
            if not 0 <= size <= BODY_LIMIT:
                return self._reply(413, {"error": f"a body of at most {BODY_LIMIT} bytes, with its length"})
            try:
                body = json.loads(self.rfile.read(size) or b"{}")
            except ValueError:
                return self._reply(400, {"error": "the body is not JSON"})
            if not isinstance(body, dict):
                return self._reply(400, {"error": "the body is not a JSON object"})
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith(EXCHANGE_PATH) and isinstance(body.get("node"), int):
                changes = hub.exchange(body["node"], decode_changes(body.get("changes")))
                return self._reply(200, encode_changes(changes))
            if path.endswith(STACKS_PATH):
                return self._reply(200, hub.stacks(bool(body.get("native"))))
            return self._reply(404, {"error": f"no {self.path} here: {EXCHANGE_PATH} or {STACKS_PATH}"})

        def _reply(self, status: int, data: object) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the pod's log is the job's output

    return Handler


class ExchangeLink:
    """Another pod's side: its job folder's exchanged files, kept alike with node 0's every EXCHANGE_SECONDS."""

    def __init__(self, job_dir: Path, token: str, host: str, port: int, node: int) -> None:
        self.side = MirrorSide(job_dir, SHARED)
        self.token = token
        self.url = f"http://{host}:{port}{EXCHANGE_PATH}"
        self.node = node
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def exchange_once(self) -> bool:
        """One exchange; False when node 0 could not be reached (all is sent again next time)."""
        with self.lock:  # the side is a running diff: one exchange at a time
            body = json.dumps({"node": self.node, "changes": encode_changes(self.side.changes())}).encode()
            try:
                reply = post_json(self.url, self.token, body)
            except (OSError, ValueError):
                self.side.told.clear()  # node 0 may not have it: the next exchange sends every file
                return False
            self.side.apply(decode_changes(reply))
            return True

    def _run(self) -> None:
        while not self.stopped.wait(EXCHANGE_SECONDS):
            self.exchange_once()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(_TIMEOUT)


def post_json(url: str, token: str, body: bytes, timeout: float = _TIMEOUT) -> object:
    """POST `body` with the token; the JSON answer. OSError (urllib's errors) or ValueError on failure."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={TOKEN_HEADER: token, "Content-Type": "application/json"}
    )
    # Straight to the pod: a proxy from the image's environment knows nothing of the job's pods.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read(BODY_LIMIT + 1))
