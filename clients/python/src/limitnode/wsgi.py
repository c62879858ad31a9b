"""RateLimitMiddleware for WSGI applications (Flask, Django, any WSGI server)."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ._client import Decision, Limiter
from ._types import AllowRequest

_log = logging.getLogger("limitnode")

StartResponse = Callable[..., Any]
WSGIApp = Callable[[Dict[str, Any], StartResponse], Iterable[bytes]]


def denial_body(d: Decision) -> bytes:
    """The JSON a denied request is answered with: the decision's top-level
    fields, as the cluster's /v1/allow answered them (``denied_by`` and
    ``blocked`` included), without its checks or a block's key, which may
    name your users."""
    fields: Dict[str, Any] = {k: getattr(d, k) for k in ("allowed", "limit", "remaining", "reset_after_ms", "retry_after_ms")}
    if d.duplicate:
        fields["duplicate"] = True
    if d.blocked is not None:
        fields["blocked"] = {k: v for k, v in d.blocked.items() if k != "key"}
    if d.denied_by is not None:
        fields["denied_by"] = d.denied_by
    return (json.dumps(fields) + "\n").encode()


def header_list(d: Decision, with_retry: bool) -> List[Tuple[str, str]]:
    """The decision's rate-limit headers, Retry-After only when with_retry."""
    return [(k, v) for k, v in d.headers.items() if with_retry or k != "Retry-After"]


MISCONFIGURED = (json.dumps({"error": "the rate limit of this route is misconfigured", "code": "internal"}) + "\n").encode()


class RateLimitMiddleware:
    """Wraps a WSGI app: each request is decided by the cluster first.

    ``request(environ)`` builds the request's check (its key and limit or
    policy, or several checks), or returns None to let it through unlimited.
    An admitted request gets the cluster's rate-limit headers on its
    response; a denied one is answered 429 with the headers the cluster sent
    (RateLimit-*, RateLimit, Retry-After; no internal header, such as
    Limitnode-Denied-By) and the decision's top-level fields as JSON,
    ``denied_by`` included, never a key. A decision of the failure policy carries X-Limitnode-Degraded:
    true. A request the cluster refuses as invalid is logged and answered
    500: fix ``request``.
    """

    def __init__(self, app: WSGIApp, limiter: Limiter, request: Callable[[Dict[str, Any]], Optional[AllowRequest]]) -> None:
        self.app = app
        self.limiter = limiter
        self.request = request

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            req = self.request(environ)
            if req is None:
                return self.app(environ, start_response)
            d = self.limiter.allow(req)
        except Exception:
            _log.exception("limitnode: the rate limit of %s %s could not be asked", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
            start_response("500 Internal Server Error", [("Content-Type", "application/json")])
            return [MISCONFIGURED]
        if not d.allowed:
            start_response("429 Too Many Requests", [("Content-Type", "application/json"), *header_list(d, True)])
            return [denial_body(d)]

        def start_with_headers(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, *header_list(d, False)], exc_info)

        return self.app(environ, start_with_headers)
