"""The local fallback (on_failure="local"): while the cluster cannot decide,
each process decides alone, with the cluster's own algorithms on its own
clock, for its share of each limit (rate and burst divided by the number of
replicas), so that the replicas together stay close to the limit.

The arithmetic is the cluster's (package algorithms), on exact integers: a
bucket keeps its theoretical arrival time (TAT) scaled by the rate, so that
"one unit takes period/rate ns" is the integer ``period``; the windows keep
counts, the log its timestamps. The three bucket algorithms decide
identically, so one rule serves them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._duration import parse_duration
from ._errors import LimitnodeError

_BUCKETS = ("token_bucket", "leaky_bucket", "gcra", "")
_WINDOWS = ("fixed_window", "sliding_window_log", "sliding_window_counter")

# The cluster's bounds (README "Configuration"; package algorithms).
_MAX_RATE = 1_000_000_000
_MAX_LOG_RATE = 10_000
_MIN_PERIOD = 1_000_000
_MAX_PERIOD = 8760 * 3_600_000_000_000
_MAX_FILL = 50 * _MAX_PERIOD
_MAX_KEY_BYTES = 512
_MAX_CHECKS = 32


@dataclass(frozen=True)
class _Limit:
    """A limit in nanoseconds, with its defaults filled in."""

    algorithm: str
    rate: int
    period: int
    burst: int  # 0 for the windows

    @property
    def is_bucket(self) -> bool:
        return self.algorithm in _BUCKETS

    @property
    def capacity(self) -> int:
        return self.burst if self.is_bucket else self.rate


@dataclass(frozen=True)
class _State:
    """A key's state; its fields mean what package algorithms' State's do."""

    tat: int = 0  # buckets: TAT × rate
    start: int = 0  # windows: the current window's start
    count: int = 0
    previous: int = 0
    log: Tuple[int, ...] = field(default_factory=tuple)


_NO_STATE = _State()


def _ceil_div(a: int, b: int) -> int:
    return 0 if a <= 0 else (a - 1) // b + 1


class _Bucket:
    """The token bucket (and so the leaky bucket and GCRA): with
    debt = max(TAT − now, 0), a cost fits while debt + cost×T ≤ burst×T."""

    @staticmethod
    def debt(l: _Limit, s: _State, now: int) -> int:
        return max(s.tat - now * l.rate, 0)

    @staticmethod
    def wait(l: _Limit, s: _State, now: int, cost: int) -> int:
        over = _Bucket.debt(l, s, now) + cost * l.period - l.burst * l.period
        return 0 if over <= 0 else _ceil_div(over, l.rate)

    @staticmethod
    def admit(l: _Limit, s: _State, now: int, cost: int) -> _State:
        return _State(tat=max(s.tat, now * l.rate) + cost * l.period)

    @staticmethod
    def remaining(l: _Limit, s: _State, now: int) -> int:
        return max(l.burst * l.period - _Bucket.debt(l, s, now), 0) // l.period

    @staticmethod
    def expires_at(l: _Limit, s: _State) -> int:
        return _ceil_div(s.tat, l.rate)


def _window_start(now: int, period: int) -> int:
    return now - now % period  # Python's % is never negative for period > 0


class _FixedWindow:
    """Admits while the window's count + cost ≤ rate."""

    @staticmethod
    def count(l: _Limit, s: _State, now: int) -> int:
        return s.count if s.start == _window_start(now, l.period) else 0

    @staticmethod
    def wait(l: _Limit, s: _State, now: int, cost: int) -> int:
        if _FixedWindow.count(l, s, now) + cost <= l.rate:
            return 0
        return _window_start(now, l.period) + l.period - now

    @staticmethod
    def admit(l: _Limit, s: _State, now: int, cost: int) -> _State:
        return _State(start=_window_start(now, l.period), count=_FixedWindow.count(l, s, now) + cost)

    @staticmethod
    def remaining(l: _Limit, s: _State, now: int) -> int:
        return l.rate - _FixedWindow.count(l, s, now)

    @staticmethod
    def expires_at(l: _Limit, s: _State) -> int:
        return 0 if s.count == 0 else s.start + l.period


