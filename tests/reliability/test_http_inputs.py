"""Data inputs from servers that misbehave (class 7).

Each server is a real one on 127.0.0.1, in a thread of the test, answering every request the
same bad way: a chunked body that breaks its own framing, a body that never ends, headers and
then silence. A download from any of them ends with distrun's own error (in the record, when a
job was being prepared), within the size limit, with nothing partial left in the cache. Every
server bounds what it writes: the endless body stops after ENDLESS_CAP bytes or when the client
hangs up.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError
from distrun.data.http_fetch import fetch_url
from support.cli import distrun_cli
from support.jobs import only_job, record

ENDLESS_CAP = 64 << 20  # what the endless server sends at most, whoever reads it
STALL_CAP_S = 30.0  # how long the silent server stays silent at most


Answer = Callable[[socket.socket], None]


def _bad_chunks(conn: socket.socket) -> None:
    conn.sendall(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: "x"\r\n\r\n')
    conn.sendall(b"5\r\nhello\r\nzz-not-a-size\r\n")


def _endless(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    block = b"x" * 65536
    sent = 0
    while sent < ENDLESS_CAP:
        try:
            conn.sendall(block)
        except OSError:  # the client hung up
            return
        sent += len(block)


def _too_long(conn: socket.socket) -> None:
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\nETag: "big"\r\n\r\n')
    conn.sendall(b"y" * 4096)


def _silent_after(header: bytes, stop: threading.Event) -> Answer:
    def answer(conn: socket.socket) -> None:
        conn.sendall(header)
        stop.wait(STALL_CAP_S)

    return answer


class OneAnswerServer:
    """A listening socket on 127.0.0.1 that answers every connection with `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)  # the request: its content does not matter here
                self.answer(conn)
            except OSError:
                pass

    def close(self) -> None:
        self.closing.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], OneAnswerServer]]:
    servers: list[OneAnswerServer] = []

    def start(answer: Answer) -> OneAnswerServer:
        servers.append(OneAnswerServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _cache_files(home: Path) -> list[Path]:
    """Everything a download left in the cache that is data (not meta.json, not the lock)."""
    root = home / "cache" / "urls"
    if not root.is_dir():
        return []
    return [p for p in root.rglob("*") if p.is_file() and p.name not in ("meta.json", ".lock")]


def _job(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    job = folder / "job.yml"
    job.write_text(f'command: echo never\ninputs:\n  data: {{type: uri_file, path: "{url}"}}\n')
    return job


def test_a_malformed_chunked_body_fails_the_job_with_the_reason_in_its_record(
    distrun_home: Path, tmp_path: Path, serve: Callable[[Answer], OneAnswerServer]
) -> None:
    server = serve(_bad_chunks)
    done = distrun_cli(distrun_home, "run", str(_job(tmp_path, server.url("/data.bin"))), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "the server's answer is malformed (IncompleteRead" in done.stderr
    job = record(distrun_home, only_job(distrun_home))
    assert job["status"] == "Failed"
    assert "the server's answer is malformed" in job["reason"] and "launcher lost" not in job["reason"]
    assert _cache_files(distrun_home) == []


@pytest.mark.parametrize("url_tail", ["/da\\0ta.bin", "/da%00ta.bin", "/a\\x1b]52;c;eA==\\x07b"])
def test_a_url_holding_a_nul_or_a_control_character_is_refused_before_anything_is_recorded(
    distrun_home: Path, tmp_path: Path, serve: Callable[[Answer], OneAnswerServer], url_tail: str
) -> None:
    server = serve(_bad_chunks)  # never asked: the URL is refused first
    done = distrun_cli(distrun_home, "run", str(_job(tmp_path, server.url(url_tail))), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "job.yml:3:" in done.stderr and "inputs.data.path" in done.stderr
    assert "holds a NUL character" in done.stderr or "holds a control character" in done.stderr
    assert "\x1b" not in done.stderr
    assert not (distrun_home / "jobs").exists()


def test_a_body_that_never_ends_stops_at_the_limit_and_leaves_nothing(
    distrun_home: Path, serve: Callable[[Answer], OneAnswerServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_DOWNLOAD_MAX_MB", "2")
    server = serve(_endless)
    with pytest.raises(DistrunError) as raised:
        fetch_url(server.url("/endless.bin"), distrun_home, True, True)
    assert "larger than the limit of 2 MiB (DISTRUN_DOWNLOAD_MAX_MB)" in raised.value.message
    assert "nothing of it was kept" in raised.value.hint
    assert _cache_files(distrun_home) == []


def test_a_body_announced_over_the_limit_is_refused_before_it_is_read(
    distrun_home: Path, serve: Callable[[Answer], OneAnswerServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_DOWNLOAD_MAX_MB", "1")
    server = serve(_too_long)
    with pytest.raises(DistrunError) as raised:
        fetch_url(server.url("/big.bin"), distrun_home, True, True)
    assert "it is 10000000000 bytes, over the limit of 1 MiB" in raised.value.message
    assert _cache_files(distrun_home) == []


@pytest.mark.parametrize(
    "header",
    [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"],
    ids=["no-answer", "silent-mid-body"],
)
def test_a_silent_server_is_said_to_be_silent_not_blamed_on_the_disk(
    distrun_home: Path, serve: Callable[[Answer], OneAnswerServer], monkeypatch: pytest.MonkeyPatch, header: bytes
) -> None:
    monkeypatch.setenv("DISTRUN_DOWNLOAD_TIMEOUT", "0.5")
    stop = threading.Event()
    server = serve(_silent_after(header, stop))
    try:
        with pytest.raises(DistrunError) as raised:
            fetch_url(server.url("/slow.bin"), distrun_home, True, True)
    finally:
        stop.set()
    message = raised.value.message + raised.value.hint
    assert "0.5 s (DISTRUN_DOWNLOAD_TIMEOUT)" in message
    assert "space" not in message
    assert _cache_files(distrun_home) == []  # no validator was given: nothing to resume from
