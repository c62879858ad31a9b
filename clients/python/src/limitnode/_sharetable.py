"""ShareTable holds shares of keys' budgets for whoever spends them (here, a
Limiter with ``local_shares``): which key is hot enough to ask for a share,
how much to ask for, spending a share until it ends, asking for the next one
before it runs out, and what to give back at the end. It is the rule of the
Go client and the cluster's nodes (internal/sharetable), written for this
client.

It knows nothing of how a share is asked for or granted: the caller sends
the asks the table says to, and settles their answers. Exactness is the
granter's (the cluster charges a share as if every unit were spent at its
end); the table's part is to stop spending by the deadline the grant gives,
measured on the monotonic clock from when the request that brought it was
sent.

What a holder does not spend it gives back (``give_back``), so that a share
costs the key only what was spent: a share is retired, and what is left of
it given back, as soon as a newer share of its key arrives, or once only a
quarter of its time is left (early enough for the return to reach the
granter before the share ends; a return after that gives nothing back). Only
a holder that vanishes loses units, until its shares end."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Generic, List, Optional, Tuple, TypeVar

K = TypeVar("K")
T = TypeVar("T")

MAX_KEYS = 1 << 16
"""The most keys a table tracks; beyond it, requests of new keys are sent as without shares."""

# How many requests of a key within a share's TTL make the table ask for a share of it.
_HOT_AFTER = 2
# The size of the table that spots hot keys before they get an entry: keys
# seen once cost a slot of it, not an entry.
_SIGHTINGS = 1 << 16
# How often, at most, a full table drops the entries of keys that hold
# nothing and went quiet, in seconds.
_SWEEP_EVERY = 1.0


@dataclass(frozen=True)
class Grant:
    """A share as its holder keeps it: ``token`` names it to the granter (and
    proves the holder holds it); ``units`` may be spent until ``spend_for``
    seconds have passed since the request that brought it was sent."""

    token: str
    units: int
    spend_for: float


@dataclass(frozen=True)
class ShareReturn(Generic[K]):
    """An unspent share to give back: what names its key to the granter, the
    share's token and what is left of it."""

    key: K
    token: str
    unspent: int


@dataclass(frozen=True)
class ShareKey(Generic[K]):
    """A request to take: its key's name (the table's key) and what names the
    key to the granter, the shares' TTL in seconds, the most one share should
    hold, and the request's cost."""

    name: str
    id: K
    ttl: float
    most: int
    cost: int


@dataclass(frozen=True)
class Taken(Generic[T]):
    """What take tells the caller to do with a request.

    ``answered``: admit it from a share; ``template`` is the grant's,
    ``since`` the seconds since its request was sent, ``left`` what the
    holder has left of the key's live shares after this request. ``ask``,
    when positive, is the share to ask for with the request, and ``renew``
    the share to ask for in the background (a request of cost 0); the
    caller settles the key once it has the answer of either."""

    answered: bool = False
    template: Optional[T] = None
    since: float = 0.0
    left: int = 0
    ask: int = 0
    renew: int = 0


_SEND_AS_IT_IS: Taken = Taken()


class _Sighting:
    """What the table remembers of a key without an entry: its hash, when it
    was first seen lately, and how often and for how many units since."""

    __slots__ = ("hash", "since", "times", "units")

    def __init__(self, hash_: int, since: float) -> None:
        self.hash, self.since, self.times, self.units = hash_, since, 0, 0


class _Held(Generic[T]):
    """One share; times on the table's monotonic clock."""

    __slots__ = ("token", "units", "left", "until", "retire_at", "sent_at", "template")

    def __init__(self, g: Grant, sent_at: float, template: T) -> None:
        self.token, self.units, self.left = g.token, g.units, g.units
        self.until = sent_at + g.spend_for  # spent no later than this
        self.retire_at = sent_at + g.spend_for - g.spend_for / 4  # given back from this on
        self.sent_at = sent_at
        self.template = template


