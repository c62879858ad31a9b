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
    """Asks, with one check and no request_id or max_wait, for a share of its
    budget to spend itself, until ``spend_for_ms`` after the request was sent;
    what is left goes back with POST /v1/shares/return."""

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


class _SettlementRequired(TypedDict):
    settlement_id: str
    reserved: int
    cost: int
    refunded: int
    charged: int


class Settlement(_SettlementRequired, total=False):
    """The answer of a settlement: what was ``reserved``, the ``cost`` settled,
    what was ``refunded`` or ``charged`` beyond the reservation (the least
    over the request's checks), what the debt bound ``forgave``, the time
    until a check left in debt admits again, and ``duplicate`` when this is
    the answer of the same settlement made before."""

    forgiven: int
    retry_after_ms: int
    duplicate: bool


class _KeyLimitRequired(TypedDict):
    limit: Limit
    remaining: int
    reset_after_ms: int


class KeyLimit(_KeyLimitRequired, total=False):
    """A key's state under one limit, as a request of cost 0 would be told
    now; ``owner`` is the policy whose limit it is (``rls/<domain>`` for an
    Envoy counter), absent for an inline limit."""

    owner: str


class KeyState(TypedDict):
    """What the cluster holds of one key: its state under each limit that has any."""

    key: str
    limits: List[KeyLimit]


class _KeyPageRequired(TypedDict):
    keys: List[KeyState]


class KeyPage(_KeyPageRequired, total=False):
    """A page of the live keys, sorted; ``next``, when present, is where the next page starts (``after``)."""

    next: str


class _BlockRequired(TypedDict):
    key: str
    since_unix_ms: int
    until_unix_ms: int
    ends_in_ms: int


class Block(_BlockRequired, total=False):
    """A blocked key: why (``reason``), the policy whose ``penalty`` imposed
    it if one did, the cluster times it began and ends (Unix ms), and the
    time it has left."""

    reason: str
    penalty: str


class _BlockPageRequired(TypedDict):
    blocks: List[Block]


class BlockPage(_BlockPageRequired, total=False):
    """A page of the blocked keys, sorted; ``next``, when present, is where the next page starts."""

    next: str


class Penalty(TypedDict):
    """Block a key the policy denies ``denials`` times within ``within`` of the
    first, for ``block_for`` (Go durations)."""

    denials: int
    within: str
    block_for: str


class _PolicyRequestRequired(TypedDict):
    limit: Limit


class PolicyRequest(_PolicyRequestRequired, total=False):
    """A policy to store: its ``limit``, per-key ``overrides``, ``shadow``
    mode, a ``key_template`` whose {dimensions} a check fills in, a
    ``penalty``, the ``max_debt`` a settlement may charge beyond empty, and
    ``local_shares``."""

    name: str
    overrides: Dict[str, Limit]
    shadow: bool
    key_template: str
    penalty: Penalty
    max_debt: int
    local_shares: LocalShares


class _PolicyRequired(TypedDict):
    name: str
    limit: Limit
    shadow: bool


class Policy(_PolicyRequired, total=False):
    """A stored policy, as the node has applied it: with its ``version`` (the
    log index of its last change, which denials name) and ``shadow_denied``."""

    overrides: Dict[str, Limit]
    key_template: str
    local_shares: LocalShares
    shadow_denied: int
    version: int
    penalty: Penalty
    max_debt: int


class _PolicyPageRequired(TypedDict):
    policies: List[Policy]


class PolicyPage(_PolicyPageRequired, total=False):
    """A page of the policies, sorted by name; ``next``, when present, is where the next page starts."""

    next: str
