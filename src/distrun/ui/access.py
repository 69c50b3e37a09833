"""Who may use `distrun ui`: only whoever holds the token it printed, and never inside a frame.

On a shared machine every local user can reach a port on 127.0.0.1, and the pages show every
job's environment (secrets included) and can cancel jobs. So, as Jupyter does, the server makes
a random token and prints it in its URL; a request carrying it (`?token=...`) gets it back as an
HttpOnly, SameSite=Strict cookie and is sent on to the same address without it (out of the
address bar and the history). Every request, pages, fragments, logs, downloads, cancel and
static files alike, must then carry that cookie (or `Authorization: Bearer <token>`), compared
in constant time; any other gets 401 (403 for a wrong token) and a line saying to open the URL
`distrun ui` printed. Every answer forbids framing (X-Frame-Options: DENY, CSP frame-ancestors
'none'), so another site cannot put the page under a visitor's clicks.
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from distrun.ui.guard import token_matches

COOKIE_PREFIX = "distrun-ui-"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
HOW_TO = "open the URL that `distrun ui` printed when it started (it ends in ?token=...)"


def cookie_name(scope: Scope) -> str:
    """One cookie per port: a browser sends a host's cookies to all its ports, so two servers must not share one."""
    server = scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] is not None else 0
    return f"{COOKIE_PREFIX}{port}"


class TokenCheck:
    """The ASGI layer in front of every route: no token, no answer."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if given:
            await self._exchange(scope, given[-1], [(k, v) for k, v in query if k != "token"])(scope, receive, send)
            return
        held = self._held(scope)
        if held is None:
            refused: Response = PlainTextResponse(f"distrun ui: this page needs its token: {HOW_TO}\n", 401)
        elif not token_matches(held, self.token):
            refused = PlainTextResponse(f"distrun ui: this token is not this server's: {HOW_TO}\n", 403)
        else:
            await self.app(scope, receive, send)
            return
        await refused(scope, receive, send)

    def _exchange(self, scope: Scope, given: str, rest: list[tuple[str, str]]) -> Response:
        """?token=...: the cookie, and the same address again without the token in it."""
        if not token_matches(given, self.token):
            return PlainTextResponse(f"distrun ui: this token is not this server's: {HOW_TO}\n", 403)
        target = scope.get("root_path", "") + scope["path"] + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(cookie_name(scope), self.token, httponly=True, samesite="strict", path="/")
        return response

    def _held(self, scope: Scope) -> str | None:
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        if authorization.lower().startswith("bearer "):
            return authorization[7:].strip()
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:  # http.cookies raises CookieError, and worse, on malformed headers
            return None
        morsel = cookie.get(cookie_name(scope))
        return morsel.value if morsel is not None else None


class SecurityHeaders:
    """The outermost layer: every answer, refusals included, forbids framing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, sending if scope["type"] == "http" else send)
