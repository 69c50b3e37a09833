"""Servers on 127.0.0.1 for data-input tests: an HTTP file server with ETags and Range
requests (that can drop a download half-way), and moto's S3-compatible server."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before dropping, once
    log: list[tuple[str, int, str]] = field(default_factory=list)  # (path, status, Range header)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def etag(self, path: str) -> str:
        return '"' + hashlib.sha256(self.files[path]).hexdigest()[:16] + '"'


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = server.files.get(self.path)
            if body is None:
                return self._status(404)
            etag = server.etag(self.path)
            if self.headers.get("If-None-Match") == etag:
                return self._status(304)
            start = 0
            wanted = self.headers.get("Range")
            if wanted and self.headers.get("If-Range", etag) == etag:
                start = int(wanted.split("=")[1].split("-")[0])
            status = 206 if start else 200
            server.log.append((self.path, status, wanted or ""))
            self.send_response(status)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.end_headers()
            cut = server.cut_after.pop(self.path, None)
            if cut is not None:
                self.wfile.write(body[start : start + cut])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)  # the download breaks off here
                return
            self.wfile.write(body[start:])

        def _status(self, code: int) -> None:
            server.log.append((self.path, code, ""))
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    state = FileServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def s3_server() -> Iterator[str]:
    """moto's S3 server on a free loopback port; yields its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > give_up or proc.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
