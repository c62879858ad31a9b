"""The two kinds of failure a caller tells apart: the API refused the
request (the caller's mistake, never hidden by a failure policy), or the
cluster could not decide it (which a failure policy answers)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._client import Lease


class LimitnodeError(Exception):
    """An error answer of the API: ``status`` and the body's ``code`` and
    ``field`` (the JSON path of the field at fault, when one is). A 4xx
    other than 429 is one of these: the request as it stands is refused."""

    def __init__(self, message: str, status: Optional[int], code: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field

    @staticmethod
    def from_body(status: int, body: bytes) -> LimitnodeError:
        """The error a node answered with status and body: a LimitnodeError
        for a 4xx, the request's refusal; an UnavailableError for anything
        else (a 5xx, or a status the API does not answer, such as a proxy's
        redirect), which means the cluster could not decide."""
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            parsed = {"error": body[:200].decode("utf-8", "replace")}

        def text(name: str) -> Optional[str]:
            value = parsed.get(name)
            return value if isinstance(value, str) else None

        code = text("code") or "unknown"
        field = text("field")
        where = f" ({field})" if field else ""
        message = f"limitnode: {status} {code}{where}: {text('error') or ''}"
        if 400 <= status < 500:
            return LimitnodeError(message, status, code, field)
        return UnavailableError(message, status=status, code=code, field=field, outcome_unknown=status == 503 or status < 400)


class UnavailableError(LimitnodeError):
    """The cluster could not decide: no node reachable, a 503 (no leader in
    time, an outcome left unknown, the key cap), a 500, or the call's
    timeout. When ``outcome_unknown`` is true the request may have been
    applied: a retry with the same request_id is answered once."""

    def __init__(
        self,
        message: str,
        *,
        outcome_unknown: bool,
        status: Optional[int] = None,
        code: str = "unavailable",
        field: Optional[str] = None,
    ) -> None:
        super().__init__(message, status, code, field)
        self.outcome_unknown = outcome_unknown


class LeaseRefusedError(Exception):
    """``Limiter.lease``'s error when no slot was granted: every slot was held
    (and, with max_wait, the queue was full or the wait ran out). ``lease``
    is the refusal as the node answered it."""

    def __init__(self, lease: Lease) -> None:
        waited = f" after waiting {lease.waited_ms} ms" if lease.waited_ms else ""
        super().__init__(
            f"limitnode: lease on {lease.key!r} refused{waited}: {lease.active} of {lease.max} held, "
            f"{lease.waiting} waiting; retry after {lease.retry_after_ms} ms"
        )
        self.lease = lease


class LeaseLostError(Exception):
    """The lease stopped being held while the work ran: a renewal or the
    final release found it gone (expired, or given back elsewhere)."""
