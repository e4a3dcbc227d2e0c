"""The web view's Starlette application: a page, its script, and a read-only JSON API.

Routes take a run's name, never a path: a name the project does not have is a 404, and
the files shown for a run are read through ``files.confined``. Every response says to
the browser: load nothing from elsewhere (no CDN, no inline script), do not frame me,
send no referrer. A token, when set, is checked on every request, in constant time.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from reconciler.web.poller import Poller
from reconciler.web.snapshot import details

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE = "recon_token"
# The page's own files, by name: nothing else under /static is served.
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# How often an event stream looks at the poller's version, and sends a keep-alive.
_STREAM_TICK = 0.25
_KEEPALIVE = 15.0


def is_loopback(address: str) -> bool:
    """Whether only this machine reaches a server listening on `address`: the loopback
    range 127.0.0.0/8, ::1, or localhost. A name other than localhost may resolve to
    anything: not loopback."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def accepted_hosts(address: str) -> list[str]:
    """The Host headers a server listening on `address` answers. On loopback: the address
    itself (as the URL `recon serve` prints sends it) and this machine's own names, so a
    page elsewhere that rebinds its name to a loopback address, and sends that name, is
    refused; elsewhere any, the token being needed then."""
    if not is_loopback(address):
        return ["*"]
    bare = address.strip("[]")
    own = f"[{bare}]" if ":" in bare else bare
    return list(dict.fromkeys([own, "127.0.0.1", "localhost", "[::1]"]))


def _static(name: str) -> bytes:
    return resources.files("reconciler.web").joinpath("static", name).read_bytes()


def create_app(poller: Poller, *, token: str | None = None, hosts: list[str]) -> Starlette:
    """The application over a poller (started and stopped with the app). `hosts`: the
    Host headers accepted (a page on another site that rebinds its name to 127.0.0.1
    sends its own); `token`: when set, required on every request."""

    async def page(request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": "not found"}, status_code=404)
        return Response(_static(name), media_type=STATIC[name])

    async def state(request: Request) -> Response:
        seen = poller.seen()
        body: dict[str, Any] = {"version": seen.version, "error": seen.error}
        if seen.snapshot is not None:
            body |= seen.snapshot.summary()
        return JSONResponse(body)

    async def graph(request: Request) -> Response:
        seen = poller.seen()
        if seen.snapshot is None:
            return JSONResponse({"error": seen.error or "not looked yet"}, status_code=503)
        return Response(seen.snapshot.graph_svg, media_type="image/svg+xml")

    async def run(request: Request) -> Response:
        seen = poller.seen()
        if seen.snapshot is None:
            return JSONResponse({"error": seen.error or "not looked yet"}, status_code=503)
        name = request.path_params["name"]
        # A run's, or a sweep's (its members). Files are read (log tails, outputs'
        # versions): off the event loop.
        shown = await asyncio.to_thread(details, seen.snapshot, name)
        if shown is None:
            return JSONResponse({"error": f"no run or sweep named {name!r}"}, status_code=404)
        return JSONResponse(shown)

    async def events(request: Request) -> Response:
        return StreamingResponse(_stream(request, poller), media_type="text/event-stream")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        poller.start()
        try:
            yield
        finally:
            await asyncio.to_thread(poller.stop)

    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/state", state),
        Route("/api/graph.svg", graph),
        Route("/api/runs/{name}", run),
        Route("/api/events", events),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.add_middleware(_Guard, token=token)  # outermost: before anything else runs
    return app


async def _stream(request: Request, poller: Poller) -> AsyncIterator[bytes]:
    """Server-sent events: the version whenever it moves, a comment now and then to keep
    proxies from closing the stream. Reads the poller's state; never looks itself."""
    sent = -1
    quiet = 0.0
    while not poller.stopped:
        version = poller.seen().version
        if version != sent:
            sent = version
            quiet = 0.0
            yield f"event: state\ndata: {json.dumps({'version': version})}\n\n".encode()
        elif quiet >= _KEEPALIVE:
            quiet = 0.0
            yield b": keep-alive\n\n"
        if await request.is_disconnected():
            return
        await asyncio.sleep(_STREAM_TICK)
        quiet += _STREAM_TICK


class _Guard:
    """Security headers on every response; and with a token, a 401 for a request that
    does not carry it (header `Authorization: Bearer …`, the cookie, or `?token=…`,
    which then sets the cookie so the page's own requests carry it)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given, from_query = self._given(scope)
        if self.token is not None and not hmac.compare_digest(given or b"", self.token):
            response = JSONResponse({"error": "a valid token is needed"}, status_code=401)
            response.headers.update(_HEADERS)
            await response(scope, receive, send)
            return
        set_cookie = self.token is not None and from_query
        if set_cookie and scope["path"] == "/":
            # The page opened with ?token=: the cookie from now on, and the address bar
            # (and history) without the token.
            redirect = Response(status_code=303, headers={"Location": "/"})
            await redirect(scope, receive, self._with_headers(send, set_cookie=True))
            return
        await self.app(scope, receive, self._with_headers(send, set_cookie))

    def _with_headers(self, send: Send, set_cookie: bool) -> Send:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
                if set_cookie and self.token is not None:
                    cookie = (
                        f"{TOKEN_COOKIE}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/"
                    )
                    headers.append((b"set-cookie", cookie.encode()))
                message["headers"] = headers
            await send(message)

        return with_headers

    @staticmethod
    def _given(scope: Scope) -> tuple[bytes | None, bool]:
        """The token the request carries, and whether it came in the query string (first:
        a page opened with a new token replaces an old cookie)."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0].encode(), True
        headers = dict(scope.get("headers", []))
        authorization = headers.get(b"authorization", b"")
        if authorization.lower().startswith(b"bearer "):
            return authorization[7:].strip(), False
        for part in headers.get(b"cookie", b"").split(b";"):
            key, _, value = part.strip().partition(b"=")
            if key == TOKEN_COOKIE.encode():
                return value, False
        return None, False
