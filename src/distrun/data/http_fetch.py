"""http(s) inputs: downloaded once into `$DISTRUN_HOME/cache/urls/<hash of URL>/`, then reused.

    meta.json         url, ETag, Last-Modified, size, sha256 of the file
    files/<name>      the download, complete (renamed into place when it is); a uri_folder input is files/
    <name>.part       an interrupted download, resumed with a Range request (If-Range: its validator)

A cached file is revalidated with If-None-Match / If-Modified-Since: 304 keeps it, 200 replaces
it. A server that cannot be reached while the cache holds a copy keeps the copy (said once).
A lock per URL makes concurrent jobs download it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from distrun.core.console import say as _say
from distrun.core.errors import DistrunError
from distrun.core.file_modes import make_home

CHUNK = 1 << 20
TIMEOUT = float(os.environ.get("DISTRUN_DOWNLOAD_TIMEOUT", "60"))


def url_cache_dir(home: Path, url: str) -> Path:
    return home / "cache" / "urls" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:32]


def file_name(url: str) -> str:
    name = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
    return name if name and name not in (".", "..") else "download"


def fetch_url(url: str, home: Path, want_file: bool, materialize: bool, out: TextIO | None = None) -> Path:
    """The cached copy of `url` (a file; its folder for a uri_folder input)."""
    folder = url_cache_dir(home, url)
    target = folder / "files" / file_name(url)
    if materialize:
        make_home(home)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o664)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _refresh(url, folder, target, out if out is not None else sys.stderr)
        finally:
            os.close(fd)
    return target if want_file else target.parent


def _refresh(url: str, folder: Path, target: Path, out: TextIO) -> None:
    meta = _read_meta(folder)
    have = target.is_file() and meta.get("url") == url
    request = urllib.request.Request(url, headers={"User-Agent": "distrun"})
    part = folder / (target.name + ".part")  # beside files/, so a uri_folder input never shows it
    if have:
        if meta.get("etag"):
            request.add_header("If-None-Match", meta["etag"])
        if meta.get("last_modified"):
            request.add_header("If-Modified-Since", meta["last_modified"])
    elif part.is_file() and part.stat().st_size > 0 and (meta.get("etag") or meta.get("last_modified")):
        request.add_header("Range", f"bytes={part.stat().st_size}-")
        request.add_header("If-Range", meta.get("etag") or meta["last_modified"])
    else:
        part.unlink(missing_ok=True)
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        if exc.code == 304 and have:
            return
        if have:
            _say(out, f"distrun: {url} answered HTTP {exc.code}; using the copy downloaded before")
            return
        raise DistrunError(f"downloading {url} failed: HTTP {exc.code} {exc.reason}", "check the URL") from None
    except (urllib.error.URLError, OSError) as exc:
        if have:
            _say(out, f"distrun: {url} cannot be reached ({exc}); using the copy downloaded before")
            return
        reason = getattr(exc, "reason", exc)
        raise DistrunError(f"downloading {url} failed: {reason}", "check the URL and the network") from None
    with response:
        _save(response, url, folder, target, part, out)


def _save(response: Any, url: str, folder: Path, target: Path, part: Path, out: TextIO) -> None:
    resumed = response.status == 206
    headers = response.headers
    meta = {"url": url, "etag": headers.get("ETag"), "last_modified": headers.get("Last-Modified")}
    if not resumed:
        part.unlink(missing_ok=True)
    # The validators are written before the body, so an interrupted download can resume.
    _write_meta(folder, {**_read_meta(folder), **meta, "complete": False} if resumed else {**meta, "complete": False})
    done = part.stat().st_size if resumed and part.exists() else 0
    length = headers.get("Content-Length")
    total = done + int(length) if length and length.isdigit() else None
    progress = _Progress(out, url, total)
    with part.open("ab" if resumed else "wb") as handle:
        while True:
            chunk = response.read(CHUNK)
            if not chunk:
                break
            handle.write(chunk)
            done += len(chunk)
            progress.show(done)
    progress.finish(done, resumed)
    if total is not None and done != total:
        raise DistrunError(f"downloading {url} stopped at {done} of {total} bytes", "run the job again to resume it")
    digest = hashlib.sha256()
    with part.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    os.replace(part, target)
    os.chmod(target, 0o444)  # ro_mount inputs read the cache in place: not for writing
    _write_meta(
        folder, {**meta, "size": done, "sha256": digest.hexdigest(), "complete": True, "fetched_at": time.time()}
    )


class _Progress:
    def __init__(self, out: TextIO, url: str, total: int | None) -> None:
        self.out = out
        self.url = url
        self.total = total
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.last = 0.0
        _say(out, f"distrun: downloading {url}" + (f" ({total / 1e6:.1f} MB)" if total else ""))

    def show(self, done: int) -> None:
        now = time.monotonic()
        if not self.live or now - self.last < 0.2:
            return
        self.last = now
        share = f" {100 * done / self.total:5.1f}%" if self.total else ""
        self.out.write(f"\r\033[Kdistrun: {self.url}: {done / 1e6:.1f} MB{share}")
        self.out.flush()

    def finish(self, done: int, resumed: bool) -> None:
        if self.live:
            self.out.write("\r\033[K")
        _say(self.out, f"distrun: downloaded {done / 1e6:.1f} MB{' (resumed)' if resumed else ''}: {self.url}")


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    tmp = folder / f"meta.json.{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    os.replace(tmp, folder / "meta.json")
