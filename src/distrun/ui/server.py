"""`distrun ui`: check the extra is installed, bind, say the URL, serve until Ctrl-C."""

from __future__ import annotations

import importlib.util
import socket
import sys

from distrun.core.errors import DistrunError
from distrun.store.layout import Layout
from distrun.ui.guard import is_loopback

NEEDED = ("starlette", "jinja2", "uvicorn")
EXPOSURE = (
    "anyone who can reach {where} and learns the token in its URL sees every job's YAML, command, "
    "environment variables (secrets you put there included), logs and outputs, and can cancel jobs; "
    "the traffic is plain HTTP, so anyone on the network path can read the token"
)


def check_installed() -> None:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise DistrunError(
            f"distrun ui needs {', '.join(missing)}, which is not installed",
            'install the web UI extra: pip install "distrun[ui]"',
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise DistrunError(
            f"cannot listen on {host}:{port}: {exc.strerror}", "pick another --port (0: any free one)"
        ) from None
    sock.listen(128)
    return sock


def serve(layout: Layout, host: str, port: int, expose: bool, allow_hosts: tuple[str, ...]) -> None:
    check_installed()
    if not is_loopback(host) and not expose:
        raise DistrunError(
            f"--host {host} is not a loopback address: " + EXPOSURE.format(where=f"{host}:{port or '<port>'}"),
            "add --expose to accept that, or leave --host out (127.0.0.1)",
        )
    import uvicorn

    from distrun.ui.app import UiSettings, create_app

    sock = bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    allowed = tuple(allow_hosts) + ((host,) if expose else ())
    settings = UiSettings(layout=layout, allowed_hosts=allowed)
    app = create_app(settings)
    # The token is the login (see distrun.ui.access): only whoever reads this line can use the page.
    print(f"distrun ui: http://{shown}:{bound}/?token={settings.token}", flush=True)
    if not is_loopback(host):
        print("distrun ui: warning: " + EXPOSURE.format(where=f"{host}:{bound}"), file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
