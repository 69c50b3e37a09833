"""Who may talk to `distrun ui`: the Host header check (no DNS rebinding) and the tokens.

A web page on another site can make a browser send requests to 127.0.0.1, and by DNS
rebinding even read the answers, but only under its own host name: so a request is served
only when its Host is an IP address, `localhost`, or a name the user allowed. Every request
needs the server's access token (distrun.ui.access); changing anything (cancel) also needs a
form token derived from it that only this server's own pages carry. The page holds only that
derived token, which cannot be turned back into the access token.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable


def new_token() -> str:
    return secrets.token_urlsafe(24)


def form_token(access_token: str) -> str:
    return hmac.new(access_token.encode(), b"distrun ui cancel form", "sha256").hexdigest()


def token_matches(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def host_name(header: str) -> str:
    """The name part of a Host header: 'a.b:80' -> 'a.b', '[::1]:80' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, allowed_names: Iterable[str]) -> bool:
    if not header:
        return False
    name = host_name(header)
    if name == "localhost" or name in {n.lower() for n in allowed_names}:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
