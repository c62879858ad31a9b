"""Limiter: the calls of the HTTP API against several nodes, with one retry
rule and one failure policy.

The retry rule. A request that provably never left (the connection could
not be opened) goes to the next node at once. A request whose outcome is
unknown (the node took it and did not answer in time, the connection broke
after it was sent, or a node answered 503) is sent again when the cluster
answers a repeat once, or when a repeat costs at most a unit: an allow with
a request_id (the caller's, or one the Limiter gives a request with
max_wait or settle) is answered with the first decision and charged once; a
plain allow carries no request_id, so that nodes may answer its denials
from deny leases and a busy service does not fill its token's memory of
IDs, and its repeat may be charged once more when the first node did decide
it (a lost unit, never an admission past the limit); a settlement names its
reservation; renewing and releasing a lease, reads and puts are idempotent.
A lease acquire, a share's give-back and a deletion are not retried after an
unknown outcome. A
decision or a read gives each attempt a third of the call
(``attempt_timeout``), so that a node that hangs costs that much, not the
call. A 503 sends the request to the next node at once; once every node
answered 503, its Retry-After is waited out before the next round, or the
call gives up at once when the wait would outlast the timeout. Every retry
stays within the call's timeout, and every attempt reads its whole answer
(headers and body) within the time it was given."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from . import _answers
from ._admin import Admin
from ._answers import MalformedAnswer, parse_json, read_batch, read_decision, read_lease
from ._calls import IDEMPOTENT_CALL, ONCE_CALL, CallKind
from ._decision import Decision, ceil_seconds, computed_headers
from ._duration import duration_seconds
from ._errors import LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError
from ._local import LocalLimiter
from ._shares import LocalShares
from ._transport import Answer, Malformed, NotSent, Pool, base_url
from ._types import AllowRequest, LeaseRequest, Settlement

FailurePolicy = Literal["closed", "open", "local", "raise"]
"""What ``allow``, ``allow_batch`` and ``wait`` answer when the cluster
cannot decide (no node reachable, a 503 or 500, an answer that is not one,
the timeout): "closed" denies, "open"
allows, "local" decides with an in-process limiter that enforces this
process's share of the limit (requests naming a policy, which only the
cluster knows, are denied), and "raise" raises the UnavailableError. Such a
decision is marked ``degraded``."""

RATE_LIMIT_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy", "RateLimit", "Retry-After")
"""The headers of an allow answer that tell a caller its limit, as the cluster spells them."""

# How long the release that ends a lease block may take.
_LEASE_RELEASE_TIMEOUT = 5.0

# The most a node holds a request with hold (the server's MaxHoldWait), in seconds.
_MAX_HOLD = 5.0


@dataclass
class Lease:
    """An acquire's or a renewal's answer: granted (with ``id``) or not (with ``retry_after_ms``)."""

    granted: bool
    key: str
    max: int
    active: int
    id: str = ""
    waiting: int = 0
    expires_in_ms: int = 0
    retry_after_ms: int = 0
    waited_ms: int = 0
    retry_after_seconds: int = 0
    """The Retry-After of a refusal in seconds, else 0."""


@dataclass
class RetryEvent:
    """A retry about to be made."""

    node: str
    """The node whose attempt failed."""
    attempt: int
    """The attempt that failed, from 1."""
    request_id: Optional[str]
    """The request_id the retry carries (allow's; allow_batch's first): None
    for a plain request, which carries none."""
    reason: BaseException
    """The network error, or the 503's LimitnodeError."""
    delay: float
    """How long the retry waits first, in seconds."""


class Reservation:
    """An admission to settle: its ``decision``, and what settles it."""

    def __init__(self, decision: Decision, limiter: Limiter) -> None:
        self.decision = decision
        """An admission with a ``settlement_id``, or a denial (or the failure
        policy's decision) with nothing to settle."""
        self._limiter = limiter

    def settle(self, used: int, *, timeout: Optional[float] = None) -> Optional[Settlement]:
        """Settle the reservation with ``used``, what the work cost, as
        Limiter.settle does (asking again with the same cost while the
        outcome is unknown, charged once). A reservation with nothing to
        settle answers None."""
        if self.decision.settlement_id is None:
            return None
        return self._limiter.settle(self.decision.settlement_id, used, timeout=timeout)


