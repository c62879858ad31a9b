"""limitnode: a client of limitnode's HTTP API, standard library only.

Decisions (``Limiter.allow``, ``allow_batch``), concurrency leases
(``acquire_lease``, ``renew_lease``, ``release_lease``, and ``lease`` for a
``with`` block), a failure policy with a timeout, retries that are charged
once (every allow carries a request_id), and middleware for WSGI
(``limitnode.wsgi``) and ASGI (``limitnode.asgi``)."""

from ._client import RATE_LIMIT_HEADERS, Decision, FailurePolicy, HeldLease, Lease, Limiter, RetryEvent
from ._errors import LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError
from ._types import AllowRequest, Blocked, Check, CheckResult, DeniedBy, LeaseRequest, Limit, LocalShares, SettleOptions

__version__ = "0.1.0"

__all__ = [
    "RATE_LIMIT_HEADERS",
    "AllowRequest",
    "Blocked",
    "Check",
    "CheckResult",
    "Decision",
    "DeniedBy",
    "FailurePolicy",
    "HeldLease",
    "Lease",
    "LeaseLostError",
    "LeaseRefusedError",
    "LeaseRequest",
    "Limit",
    "Limiter",
    "LimitnodeError",
    "LocalShares",
    "RetryEvent",
    "SettleOptions",
    "UnavailableError",
]
