"""What a `distrun run` and the resident process send each other over the resident's socket.

Messages are `marshal`led Python values (built in, so the command's side imports nothing to
send them) behind a 4-byte length. The socket is the user's own (0600 in DISTRUN_HOME, and the
resident checks the peer's user id), so a message is trusted as far as its sender is.
"""

from __future__ import annotations

import marshal
import os
import sys

SOCKET_NAME = "resident.sock"
LOG_NAME = "resident.log"
# sockaddr_un holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
_LENGTH = 4
MAX_MESSAGE = 64 << 20  # an environment is kilobytes; anything near this is not ours


def home_folder(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """DISTRUN_HOME as `distrun.store.layout.distrun_home` resolves it, without pathlib."""
    home = environ.get("DISTRUN_HOME") or os.path.join(os.path.expanduser("~"), ".distrun")
    return os.path.abspath(os.path.expanduser(home))


def package_folder() -> bytes:
    """The distrun package this process imported: a resident serves only callers of the same one."""
    return os.fsencode(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


WORKING_FOLDER = b"\0working folder"  # stands for a search path entry that is the process's working folder


def search_path() -> list[bytes]:
    """Where this process finds modules (sys.path)."""
    return [os.fsencode(entry) for entry in sys.path]


def comparable_path(path: list[bytes], cwd: bytes) -> list[bytes]:
    """`path` as two processes' search paths are compared: without its first entry (the script's
    folder, or the working folder for `python -m`), and with entries that are the working folder
    (an empty PYTHONPATH entry, made absolute at start) marked as such, wherever that folder is."""
    return [WORKING_FOLDER if entry == cwd else entry for entry in path[1:]]


def socket_path(home: str) -> str:
    return os.path.join(home, SOCKET_NAME)


def encode(value: object) -> bytes:
    body = marshal.dumps(value)
    return len(body).to_bytes(_LENGTH, "big") + body


def decode_length(head: bytes) -> int:
    length = int.from_bytes(head, "big")
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes is not distrun's")
    return length


def decode(body: bytes) -> object:
    return marshal.loads(body)


class Reader:
    """Messages one by one from `receive(n)` (a socket's recv), keeping bytes read past one."""

    def __init__(self, receive, already: bytes = b"") -> None:  # type: ignore[no-untyped-def]
        self._receive = receive
        self._data = bytearray(already)

    def next(self) -> object | None:
        """The next message; None at the end of the stream before a whole one."""
        if not self._fill(_LENGTH):
            return None
        length = decode_length(bytes(self._data[:_LENGTH]))
        if not self._fill(_LENGTH + length):
            return None
        body = bytes(self._data[_LENGTH : _LENGTH + length])
        del self._data[: _LENGTH + length]
        return decode(body)

    def _fill(self, size: int) -> bool:
        while len(self._data) < size:
            chunk = self._receive(max(4096, size - len(self._data)))
            if not chunk:
                return False
            self._data += chunk
        return True
