"""Decision: an allow answer as a caller acts on it, and the rate-limit
headers of one that no node sent headers for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._types import Blocked, CheckResult, DeniedBy


@dataclass
class Decision:
    """An allow answer, with what a caller acts on."""

    allowed: bool
    limit: int
    remaining: int
    reset_after_ms: int
    retry_after_ms: int
    status: int
    """200 when allowed, 429 when denied."""
    headers: Dict[str, str]
    """The rate-limit headers to pass on, under their canonical names: those
    the cluster sent, or for a degraded decision the same computed from it,
    with X-Limitnode-Degraded: true."""
    request_id: Optional[str]
    """The request_id the request was sent with: the caller's, or one of the
    Limiter's own for a request with ``max_wait`` or ``settle``; None for a
    plain request, which is sent without one."""
    attempts: int = 0
    """How many HTTP attempts the call made; 0 for a degraded decision, or one
    answered from a share."""
    retry_after_seconds: int = 0
    """The Retry-After of a denial in seconds (jittered by the cluster, at most a day), else 0."""
    reset_at: float = 0.0
    """When the limit is fully available again, in seconds since the epoch on
    the Limiter's clock: the answer's arrival plus reset_after_ms."""
    leader: Optional[str] = None
    """The ID of the leader that decided, when the node said."""
    leased: bool = False
    """True for a denial a node answered from a deny lease, repeating one the
    leader made moments before (X-Limitnode-Leased)."""
    shared: bool = False
    """True for an admission the Limiter answered from a share it holds
    (``local_shares``), without asking the cluster. Its ``remaining`` is what
    the key had left for others when the share was granted plus what the
    Limiter holds; its headers are computed from its fields."""
    wait_ms: int = 0
    held_ms: int = 0
    duplicate: bool = False
    """True when the cluster had seen the request_id: this is the first decision, charged once."""
    checks: List[CheckResult] = field(default_factory=list)
    blocked: Optional[Blocked] = None
    """Set when a blocked key denied the request: why, and for how long."""
    denied_by: Optional[DeniedBy] = None
    """Set on a denial: the check, policy, version and limit that denied it."""
    settlement_id: Optional[str] = None
    """Set on an admission with ``settle``: the reservation to settle."""
    share: Optional[Dict[str, Any]] = None
    """A share granted to the caller's own take_share, as the answer spelled it."""
    degraded: bool = False
    """True when the cluster could not decide and the failure policy answered."""
    cause: Optional[BaseException] = None
    """Why the decision is degraded."""


def ceil_seconds(ms: int) -> int:
    """ms in whole seconds, rounded up."""
    return 0 if ms <= 0 else (ms + 999) // 1000


def computed_headers(allowed: bool, limit: int, remaining: int, reset_after_ms: int, retry_after_ms: int) -> Dict[str, str]:
    """The rate-limit headers of a decision no node sent headers for (a
    batch's item, a share's admission), computed from its fields."""
    headers = {"RateLimit-Limit": str(limit), "RateLimit-Remaining": str(remaining), "RateLimit-Reset": str(ceil_seconds(reset_after_ms))}
    if not allowed:
        headers["Retry-After"] = str(max(ceil_seconds(retry_after_ms), 1))
    return headers