class _SlidingCounter:
    """Admits while previous×(period − elapsed)/period + current + cost ≤ rate."""

    @staticmethod
    def counts(l: _Limit, s: _State, now: int) -> Tuple[int, int, int]:
        start = _window_start(now, l.period)
        if s.start == start:
            return start, s.previous, s.count
        if s.start == start - l.period:
            return start, s.count, 0
        return start, 0, 0

    @staticmethod
    def elapsed_to_fit(period: int, previous: int, room: int) -> int:
        """The least elapsed e with previous×(period − e) ≤ room×period."""
        return 0 if room >= previous else _ceil_div((previous - room) * period, previous)

    @staticmethod
    def wait(l: _Limit, s: _State, now: int, cost: int) -> int:
        start, previous, current = _SlidingCounter.counts(l, s, now)
        if previous * (l.period - (now - start)) + (current + cost) * l.period <= l.rate * l.period:
            return 0
        room = l.rate - current - cost
        if room >= 0 and previous > 0:
            e = _SlidingCounter.elapsed_to_fit(l.period, previous, room)
            if e < l.period:
                return start + e - now
        following = start + l.period
        if current == 0:
            return following - now
        return following + _SlidingCounter.elapsed_to_fit(l.period, current, l.rate - cost) - now

    @staticmethod
    def admit(l: _Limit, s: _State, now: int, cost: int) -> _State:
        start, previous, current = _SlidingCounter.counts(l, s, now)
        return _State(start=start, previous=previous, count=current + cost)

    @staticmethod
    def remaining(l: _Limit, s: _State, now: int) -> int:
        start, previous, current = _SlidingCounter.counts(l, s, now)
        return max(l.rate - current - _ceil_div(previous * (l.period - (now - start)), l.period), 0)

    @staticmethod
    def expires_at(l: _Limit, s: _State) -> int:
        if s.count > 0:
            return s.start + 2 * l.period
        return s.start + l.period if s.previous > 0 else 0


class _SlidingLog:
    """Keeps one timestamp per admitted unit and admits while those of the
    last period number at most rate − cost."""

    @staticmethod
    def live(l: _Limit, s: _State, now: int) -> Tuple[int, ...]:
        return tuple(t for t in s.log if t > now - l.period)

    @staticmethod
    def wait(l: _Limit, s: _State, now: int, cost: int) -> int:
        live = _SlidingLog.live(l, s, now)
        over = len(live) + cost - l.rate
        return 0 if over <= 0 else live[over - 1] + l.period - now

    @staticmethod
    def admit(l: _Limit, s: _State, now: int, cost: int) -> _State:
        return _State(log=_SlidingLog.live(l, s, now) + (now,) * cost)

    @staticmethod
    def remaining(l: _Limit, s: _State, now: int) -> int:
        return l.rate - len(_SlidingLog.live(l, s, now))

    @staticmethod
    def expires_at(l: _Limit, s: _State) -> int:
        return s.log[-1] + l.period if s.log else 0


_RULES: Dict[str, Any] = {
    "fixed_window": _FixedWindow,
    "sliding_window_counter": _SlidingCounter,
    "sliding_window_log": _SlidingLog,
}


@dataclass(frozen=True)
class _CheckDecision:
    allowed: bool
    limit: int
    remaining: int
    reset_after: int
    retry_after: int
    next: _State


def _decide(l: _Limit, s: _State, now: int, cost: int) -> _CheckDecision:
    """Package algorithms' Decide: a denial leaves the state as it was."""
    rule = _RULES.get(l.algorithm, _Bucket)
    wait = rule.wait(l, s, now, cost)
    following = rule.admit(l, s, now, cost) if wait == 0 and cost > 0 else s
    return _CheckDecision(
        allowed=wait == 0,
        limit=l.capacity,
        remaining=rule.remaining(l, following, now),
        reset_after=max(rule.expires_at(l, following) - now, 0),
        retry_after=wait,
        next=following,
    )


def _invalid(field: str, message: str) -> LimitnodeError:
    return LimitnodeError(f"limitnode: 400 invalid_argument ({field}): {message}", 400, "invalid_argument", field)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _exact_limit(limit: Mapping[str, Any], where: str) -> _Limit:
    """Read a limit as the cluster does, or raise the 400 it would answer."""
    algorithm = limit.get("algorithm", "")
    if algorithm not in _BUCKETS and algorithm not in _WINDOWS:
        raise _invalid(f"{where}.algorithm", f"unknown algorithm {algorithm!r}")
    rate: Any = limit.get("rate")
    if not _is_int(rate) or not 1 <= rate <= _MAX_RATE:
        raise _invalid(f"{where}.rate", f"rate must be an integer from 1 to {_MAX_RATE}")
    period = parse_duration(limit["period"]) if "period" in limit else 1_000_000_000
    if period is None or not _MIN_PERIOD <= period <= _MAX_PERIOD:
        raise _invalid(f"{where}.period", "period must be a Go duration from 1ms to 8760h0m0s")
    if algorithm == "sliding_window_log" and rate > _MAX_LOG_RATE:
        raise _invalid(f"{where}.rate", f"sliding_window_log takes a rate of at most {_MAX_LOG_RATE}")
    if algorithm in _WINDOWS:
        if "burst" in limit:
            raise _invalid(f"{where}.burst", "burst applies to token_bucket, leaky_bucket and gcra")
        return _Limit(algorithm, rate, period, 0)
    burst: Any = limit.get("burst", rate)
    if not _is_int(burst) or not 1 <= burst <= _MAX_RATE:
        raise _invalid(f"{where}.burst", f"burst must be an integer from 1 to {_MAX_RATE}")
    if burst * period // rate > _MAX_FILL:
        raise _invalid(f"{where}.burst", "burst / rate × period (the time to refill an empty bucket) must be at most 50 years")
    return _Limit(algorithm or "token_bucket", rate, period, burst)