class _Entry(Generic[K, T]):
    """What the table holds of, and knows about, one key."""

    def __init__(self, id_: K, before: _Sighting) -> None:
        self.id = id_
        self.ttl = 0.0
        self.most = 0
        self.shares: List[_Held[T]] = []  # oldest first
        # When set, the ask under way; it is set when answered.
        self.asking: Optional[threading.Event] = None
        # What the holder saw of the key: requests and units in the current
        # window (a TTL long, from seen_from) and the one before. The
        # sightings before this request count as the entry's own.
        self.seen_from = before.since
        self.requests, self.last_requests = before.times, 0
        self.units, self.last_units = before.units, 0
        self.last_used = 0.0
        # granted: the last ask brought a share; renewing: the ask under way
        # is a renewal.
        self.granted = False
        self.renewing = False

    def see(self, now: float, cost: int) -> None:
        """Count a request of cost on the key."""
        if now - self.seen_from >= self.ttl:
            self.last_requests, self.last_units = self.requests, self.units
            if now - self.seen_from >= 2 * self.ttl:
                self.last_requests, self.last_units = 0, 0
            self.requests, self.units, self.seen_from = 0, 0, now
        self.requests += 1
        self.units += cost
        self.last_used = now

    def left(self, now: float) -> int:
        """What the holder has left in live shares of the key."""
        return sum(h.left for h in self.shares if now < h.until)

    def ask(self, cost: int) -> int:
        """The share to ask for: twice what the holder admitted of the key in
        the last TTL, at least twice cost and at least 2, at most most."""
        return min(max(2 * max(self.units, self.last_units), 2 * cost, 2), self.most)

    def renewal(self, now: float, closed: bool) -> int:
        """The share to ask for in the background when one is due (the newest
        share half spent or half over) and none is under way; 0 otherwise."""
        if self.asking is not None or self.renewing or closed or not self.shares:
            return 0
        newest = self.shares[-1]
        if 2 * newest.left > newest.units and 2 * (newest.until - now) > newest.until - newest.sent_at:
            return 0
        self.renewing = True
        self.asking = threading.Event()
        return self.ask(0)


