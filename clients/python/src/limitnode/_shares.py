"""Local shares in the Limiter (``local_shares=True``): the Limiter takes a
share of a hot key's budget from the cluster, riding on a request it sends
anyway (take_share), and answers the key's next requests from it in
process, asking for the next share in the background before it runs out.
The cluster charges a share as if every unit were spent at its end, so what
every client and node admit together never exceeds the limit; the Limiter
stops spending a share spend_for_ms after it sent the request that brought
it, on its monotonic clock (time.monotonic). What it retires unspent (a
newer share of its key arrived, or it nears its end) it gives back in the
background; close() gives back the rest. Which keys, how much and when is
_sharetable's."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import heapq
import itertools
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ._decision import Decision, computed_headers
from ._duration import duration_seconds
from ._sharetable import Grant, ShareKey, ShareReturn, ShareTable
from ._types import AllowRequest

_log = logging.getLogger("limitnode")

DEFAULT_SHARE_TTL = 0.5
"""The TTL, in seconds, the Limiter asks its shares for when the request's
limit does not say (a policy's own local_shares bound it on the cluster)."""

# The most the Limiter asks for at once; the cluster grants at most half of
# what a key has left, within the policy's max_units.
_MOST_UNITS = 1_000_000_000

# How many calls local shares make at once in the background (renewals and
# give-backs).
_BACKGROUND_CALLS = 4

KeyName = Dict[str, Any]
"""What names a key to the cluster when a share of it is given back: the
request's check, without its cost."""

Decide = Callable[[AllowRequest, Optional[float]], Decision]
"""Sends one allow with a timeout and answers its Decision (the failure
policy's, when the cluster cannot decide)."""

GiveBack = Callable[[Dict[str, Any], Optional[float]], None]
"""Posts one return to /v1/shares/return with a timeout."""


def _shareable(req: AllowRequest) -> Optional[Tuple[str, float]]:
    """Whether req may be answered from a share, with its key's name and the
    shares' TTL: one check (a policy's, or an inline limit with
    local_shares), no request_id, max_wait, hold, settle or take_share of the
    caller's own."""
    if any(f in req for f in ("checks", "request_id", "max_wait", "settle", "take_share")) or req.get("hold"):
        return None
    ttl = DEFAULT_SHARE_TTL
    limit = req.get("limit")
    if limit is None:
        if "policy" not in req:
            return None
    elif "local_shares" in limit:
        given = duration_seconds(limit["local_shares"].get("ttl", ""))
        if given is not None and given > 0:
            ttl = given
    else:
        return None
    spelled = "" if limit is None else f"{limit.get('algorithm', '')}/{limit.get('rate')}/{limit.get('period', '')}/{limit.get('burst', 0)}"
    dims = sorted(f"{k}={v}" for k, v in req.get("dimensions", {}).items())
    return "\0".join([req.get("policy", ""), req.get("key", ""), spelled, *dims]), ttl


class LocalShares:
    """A Limiter's shares: by the request's key, answering from the decision
    that brought the share."""

    def __init__(self, decide: Decide, give_back: GiveBack, timeout: float, clock: Callable[[], float], now: Callable[[], float] = time.monotonic) -> None:
        self._decide = decide
        self._post_return = give_back
        self._timeout = timeout
        self._clock = clock  # the Limiter's, for reset_at
        self._now = now
        self._timers = _Timers()
        self._workers = concurrent.futures.ThreadPoolExecutor(max_workers=_BACKGROUND_CALLS, thread_name_prefix="limitnode-shares")
        self._lock = threading.Lock()
        # The renewals and give-backs under way in the background, for close
        # to wait for.
        self._renewing: Set[concurrent.futures.Future[Any]] = set()
        self._giving_back: Set[concurrent.futures.Future[Any]] = set()
        self._table: ShareTable[KeyName, Decision] = ShareTable(now, self._timers.after)
        # A share not given back is lost until it ends, never over-admitted.
        self._table.give_back = lambda returns: self._background(self._giving_back, self._give_back, returns, True, None)

    def allow(self, req: AllowRequest, timeout: Optional[float]) -> Optional[Decision]:
        """Decide req from a share when it can, or send it, asking for a share
        when the key is hot; None when req is not for shares (the Limiter
        sends it as it is). Waiting for another request's ask counts against
        the call's timeout."""
        found = _shareable(req)
        if found is None:
            return None
        name, ttl = found
        started = self._now()
        call_timeout = self._timeout if timeout is None else timeout
        named = {f: req[f] for f in ("key", "limit", "policy", "dimensions") if f in req}  # type: ignore[literal-required]
        taken = self._table.take(ShareKey(name, named, ttl, _MOST_UNITS, req.get("cost", 1)), call_timeout)
        if taken.renew > 0:
            renewal: AllowRequest = dict(req, cost=0)  # type: ignore[assignment]
            self._background(self._renewing, self._ask, name, ttl, renewal, taken.renew, None)
        if taken.answered and taken.template is not None:
            return self._shared_decision(taken.template, taken.since, taken.left)
        rest = max(call_timeout - (self._now() - started), 0.001)
        return self._ask(name, ttl, req, taken.ask, rest) if taken.ask > 0 else self._decide(req, rest)

    def _ask(self, name: str, ttl: float, req: AllowRequest, units: int, timeout: Optional[float]) -> Decision:
        """Send req with a share ask of units, settle the key with its
        answer, and answer req's decision."""
        sent_at = self._now()
        d: Optional[Decision] = None
        try:
            d = self._decide(dict(req, take_share={"units": units, "ttl": f"{int(ttl * 1000)}ms"}), timeout)  # type: ignore[arg-type]
            return dataclasses.replace(d, share=None)  # the share is the Limiter's, never the caller's
        finally:
            s = None if d is None else d.share
            if d is None or s is None:
                self._table.settle(name, sent_at)
            else:
                template = dataclasses.replace(d, remaining=s["remaining"], share=None, checks=[])
                self._table.settle(name, sent_at, Grant(s["id"], s["units"], s["spend_for_ms"] / 1000), template)

    def _shared_decision(self, grant: Decision, since: float, left: int) -> Decision:
        """The admission a share gives ``since`` seconds after its grant's
        request was sent: the grant's decision, what is left counted as what
        the key had left for others when the share was granted plus what this
        Limiter holds (left), its reset shorter by since."""
        remaining = min(grant.remaining + left, grant.limit)
        reset_after_ms = max(grant.reset_after_ms - int(since * 1000), 0)
        return Decision(
            allowed=True,
            limit=grant.limit,
            remaining=remaining,
            reset_after_ms=reset_after_ms,
            retry_after_ms=0,
            status=200,
            headers=computed_headers(True, grant.limit, remaining, reset_after_ms, 0),
            request_id=None,
            reset_at=self._clock() + reset_after_ms / 1000,
            shared=True,
        )

    def _give_back(self, returns: List[ShareReturn[KeyName]], background: bool, timeout: Optional[float]) -> None:
        """Give back the units of returns, one after the other, in the
        background (no one waits: the cluster answers without waiting out its
        deny leases) or not; raise the first error once all were tried."""
        first: Optional[BaseException] = None
        for r in returns:
            body = dict(r.key, id=r.token, unspent=r.unspent)
            if background:
                body["background"] = True
            try:
                self._post_return(body, timeout)
            except Exception as error:  # each return is tried
                first = first or error
        if first is not None:
            raise first

    def _background(self, under_way: Set[concurrent.futures.Future[Any]], call: Callable[..., Any], *args: Any) -> None:
        """Run call(*args) on a worker, kept in under_way until it is done;
        after close, on a thread of its own."""
        try:
            future = self._workers.submit(call, *args)
        except RuntimeError:  # closed: a share a late answer brought goes back all the same
            threading.Thread(target=_logged(call), args=args, daemon=True).start()
            return
        with self._lock:
            under_way.add(future)
        future.add_done_callback(lambda f: self._done(under_way, f))

    def _done(self, under_way: Set[concurrent.futures.Future[Any]], future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            under_way.discard(future)
        if not future.cancelled() and future.exception() is not None:
            _log.debug("limitnode: a local share's background call failed: %s", future.exception())

    def close(self, timeout: Optional[float]) -> None:
        """Give back what is left of the shares and take no more; return once
        the renewals and give-backs under way in the background are done and
        no node answers a denial the units given back would admit; raise the
        first error of a give-back (the units of a share not given back are
        lost until it ends)."""
        returns = self._table.close()
        self._wait(self._renewing)  # a share a renewal brings now is given back whole, in the background
        first: Optional[BaseException] = None
        gone = [self._workers.submit(self._give_back, [r], False, timeout) for r in returns]
        for f in gone:
            error = f.exception()
            first = first or error
        self._wait(self._giving_back)
        self._timers.stop()
        self._workers.shutdown(wait=True)
        if first is not None:
            raise first

    def _wait(self, under_way: Set[concurrent.futures.Future[Any]]) -> None:
        with self._lock:
            pending = list(under_way)
        concurrent.futures.wait(pending)


def _logged(call: Callable[..., Any]) -> Callable[..., None]:
    def run(*args: Any) -> None:
        try:
            call(*args)
        except Exception as error:
            _log.debug("limitnode: a local share's background call failed: %s", error)

    return run


class _Timers:
    """Runs functions after a delay, on one daemon thread started when first
    needed (a thread per share would come and go with every share)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: List[Tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._stopped = False

    def after(self, delay: float, f: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._due, (time.monotonic() + delay, next(self._order), f))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="limitnode-share-timers", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._due or self._due[0][0] > time.monotonic()):
                    self._cond.wait(None if not self._due else self._due[0][0] - time.monotonic())
                if self._stopped:
                    return
                _, _, f = heapq.heappop(self._due)
            _logged(f)()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