class HeldLease:
    """A lease held for a ``with`` block: ``lease`` as granted, and ``lost``,
    set when a renewal finds it gone; long work checks it."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.id = lease.id
        self.lost = threading.Event()


def _retry_after_of(headers: Any) -> int:
    return _answers.retry_after(headers.get("Retry-After")) or 0


def _request_id_of(req: Mapping[str, Any]) -> Optional[str]:
    """The request_id to send req with: the caller's, or one of the Limiter's
    own when req reserves (max_wait, settle), so that a retry after an
    unknown outcome is charged once; such a request is decided through the
    log anyway. A plain request gets none, so that a node may answer its
    denial from a deny lease, and a busy service does not spend its token's
    bounded memory of request IDs (a new ID past the bound is refused with a
    503)."""
    given = req.get("request_id")
    if given:
        return given  # type: ignore[no-any-return]
    return str(uuid.uuid4()) if "max_wait" in req or "settle" in req else None


def _with_request_id(req: Mapping[str, Any], request_id: Optional[str]) -> Dict[str, Any]:
    """req as it is sent: with request_id, or without one."""
    body = dict(req)
    body.pop("request_id", None)
    if request_id is not None:
        body["request_id"] = request_id
    return body


def _held(req: Mapping[str, Any]) -> float:
    """How long a node may hold req on purpose: with hold, its max_wait, up to the node's bound."""
    if not req.get("hold") or not isinstance(req.get("max_wait"), str):
        return 0.0
    return min(duration_seconds(req["max_wait"]) or 0.0, _MAX_HOLD)


def _read(a: _Answered, read: Callable[[Any], Any]) -> Any:
    """Parse an answer's body and read it; an answer that is not one is an UnavailableError."""
    try:
        return read(parse_json(a.body))
    except MalformedAnswer as error:
        raise UnavailableError(str(error), outcome_unknown=True) from error


def _is_not_found(error: BaseException) -> bool:
    return isinstance(error, LimitnodeError) and error.status == 404 and error.code == "not_found"


