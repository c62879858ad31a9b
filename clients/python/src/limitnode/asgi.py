"""RateLimitMiddleware for ASGI applications (Starlette, FastAPI, Django's ASGI)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable, List, MutableMapping, Optional, Tuple, Union

from ._client import Limiter
from ._types import AllowRequest
from .wsgi import MISCONFIGURED, denial_body, header_list

_log = logging.getLogger("limitnode")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RequestFunc = Callable[[Scope], Union[Optional[AllowRequest], Awaitable[Optional[AllowRequest]]]]


def _encoded(headers: List[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class RateLimitMiddleware:
    """Wraps an ASGI app: each HTTP request is decided by the cluster first;
    other scopes (websocket, lifespan) pass through.

    ``request(scope)`` (a function or a coroutine function) builds the
    request's check, or returns None to let it through unlimited. Answers
    are those of the WSGI middleware: the cluster's rate-limit headers on an
    admitted response, a 429 with its headers and the decision's top-level
    fields for a denial. The Limiter's call runs in a worker thread
    (asyncio.to_thread), so the event loop never waits on the network.
    """

    def __init__(self, app: ASGIApp, limiter: Limiter, request: RequestFunc) -> None:
        self.app = app
        self.limiter = limiter
        self.request = request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            req = self.request(scope)
            if inspect.isawaitable(req):
                req = await req
            if req is None:
                await self.app(scope, receive, send)
                return
            d = await asyncio.to_thread(self.limiter.allow, req)
        except Exception:
            _log.exception("limitnode: the rate limit of %s %s could not be asked", scope.get("method"), scope.get("path"))
            await self._answer(send, 500, [("Content-Type", "application/json")], MISCONFIGURED)
            return
        if not d.allowed:
            await self._answer(send, 429, [("Content-Type", "application/json"), *header_list(d, True)], denial_body(d))
            return
        extra = _encoded(header_list(d, False))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    @staticmethod
    async def _answer(send: Send, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        await send({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
        await send({"type": "http.response.body", "body": body})


__all__ = ["RateLimitMiddleware"]