def _share_of(l: _Limit, replicas: int) -> _Limit:
    """Divide a limit among replicas, at least one unit each."""
    return replace(l, rate=max(l.rate // replicas, 1), burst=max(l.burst // replicas, 1) if l.is_bucket else 0)


def _at(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


@dataclass
class LocalAnswer:
    """What the local limiter decided, in the API's terms."""

    allowed: bool
    limit: int = 0
    remaining: int = 0
    reset_after_ms: int = 0
    retry_after_ms: int = 0


class LocalLimiter:
    """Decides requests in this process alone, for its share of each limit.
    Its memory is bounded: when ``max_keys`` states are held it drops them
    all and starts over (more permissive for a moment, never unbounded)."""

    def __init__(self, replicas: int, max_keys: int, clock: Callable[[], float]) -> None:
        self._replicas = max(1, int(replicas))
        self._max_keys = max_keys
        self._clock = clock
        self._states: Dict[Tuple[str, _Limit], _State] = {}
        self._lock = threading.Lock()

    def decide(self, req: Mapping[str, Any]) -> LocalAnswer:
        """Answer req from this process's share of its limits, all checks or
        none. A check that names a policy, which only the cluster knows, is
        denied. A request the cluster would refuse raises the same 400."""
        checks: Sequence[Mapping[str, Any]]
        if "checks" in req:
            checks, prefix = req["checks"], "checks[{}]"
        else:
            checks, prefix = [req], ""
        if not 1 <= len(checks) <= _MAX_CHECKS:
            raise _invalid("checks", f"checks must hold 1 to {_MAX_CHECKS} checks")
        now = int(self._clock() * 1e9)
        plan: List[Tuple[Tuple[str, _Limit], _State]] = []
        out: Optional[LocalAnswer] = None
        retry_after = 0
        with self._lock:
            for i, c in enumerate(checks):
                where = prefix.format(i)
                if "policy" in c:
                    return LocalAnswer(allowed=False)  # only the cluster knows the policy: fail closed
                key = c.get("key")
                if not isinstance(key, str) or not 1 <= len(key.encode()) <= _MAX_KEY_BYTES:
                    raise _invalid(_at(where, "key"), f"key is required, 1 to {_MAX_KEY_BYTES} bytes")
                if "limit" not in c:
                    raise _invalid(_at(where, "limit"), "limit is required")
                full = _exact_limit(c["limit"], _at(where, "limit"))
                cost = c.get("cost", 1)
                if not _is_int(cost) or not 0 <= cost <= full.capacity:
                    raise _invalid(_at(where, "cost"), f"cost must be an integer from 0 to {full.capacity}")
                limit = _share_of(full, self._replicas)
                if limit.is_bucket and limit.burst * limit.period // limit.rate > _MAX_FILL:
                    return LocalAnswer(allowed=False)  # the share refills too slowly to be decided exactly
                state_key = (key, limit)
                d = _decide(limit, self._states.get(state_key, _NO_STATE), now, min(cost, limit.capacity))
                if not d.allowed:
                    retry_after = max(retry_after, d.retry_after)
                if out is None or d.remaining < out.remaining:
                    out = LocalAnswer(True, d.limit, d.remaining, _ceil_div(d.reset_after, 1_000_000), 0)
                plan.append((state_key, d.next))
            assert out is not None
            if retry_after > 0:
                out.allowed, out.retry_after_ms = False, _ceil_div(retry_after, 1_000_000)
                return out
            if len(self._states) + len(plan) > self._max_keys:
                self._states.clear()
            for state_key, following in plan:
                self._states[state_key] = following
            return out