class ShareTable(Generic[K, T]):
    """One holder's shares, by key, safe to share between threads. K is what
    the holder keeps of a key to name it when it gives a share back; T is
    what it keeps of a grant to answer from it.

    The table reads time from ``now`` (seconds, monotonic) and runs a
    function after a while with ``after(delay, f)``. ``give_back``, when set,
    is handed what is left of the shares the table retires (see the module's
    doc), outside the table's lock, to give back to the granter without
    blocking; without it, what is left of a retired share is let go."""

    def __init__(self, now: Callable[[], float] = time.monotonic, after: Optional[Callable[[float, Callable[[], None]], None]] = None) -> None:
        self.give_back: Optional[Callable[[List[ShareReturn[K]]], None]] = None
        self._now = now
        self._after = after if after is not None else _timer
        self._lock = threading.Lock()
        self._by_key: Dict[str, _Entry[K, T]] = {}
        self._seen: List[Optional[_Sighting]] = [None] * _SIGHTINGS  # direct-mapped by the key's hash
        self._last_sweep = float("-inf")
        self._closed = False  # the holder is stopping: it takes no more

    def take(self, k: ShareKey[K], wait: float) -> Taken[T]:
        """Answer a request of k.cost on key k.name from a share the holder
        has, or say how to send it: with a share ask when the key is hot and
        no ask is under way, else as it is. While an ask of the key that
        brought a share last time is under way, wait for its answer once, at
        most ``wait`` seconds."""
        counted = waited = False
        while True:
            with self._lock:
                now = self._now()
                e = self._entry(k, now, not counted)
                if e is None:
                    return _SEND_AS_IT_IS
                if not counted:
                    e.see(now, k.cost)
                    counted = True
                h, retired = self._spendable(e, now, k.cost)
                wait_for: Optional[threading.Event] = None
                out: Taken[T] = _SEND_AS_IT_IS
                if h is not None:
                    h.left -= k.cost
                    out = Taken(answered=True, template=h.template, since=now - h.sent_at, left=e.left(now), renew=e.renewal(now, self._closed))
                elif e.asking is None and not waited:
                    if e.requests + e.last_requests >= _HOT_AFTER and not self._closed:
                        e.asking = threading.Event()
                        out = Taken(ask=e.ask(k.cost))
                elif e.asking is not None and not waited and e.granted:
                    wait_for = e.asking
                # Otherwise waiting again, or for an ask that will likely
                # bring nothing, would line the key's requests up one by one.
            self._hand_back(retired)
            if wait_for is None:
                return out
            if not wait_for.wait(wait):
                return _SEND_AS_IT_IS
            waited = True

    def _entry(self, k: ShareKey[K], now: float, sighted: bool) -> Optional[_Entry[K, T]]:
        """k's entry; None when it has none and is not yet seen often enough
        for one (a sighting counts when sighted), or the table is full."""
        e = self._by_key.get(k.name)
        if e is None:
            if not sighted:
                return None
            before = self._sight(k, now)
            if before is None or (len(self._by_key) >= MAX_KEYS and not self._sweep(now)):
                return None
            e = _Entry(k.id, before)
            self._by_key[k.name] = e
        e.ttl, e.most = k.ttl, k.most
        return e

    def _sight(self, k: ShareKey[K], now: float) -> Optional[_Sighting]:
        """Count a request of a key without an entry and, once the key is hot
        enough for one (seen _HOT_AFTER times within a TTL), return what was
        seen of it before this request. Two keys that share a slot only make
        each other look colder. (Python's string hash is seeded anew in each
        process.)"""
        h = hash(k.name)
        slot = h % _SIGHTINGS
        s = self._seen[slot]
        if s is None or s.hash != h or now - s.since >= k.ttl:
            s = _Sighting(h, now)
            self._seen[slot] = s
        if s.times + 1 < _HOT_AFTER:
            s.times += 1
            s.units += k.cost
            return None
        self._seen[slot] = None
        return s

    def _sweep(self, now: float) -> bool:
        """Drop the entries of keys that hold nothing and were not used for a
        TTL, at most once a second (a full table of busy keys stays full), and
        report whether that made room."""
        if now - self._last_sweep < _SWEEP_EVERY:
            return False
        self._last_sweep = now
        for name, e in list(self._by_key.items()):
            if e.asking is None and not e.renewing and e.left(now) == 0 and now - e.last_used > e.ttl:
                del self._by_key[name]
        return len(self._by_key) < MAX_KEYS

    def _spendable(self, e: _Entry[K, T], now: float, cost: int) -> Tuple[Optional[_Held[T]], List[ShareReturn[K]]]:
        """The oldest share with cost left that has not ended, after dropping
        the ones that ended or are spent and retiring the ones due (what is
        left of them to give back: the list)."""
        found: Optional[_Held[T]] = None
        retired: List[ShareReturn[K]] = []
        kept: List[_Held[T]] = []
        for h in e.shares:
            if now >= h.until:
                continue
            if self.give_back is not None and now >= h.retire_at:
                self._retire(e, h, retired)
                continue
            if h.left == 0 and cost > 0:
                continue
            kept.append(h)
            if found is None and h.left >= cost:
                found = h
        e.shares = kept
        return found, retired

    def _retire(self, e: _Entry[K, T], h: _Held[T], returns: List[ShareReturn[K]]) -> None:
        """Let go of share h of e, which the caller drops from e.shares, and
        append what is left of it to give back to returns. (A table without
        give_back retires a share only for a newer one: what is left of it is
        let go.)"""
        if h.left > 0 and self.give_back is not None:
            returns.append(ShareReturn(e.id, h.token, h.left))
        h.left = 0

    def _hand_back(self, returns: List[ShareReturn[K]]) -> None:
        """Hand returns to give_back, outside the lock."""
        give_back = self.give_back
        if returns and give_back is not None:
            give_back(returns)

    def _retire_when_due(self, name: str, h: _Held[T]) -> None:
        """Retire share h of key name once its time to be retired has come,
        if it is still held then: run by a timer set when it was settled, and
        set again if it ran early."""
        retired: List[ShareReturn[K]] = []
        with self._lock:
            e = self._by_key.get(name)
            if e is None or h not in e.shares:
                return
            early = h.retire_at - self._now()
            if early > 0:
                self._after(early, lambda: self._retire_when_due(name, h))
                return
            self._retire(e, h, retired)
            e.shares.remove(h)
        self._hand_back(retired)

    def settle(self, name: str, sent_at: float, grant: Optional[Grant] = None, template: Optional[T] = None) -> None:
        """Take the answer to an ask (from take's ask or renew) of key name,
        sent at sent_at: grant, None when the ask failed or brought no share,
        is held from now on with template, and the key's older shares are
        retired; the requests waiting for the ask look again. A share granted
        after the holder began to stop is given back whole."""
        retired: List[ShareReturn[K]] = []
        with self._lock:
            e = self._by_key.get(name)
            if e is None:
                return
            if e.asking is not None:
                e.asking.set()
                e.asking = None
            e.renewing = False
            e.granted = grant is not None
            if grant is None or grant.spend_for <= 0:
                return
            if self._closed:
                retired.append(ShareReturn(e.id, grant.token, grant.units))
            else:
                for old in e.shares:
                    self._retire(e, old, retired)
                h: _Held[T] = _Held(grant, sent_at, template)  # type: ignore[arg-type]
                e.shares = [h]
                if self.give_back is not None:
                    self._after(h.retire_at - self._now(), lambda: self._retire_when_due(name, h))
        self._hand_back(retired)

    def close(self) -> List[ShareReturn[K]]:
        """Let go of every share, take no more, and return the live ones with
        units left: what the holder gives back as it stops."""
        with self._lock:
            self._closed = True
            now = self._now()
            out = [ShareReturn(e.id, h.token, h.left) for e in self._by_key.values() for h in e.shares if h.left > 0 and now < h.until]
            for e in self._by_key.values():
                e.shares = []
            return out


def _timer(delay: float, f: Callable[[], None]) -> None:
    """Run f after delay seconds on a timer thread of its own."""
    t = threading.Timer(max(delay, 0.0), f)
    t.daemon = True
    t.start()
