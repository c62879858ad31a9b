"""The API's wire types as typed dicts, one per schema of api/openapi.yaml
that a caller writes or reads; a test holds their keys to the document the
cluster serves (GET /v1/openapi.json), so they cannot drift from it."""

from __future__ import annotations

from typing import Dict, List, TypedDict


class _LimitRequired(TypedDict):
    rate: int


class LocalShares(TypedDict, total=False):
    """Lets every node admit a key from shares of its budget: each share
    lasts ``ttl`` (a Go duration, default "500ms") and holds at most
    ``max_units``. ``{}`` means the defaults."""

    ttl: str
    max_units: int


class Limit(_LimitRequired, total=False):
    """At most ``rate`` units of cost per ``period`` (a Go duration, default
    "1s"); for the bucket algorithms at most ``burst`` at once. An inline
    limit may carry ``local_shares``."""

    algorithm: str
    period: str
    burst: int
    local_shares: LocalShares


class Check(TypedDict, total=False):
    """One check of a multi-check request: a ``key`` with a ``limit``, or a
    ``policy`` with a ``key`` or ``dimensions``."""

    key: str
    limit: Limit
    cost: int
    policy: str
    dimensions: Dict[str, str]


class AllowRequest(TypedDict, total=False):
    """The body of POST /v1/allow: one check inline, or several under ``checks``."""

    key: str
    limit: Limit
    cost: int
    policy: str
    dimensions: Dict[str, str]
    request_id: str
    max_wait: str
    hold: bool
    take_share: "ShareAsk"
    settle: "SettleOptions"
    checks: List[Check]


class SettleOptions(TypedDict):
    """Makes an admission a reservation of the cost, to settle within ``ttl``
    (a Go duration, 1s to 1h) with what the request used (POST /v1/settle)."""

    ttl: str


class _ShareAskRequired(TypedDict):
    units: int


class ShareAsk(_ShareAskRequired, total=False):
    """Asks, with one check, for a share of its budget to spend itself
    (the Go client's local shares; this client sends a request_id, which a
    share ask does not go with)."""

    ttl: str


class _LeaseRequired(TypedDict):
    key: str
    max: int
    ttl: str


class LeaseRequest(_LeaseRequired, total=False):
    """The body of POST /v1/leases: one of ``max`` slots of ``key`` for
    ``ttl``, waiting up to ``max_wait`` in a queue of at most ``max_queue``."""

    max_wait: str
    max_queue: int


class _CheckResultRequired(TypedDict):
    key: str
    allowed: bool
    limit: int
    remaining: int
    reset_after_ms: int
    retry_after_ms: int


class CheckResult(_CheckResultRequired, total=False):
    """The decision of one check of a request."""

    policy: str
    shadow: bool


class _BlockedRequired(TypedDict):
    ends_in_ms: int


class Blocked(_BlockedRequired, total=False):
    """Why a block denied a request: the blocked ``key`` (not in forward-auth
    answers), the operator's ``reason``, the policy whose ``penalty`` imposed
    it, and the time it has left."""

    key: str
    reason: str
    penalty: str


class _DeniedByRequired(TypedDict):
    check: int
    limit: Limit
    cause: str


class DeniedBy(_DeniedByRequired, total=False):
    """What denied a request: the ``check`` (its index), the ``policy`` and
    its ``policy_version`` (the log index of its last change), the ``limit``
    that applied, and the ``cause``: "limit", "block" or "penalty"."""

    policy: str
    policy_version: int
