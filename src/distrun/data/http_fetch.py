"""http(s) inputs: downloaded once into `$DISTRUN_HOME/cache/urls/<hash of URL>/`, then reused.

    meta.json         url, ETag, Last-Modified, size, sha256 of the file
    files/<name>      the download, complete (renamed into place when it is); a uri_folder input is files/
    <name>.part       an interrupted download, resumed with a Range request (If-Range: its validator)

A cached file is revalidated with If-None-Match / If-Modified-Since: 304 keeps it, 200 replaces
it. A server that cannot be reached while the cache holds a copy keeps the copy (said once).
A lock per URL makes concurrent jobs download it once.

Whatever the server does, a download ends with the file complete or with a DistrunError that
says why (malformed answer, silence for DISTRUN_DOWNLOAD_TIMEOUT seconds, larger than
DISTRUN_DOWNLOAD_MAX_MB). A `.part` stays only where it can be resumed: the server gave a
validator and the connection broke or fell silent; a body that is malformed or over the limit
is removed at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import json
import math
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
MIB = 1 << 20
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_MB = 100 * 1024  # 100 GiB: a data set, not a disk's worth of a server's endless body


def download_timeout() -> float:
    """Seconds a server may stay silent (connecting, or mid-body): DISTRUN_DOWNLOAD_TIMEOUT."""
    return _positive_setting("DISTRUN_DOWNLOAD_TIMEOUT", DEFAULT_TIMEOUT_S)


def download_limit() -> int:
    """The largest download in bytes: DISTRUN_DOWNLOAD_MAX_MB (MiB)."""
    return int(_positive_setting("DISTRUN_DOWNLOAD_MAX_MB", DEFAULT_MAX_MB) * MIB)


def _positive_setting(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise DistrunError(f"{name}={text!r} is not a positive number", f"unset it (default {default:g}) or give one")
    return value


class _Broken(Exception):
    """A download that ended before its body did: why, and whether its .part can be resumed."""

    def __init__(self, why: str, resumable: bool) -> None:
        super().__init__(why)
        self.why = why
        self.resumable = resumable


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
    timeout = download_timeout()
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 304 and have:
            return
        if have:
            _say(out, f"distrun: {url} answered HTTP {exc.code}; using the copy downloaded before")
            return
        raise DistrunError(f"downloading {url} failed: HTTP {exc.code} {exc.reason}", "check the URL") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = _reason(exc, timeout)
        if have:
            _say(out, f"distrun: {url} cannot be reached ({reason}); using the copy downloaded before")
            return
        raise DistrunError(f"downloading {url} failed: {reason}", "check the URL and the network") from None
    with response:
        _save(response, url, folder, target, part, out, timeout)


def _reason(exc: BaseException, timeout: float) -> str:
    """Why a request got no answer, in words (a timeout said as one, not as a socket error)."""
    cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s (DISTRUN_DOWNLOAD_TIMEOUT)"
    if isinstance(cause, http.client.HTTPException):
        return f"the server's answer is malformed ({type(cause).__name__}: {cause})"
    return str(cause)


def _save(response: Any, url: str, folder: Path, target: Path, part: Path, out: TextIO, timeout: float) -> None:
    resumed = response.status == 206
    headers = response.headers
    meta = {"url": url, "etag": headers.get("ETag"), "last_modified": headers.get("Last-Modified")}
    if not resumed:
        part.unlink(missing_ok=True)
    done = part.stat().st_size if resumed and part.exists() else 0
    length = headers.get("Content-Length")
    total = done + int(length) if length and length.isdigit() else None
    limit = download_limit()
    if total is not None and total > limit:
        part.unlink(missing_ok=True)
        raise DistrunError(
            f"downloading {url} refused: it is {total} bytes, "
            f"over the limit of {_mib(limit)} (DISTRUN_DOWNLOAD_MAX_MB)",
            "raise DISTRUN_DOWNLOAD_MAX_MB if the file is meant to be that large",
        )
    # The validators are written before the body, so an interrupted download can resume.
    _write_meta(folder, {**_read_meta(folder), **meta, "complete": False} if resumed else {**meta, "complete": False})
    resumable = bool(meta["etag"] or meta["last_modified"])
    progress = _Progress(out, url, total)
    try:
        done = _receive(response, part, resumed, done, total, limit, timeout, resumable, progress)
    except _Broken as broken:
        progress.stop()
        if not broken.resumable:
            part.unlink(missing_ok=True)
        hint = (
            f"run the job again to resume it (the {_size(part)} bytes downloaded are kept)"
            if broken.resumable
            else "nothing of it was kept; check the URL, or raise the limit named above"
        )
        raise DistrunError(f"downloading {url} failed: {broken.why}", hint) from None
    except KeyboardInterrupt:  # Ctrl-C or a cancel: the next job resumes where this one stopped
        progress.stop()
        if not resumable:
            part.unlink(missing_ok=True)
        raise
    except BaseException:  # a full disk, a write error: nothing of it is kept
        progress.stop()
        part.unlink(missing_ok=True)
        raise
    progress.finish(done, resumed)
    digest = hashlib.sha256()
    with part.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    os.replace(part, target)
    os.chmod(target, 0o444)  # ro_mount inputs read the cache in place: not for writing
    _write_meta(
        folder, {**meta, "size": done, "sha256": digest.hexdigest(), "complete": True, "fetched_at": time.time()}
    )


def _receive(
    response: Any,
    part: Path,
    resumed: bool,
    done: int,
    total: int | None,
    limit: int,
    timeout: float,
    resumable: bool,
    progress: _Progress,
) -> int:
    """Write the body into `part`; returns its size. Raises _Broken when the body does not end well."""
    with part.open("ab" if resumed else "wb") as handle:
        while True:
            chunk = _read(response, timeout, resumable)
            if not chunk:
                break
            if done + len(chunk) > limit:
                raise _Broken(f"it is larger than the limit of {_mib(limit)} (DISTRUN_DOWNLOAD_MAX_MB)", False)
            handle.write(chunk)
            done += len(chunk)
            progress.show(done)
    if total is not None and done != total:
        raise _Broken(f"it stopped at {done} of {total} bytes", resumable)
    return done


def _read(response: Any, timeout: float, resumable: bool) -> bytes:
    """The next piece of the body; a read error says what happened (a write error stays an OSError)."""
    try:
        chunk: bytes = response.read(CHUNK)
        return chunk
    except TimeoutError:
        raise _Broken(f"the server sent nothing for {timeout:g} s (DISTRUN_DOWNLOAD_TIMEOUT)", resumable) from None
    except http.client.HTTPException as exc:
        raise _Broken(f"the server's answer is malformed ({type(exc).__name__}: {exc})", False) from None
    except OSError as exc:
        raise _Broken(f"the connection broke ({exc.strerror or exc})", resumable) from None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mib(size: int) -> str:
    return f"{size / MIB:g} MiB"


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

    def stop(self) -> None:
        if self.live:
            self.out.write("\r\033[K")
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
