"""limitnode: a client of limitnode's HTTP API, standard library only.

Decisions (``Limiter.allow``, ``allow_batch``, ``wait``), hot keys answered
in process from local shares of their budget (``local_shares=True``,
``close``), reservations to settle (``reserve``, ``settle``), concurrency
leases (``acquire_lease``, ``renew_lease``, ``release_lease``, and ``lease``
for a ``with`` block), keys, blocks and policies (``get_key``,
``put_block``, ``put_policy``, ...), a failure policy with a timeout,
retries that are charged once (a request with a request_id; reservations
get one of their own), and middleware for WSGI (``limitnode.wsgi``) and
ASGI (``limitnode.asgi``)."""

from ._answers import MAX_RETRY_AFTER
from ._client import RATE_LIMIT_HEADERS, Decision, FailurePolicy, HeldLease, Lease, Limiter, Reservation, RetryEvent
from ._errors import LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError
from ._transport import MAX_ANSWER_BYTES
from ._types import (
    AllowRequest,
    Block,
    BlockPage,
    Blocked,
    Check,
    CheckResult,
    DeniedBy,
    KeyLimit,
    KeyPage,
    KeyState,
    LeaseRequest,
    Limit,
    LocalShares,
    Penalty,
    Policy,
    PolicyPage,
    PolicyRequest,
    SettleOptions,
    Settlement,
)

__version__ = "0.1.0"

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_RETRY_AFTER",
    "RATE_LIMIT_HEADERS",
    "AllowRequest",
    "Block",
    "BlockPage",
    "Blocked",
    "Check",
    "CheckResult",
    "Decision",
    "DeniedBy",
    "FailurePolicy",
    "HeldLease",
    "KeyLimit",
    "KeyPage",
    "KeyState",
    "Lease",
    "LeaseLostError",
    "LeaseRefusedError",
    "LeaseRequest",
    "Limit",
    "Limiter",
    "LimitnodeError",
    "LocalShares",
    "Penalty",
    "Policy",
    "PolicyPage",
    "PolicyRequest",
    "Reservation",
    "RetryEvent",
    "SettleOptions",
    "Settlement",
    "UnavailableError",
]