class Limiter(Admin):
    """Asks a limitnode cluster for decisions, leases and settlements, and
    manages its keys, blocks and policies, over its HTTP API.

    One Limiter serves a whole process, from any number of threads. It keeps
    a few connections alive to each node and remembers the node that
    answered last, to try it first. ``nodes`` are addresses ("127.0.0.1:7070")
    or base URLs ("https://limits.internal:7070"); any node answers every call.
    ``timeout`` (seconds, default 2) bounds one call, retries included;
    ``attempt_timeout`` (default a third of it) bounds one attempt of a
    decision or a read that another node could answer.

    ``local_shares=True`` answers hot keys in process, exactly: for a request
    of one check (a policy's, or an inline limit with ``local_shares``)
    without request_id, max_wait, hold or settle, the Limiter takes a share
    of the key's budget from the cluster once it saw the key twice within a
    share's TTL, riding on a request it sends anyway (take_share), and admits
    the key's next requests from it until it is spent or ends, asking for the
    next one in the background before. The cluster charges each share as if
    every unit were spent at its end, so what every client and node admit
    together never exceeds the limit. Such a Decision has ``shared`` set.
    ``close()`` gives back what is left.
    """

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        timeout: float = 2.0,
        attempt_timeout: Optional[float] = None,
        on_failure: FailurePolicy = "closed",
        replicas: int = 1,
        max_local_keys: int = 100_000,
        token: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
        clock: Callable[[], float] = time.time,
        local_shares: bool = False,
    ) -> None:
        if not nodes:
            raise ValueError("limitnode: a Limiter needs at least one node address")
        if on_failure not in ("closed", "open", "local", "raise"):
            raise ValueError(f"limitnode: on_failure {on_failure!r} is not one of closed, open, local, raise")
        self._nodes = [base_url(n) for n in nodes]
        self._timeout = timeout
        self._attempt_timeout = attempt_timeout
        self._policy = on_failure
        self._token = token
        self._on_retry = on_retry
        self._pool = Pool(ssl_context)
        self._clock = clock
        self._local = LocalLimiter(replicas, max_local_keys, clock)
        self._preferred = 0
        self._shares: Optional[LocalShares] = None
        if local_shares:
            self._shares = LocalShares(self._decide, self._give_back_share, timeout, clock)

    def close(self) -> None:
        """Give back, through the cluster, what the Limiter did not spend of its
        shares (``local_shares``), and take no more: calls after it are sent
        as without shares. It returns once no node answers a denial the units
        given back would admit, or raises the first error of a give-back (the
        units of a share not given back are lost until it ends, at most a
        second). Then it closes the idle connections."""
        try:
            if self._shares is not None:
                self._shares.close(self._timeout)
        finally:
            self._pool.close()

    async def aclose(self) -> None:
        """close, from a coroutine (an ASGI app's shutdown), in a worker thread."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Limiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def allow(self, req: AllowRequest, *, timeout: Optional[float] = None) -> Decision:
        """Ask for a decision. A denial is a Decision with ``allowed`` False and
        status 429, not an error. A request the API refuses (4xx) raises a
        LimitnodeError whatever the failure policy; when the cluster cannot
        decide, the failure policy answers."""
        if self._shares is not None:
            d = self._shares.allow(req, timeout)
            if d is not None:
                return d
        return self._decide(req, timeout)

    def _decide(self, req: AllowRequest, timeout: Optional[float]) -> Decision:
        """Ask the cluster for req's decision: allow without local shares."""
        request_id = _request_id_of(req)
        body = _with_request_id(req, request_id)
        try:
            kind = CallKind(retry_unknown=True, bounded=True, held=_held(req), request_id=request_id)
            a = self._send("POST", "/v1/allow", body, kind, timeout)
            if a.status not in (200, 429):
                raise LimitnodeError.from_body(a.status, a.body)
            answer = _read(a, lambda v: read_decision(v, a.status))
            headers = {name: a.headers[name] for name in RATE_LIMIT_HEADERS if name in a.headers}
            d = self._decision(answer, a.status, headers, request_id, a.attempts, a.headers.get("X-Limitnode-Leader"))
            d.leased = a.headers.get("X-Limitnode-Leased") == "true"
            return d
        except UnavailableError as error:
            if self._policy == "raise":
                raise
            return self._fallback(req, request_id, error)

    def allow_batch(self, reqs: Sequence[AllowRequest], *, timeout: Optional[float] = None) -> List[Union[Decision, LimitnodeError]]:
        """Decide up to 1,000 independent requests in one call and one Raft
        entry. Each item of the answer is the request's Decision, or the
        LimitnodeError that refused it alone (its ``field`` relative to the
        request). When the cluster cannot decide, the failure policy answers
        each request."""
        requests: List[Dict[str, Any]] = [_with_request_id(r, _request_id_of(r)) for r in reqs]
        first_id = requests[0].get("request_id") if requests else None
        try:
            kind = CallKind(retry_unknown=True, bounded=True, request_id=first_id)
            a = self._send("POST", "/v1/allow/batch", {"requests": requests}, kind, timeout)
            if a.status != 200:
                raise LimitnodeError.from_body(a.status, a.body)
            responses = _read(a, lambda v: read_batch(v, len(requests)))
            return [self._batch_item(item, i, requests[i].get("request_id"), a.attempts) for i, item in enumerate(responses)]
        except UnavailableError as error:
            if self._policy == "raise":
                raise
            out: List[Union[Decision, LimitnodeError]] = []
            for r in requests:
                try:
                    out.append(self._fallback(r, r.get("request_id"), error))
                except LimitnodeError as refused:
                    out.append(refused)
            return out

    def wait(self, req: AllowRequest, max_wait: float, *, timeout: Optional[float] = None) -> Decision:
        """Ask for ``req`` with ``max_wait`` (seconds, rounded down to the
        millisecond) and, when it is admitted by reservation, sleep the
        reservation's ``wait_ms`` before returning, as Upstash's
        block_until_ready and x/time/rate's Wait do: a decision with
        ``allowed`` True may go on at once. A request further than max_wait
        away is denied at once. Token bucket, leaky bucket and GCRA only
        (another algorithm is a 400). The reservation is consumed when the
        answer comes, sleep or no sleep."""
        d = self.allow(dict(req, max_wait=f"{max(int(max_wait * 1000), 0)}ms"), timeout=timeout)  # type: ignore[misc]
        if d.allowed and d.wait_ms > 0:
            time.sleep(d.wait_ms / 1000)
            d.wait_ms = 0
        return d

    def reserve(self, req: AllowRequest, ttl: str, *, timeout: Optional[float] = None) -> Reservation:
        """Ask for ``req`` as a reservation of its cost, the most the work may
        cost, to settle within ``ttl`` (a Go duration, 1s to 1h) with what it
        used. An admission answers a Reservation to settle when the work is
        done; a denial, or a decision of the failure policy, one with nothing
        to settle. Every check reserves the same cost; not with max_wait."""
        return Reservation(self.allow(dict(req, settle={"ttl": ttl}), timeout=timeout), self)  # type: ignore[misc]

    def settle(self, settlement_id: str, cost: int, *, timeout: Optional[float] = None) -> Settlement:
        """Settle the reservation ``settlement_id`` (a decision's
        ``settlement_id``) with ``cost``, what the request used: what it did
        not use goes back, what it used beyond is charged (up to the policy's
        ``max_debt``). While the outcome is unknown or the cluster answers
        503, it asks again with the same cost within the timeout: a
        settlement made twice is answered once (``duplicate``) and charged
        once. Another cost raises a LimitnodeError with status 409; an
        unknown or ended reservation one with status 404."""
        body = {"settlement_id": settlement_id, "cost": cost}
        return self._request("POST", "/v1/settle", body, IDEMPOTENT_CALL, (200,), lambda v, _: _answers.SETTLEMENT(v, "answer"), timeout)

    def acquire_lease(self, req: LeaseRequest, *, timeout: Optional[float] = None) -> Lease:
        """Ask for one of ``max`` concurrent slots of ``key``. A refusal (429)
        is a Lease with ``granted`` False. With ``max_wait`` the node holds the
        call while the request waits in the queue, and the call's timeout is
        extended by it. A call whose outcome is unknown raises an
        UnavailableError with ``outcome_unknown`` (a slot granted meanwhile
        expires at its TTL)."""
        wait = duration_seconds(req["max_wait"]) if "max_wait" in req else 0
        total = (self._timeout if timeout is None else timeout) + (wait or 0)
        a = self._send("POST", "/v1/leases", req, ONCE_CALL, total)
        if a.status not in (200, 429):
            raise LimitnodeError.from_body(a.status, a.body)
        lease = _lease(_read(a, lambda v: read_lease(v, a.status)))
        if a.status == 429:
            lease.retry_after_seconds = _retry_after_of(a.headers)
        return lease

    def renew_lease(self, lease_id: str, ttl: str, *, timeout: Optional[float] = None) -> Lease:
        """Move the expiry of the held lease ``lease_id`` to ``ttl`` (a Go
        duration) from now. A lease no longer held raises a LimitnodeError
        with status 404 and code not_found."""
        path = f"/v1/leases/{quote(lease_id, safe='')}/renew"
        return self._request("POST", path, {"ttl": ttl}, IDEMPOTENT_CALL, (200,), lambda v, status: _lease(read_lease(v, status)), timeout)

    def release_lease(self, lease_id: str, *, timeout: Optional[float] = None) -> None:
        """Give the lease back, or take a waiting request with that ID out of
        its queue. A lease neither held nor waiting raises a LimitnodeError
        with status 404, except after a retry: then the first attempt, whose
        outcome was unknown, gave it back."""
        a = self._send("DELETE", f"/v1/leases/{quote(lease_id, safe='')}", None, IDEMPOTENT_CALL, timeout)
        if a.status == 200 or (a.status == 404 and a.retried_unknown):
            return
        raise LimitnodeError.from_body(a.status, a.body)

    @contextlib.contextmanager
    def lease(self, req: LeaseRequest, *, timeout: Optional[float] = None) -> Iterator[HeldLease]:
        """Hold a lease of ``req`` for a ``with`` block.

        It acquires as acquire_lease does (waiting in the queue when ``req``
        says so) and raises a LeaseRefusedError, without running the block,
        when no slot is granted. While the block runs a thread renews the
        lease for its ``ttl`` every third of it; when a renewal finds the lease
        gone it sets ``held.lost``, and the block's end raises a
        LeaseLostError. When the block ends the lease is given back (within
        5 s)."""
        granted = self.acquire_lease(req, timeout=timeout)
        if not granted.granted:
            raise LeaseRefusedError(granted)
        held = HeldLease(granted)
        stop = threading.Event()
        found_gone: List[BaseException] = []
        period = max((duration_seconds(req["ttl"]) or 0.003) / 3, 0.001)

        def keep() -> None:
            while not stop.wait(period):
                try:
                    self.renew_lease(granted.id, req["ttl"])
                except LimitnodeError as error:
                    if _is_not_found(error):
                        found_gone.append(error)
                        held.lost.set()
                        return  # any other failure: the next tick tries again

        renewer = threading.Thread(target=keep, name=f"limitnode-lease-{granted.id}", daemon=True)
        renewer.start()
        try:
            yield held
        except BaseException as error:
            stop.set()
            renewer.join()
            if held.lost.is_set():
                raise LeaseLostError(f"limitnode: lease {granted.id} lost: a renewal found it gone") from error
            with contextlib.suppress(LimitnodeError):
                self.release_lease(granted.id, timeout=_LEASE_RELEASE_TIMEOUT)
            raise
        stop.set()
        renewer.join()
        if held.lost.is_set():
            raise LeaseLostError(f"limitnode: lease {granted.id} lost: a renewal found it gone") from found_gone[0]
        try:
            self.release_lease(granted.id, timeout=_LEASE_RELEASE_TIMEOUT)
        except LimitnodeError as error:
            if _is_not_found(error):
                raise LeaseLostError(f"limitnode: lease {granted.id} lost: the release found it gone") from error
            raise

    def _give_back_share(self, body: Dict[str, Any], timeout: Optional[float]) -> None:
        """Give back one share's unspent units (POST /v1/shares/return)."""
        self._request("POST", "/v1/shares/return", body, ONCE_CALL, (200,), lambda v, _: _answers.SHARE_RETURNED(v, "answer"), timeout)

    def _fallback(self, req: Mapping[str, Any], request_id: Optional[str], cause: UnavailableError) -> Decision:
        """The failure policy's decision for req."""
        if self._policy == "local":
            answer = self._local.decide(req)
            allowed, limit, remaining = answer.allowed, answer.limit, answer.remaining
            reset_after_ms, retry_after_ms = answer.reset_after_ms, answer.retry_after_ms
        else:
            allowed, limit, remaining, reset_after_ms, retry_after_ms = self._policy == "open", 0, 0, 0, 0
        headers = {"X-Limitnode-Degraded": "true"}
        if limit > 0:
            headers["RateLimit-Limit"] = str(limit)
            headers["RateLimit-Remaining"] = str(remaining)
            headers["RateLimit-Reset"] = str(ceil_seconds(reset_after_ms))
        retry_after = 0
        if not allowed:
            retry_after = max(ceil_seconds(retry_after_ms), 1)
            headers["Retry-After"] = str(retry_after)
        return Decision(
            allowed=allowed, limit=limit, remaining=remaining, reset_after_ms=reset_after_ms, retry_after_ms=retry_after_ms,
            status=200 if allowed else 429, headers=headers, request_id=request_id,
            retry_after_seconds=retry_after, reset_at=self._clock() + reset_after_ms / 1000, degraded=True, cause=cause,
        )

    def _request(
        self,
        method: str,
        path: str,
        payload: Optional[Mapping[str, Any]],
        kind: CallKind,
        ok: Sequence[int],
        read: Callable[[Any, int], Any],
        timeout: Optional[float],
    ) -> Any:
        """Make one call that is not a decision and read its answer, whose
        status must be in ok: a 4xx raises a LimitnodeError; any other
        status, an answer that is not one, or no answer an UnavailableError."""
        a = self._send(method, path, payload, kind, timeout)
        if a.status not in ok:
            raise LimitnodeError.from_body(a.status, a.body)
        return _read(a, lambda v: read(v, a.status))

    def _decision(
        self, body: Mapping[str, Any], status: int, headers: Dict[str, str], request_id: Optional[str], attempts: int, leader: Optional[str]
    ) -> Decision:
        """A Decision of an answer that arrived now."""
        allowed = body["allowed"]
        return Decision(
            allowed=allowed,
            limit=body["limit"],
            remaining=body["remaining"],
            reset_after_ms=body["reset_after_ms"],
            retry_after_ms=body["retry_after_ms"],
            status=200 if status == 200 else 429,
            headers=headers,
            request_id=request_id,
            attempts=attempts,
            retry_after_seconds=0 if allowed else (_answers.retry_after(headers.get("Retry-After")) or 0),
            reset_at=self._clock() + body["reset_after_ms"] / 1000,
            leader=leader,
            wait_ms=body.get("wait_ms", 0),
            held_ms=body.get("held_ms", 0),
            duplicate=body.get("duplicate", False),
            checks=list(body.get("checks", [])),
            blocked=body.get("blocked"),
            denied_by=body.get("denied_by"),
            settlement_id=body.get("settlement_id"),
            share=body.get("share"),
        )

    def _batch_item(self, item: Mapping[str, Any], i: int, request_id: Optional[str], attempts: int) -> Union[Decision, LimitnodeError]:
        """One answer of a batch. A batch answers no per-request headers, so a
        decision's are computed from its fields."""
        status = item["status"]
        if status not in (200, 429):
            field_name = item.get("field", "").replace(f"requests[{i}]", "", 1).lstrip(".") or None
            where = f" ({field_name})" if field_name else ""
            return LimitnodeError(f"limitnode: {status} {item['code']}{where}: {item['error']}", status, item["code"], field_name)
        headers = computed_headers(item["allowed"], item["limit"], item["remaining"], item["reset_after_ms"], item["retry_after_ms"])
        return self._decision(item, status, headers, request_id, attempts, None)

    def _send(self, method: str, path: str, payload: Optional[Mapping[str, Any]], kind: CallKind, timeout: Optional[float]) -> _Answered:
        """Make one call of the API as the retry rule above says: try the
        nodes in turn, starting with the one that answered last, until one
        answers or the timeout runs out, and return the answer whatever its
        status (a 503 only when the call may not be retried). Raise an
        UnavailableError when no answer can be had, or the answer is
        malformed."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        call_timeout = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + call_timeout + kind.held
        per_attempt = float("inf")
        if kind.retry_unknown and kind.bounded and len(self._nodes) > 1:
            per_attempt = (call_timeout / 3 if self._attempt_timeout is None else self._attempt_timeout) + kind.held
        start = self._preferred
        refused_in_a_row = unknown_in_a_row = unavailable_in_a_row = 0
        retried_unknown = False
        last_error: Optional[BaseException] = None
        attempt = 0
        while True:
            attempt += 1
            index = (start + attempt - 1) % len(self._nodes)
            node = self._nodes[index]
            left = deadline - time.monotonic()
            if left <= 0:
                raise UnavailableError(f"limitnode: no answer within the timeout: {last_error}", outcome_unknown=retried_unknown)
            a = self._pool.exchange(node, method, path, body, headers, min(left, per_attempt))
            if isinstance(a, NotSent):
                last_error = a.error
                refused_in_a_row += 1
                if refused_in_a_row >= len(self._nodes):
                    raise UnavailableError(f"limitnode: no node reachable: {a.error}", outcome_unknown=retried_unknown) from a.error
                continue
            refused_in_a_row = 0
            if isinstance(a, Malformed):
                raise UnavailableError(f"{a.error} (from {node})", outcome_unknown=True) from a.error
            if isinstance(a, Answer):
                if a.status != 503 or not kind.retry_unknown:
                    self._preferred = index
                    return _Answered(a.status, a.headers, a.body, attempt, retried_unknown)
                error = LimitnodeError.from_body(a.status, a.body)
                last_error = error
                # Another node may decide: it is asked at once. Once every
                # node answered 503, the Retry-After is waited out.
                delay = 0.0
                unavailable_in_a_row += 1
                if unavailable_in_a_row >= len(self._nodes):
                    unavailable_in_a_row = 0
                    delay = float(_retry_after_of(a.headers) or 1)
                    if time.monotonic() + delay >= deadline:
                        raise error
            else:
                last_error = a.error
                if not kind.retry_unknown or time.monotonic() >= deadline:
                    raise UnavailableError(f"limitnode: the outcome is unknown: {a.error!r}", outcome_unknown=True) from a.error
                # The node that broke off may be gone: the next goes at once,
                # and only a run of failures backs off.
                delay = 0 if unknown_in_a_row == 0 else min(0.05 * 2 ** (unknown_in_a_row - 1), 0.5)
                unknown_in_a_row += 1
            retried_unknown = True
            if self._on_retry is not None:
                self._on_retry(RetryEvent(node=node, attempt=attempt, request_id=kind.request_id, reason=last_error, delay=delay))
            time.sleep(delay)


@dataclass
class _Answered:
    """An answer that ended a call, with what the call went through to get it."""

    status: int
    headers: Any
    body: bytes
    attempts: int
    retried_unknown: bool
    """True when an earlier attempt's outcome was unknown."""


def _lease(body: Mapping[str, Any]) -> Lease:
    return Lease(
        granted=body["granted"],
        key=body["key"],
        max=body["max"],
        active=body["active"],
        id=body.get("id", ""),
        waiting=body.get("waiting", 0),
        expires_in_ms=body.get("expires_in_ms", 0),
        retry_after_ms=body.get("retry_after_ms", 0),
        waited_ms=body.get("waited_ms", 0),
    )
