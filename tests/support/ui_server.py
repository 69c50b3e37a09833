"""A real `distrun ui` server for tests, and a plain HTTP client with a time limit on every call.

Every request has a socket timeout, so a route that hangs fails its test instead of the suite.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from support.cli import cli_env

TIMEOUT = 30.0  # seconds any one request may take (a loaded machine); past it the test fails


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass
class UiServer:
    printed: str  # the line's URL, token included
    host: str
    port: int
    token: str

    @property
    def cookie(self) -> str:
        return f"distrun-ui-{self.port}={self.token}"

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        cookie: str | None = None,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = TIMEOUT,
        limit: int = 64 << 20,
    ) -> Answer:
        """One request on a new connection; at most `limit` bytes of the body are read."""
        sent = dict(headers or {})
        if cookie is not None:
            sent["Cookie"] = cookie
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read(limit))
        finally:
            conn.close()

    def get(self, path: str, **options: object) -> Answer:
        """GET as the user's browser does, with the cookie the printed URL gave it."""
        return self.request(path, cookie=self.cookie, **options)  # type: ignore[arg-type]


@contextmanager
def running_ui(home: Path) -> Iterator[UiServer]:
    # Its stderr (uvicorn's warnings) goes to a file: a pipe nobody reads could fill and stop it.
    with (home.parent / "ui-server.log").open("ab") as errors:
        server = subprocess.Popen(
            [sys.executable, "-m", "distrun", "ui", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=cli_env(home),
        )
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.startswith("distrun ui: http://127.0.0.1:"), line
        printed = line.split(": ", 1)[1].strip()
        parts = urlsplit(printed)
        token = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("token", "")
        yield UiServer(printed, parts.hostname or "127.0.0.1", parts.port or 80, token)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
