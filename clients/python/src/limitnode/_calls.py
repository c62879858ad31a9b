"""The kinds of call, by how a call goes from node to node (the retry rule
of the Limiter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class CallKind:
    """How a call goes from node to node."""

    retry_unknown: bool
    """The call may be sent again after an unknown outcome or a 503."""
    bounded: bool
    """Each attempt gets the attempt timeout when another node could answer: decisions and reads."""
    held: float = 0.0
    """How long a node may hold the answer on purpose (hold), added to each attempt and to the call."""
    request_id: Optional[str] = None


READ_CALL = CallKind(retry_unknown=True, bounded=True)
"""A read: answered without waiting, the same however often it comes."""
IDEMPOTENT_CALL = CallKind(retry_unknown=True, bounded=False)
"""A settlement, a lease's renewal or release, a put: answered once however
often it comes, and it may wait on the cluster on purpose (a change that
gives capacity back waits out the deny leases)."""
ONCE_CALL = CallKind(retry_unknown=False, bounded=False)
"""A lease's acquire or a deletion: not sent again after an unknown outcome."""
