"""The local fallback's decisions, on a clock the test sets: the cluster's
algorithms, for this process's share of each limit."""

from __future__ import annotations

import unittest
from typing import Any, Dict, List, Tuple

from limitnode import LimitnodeError
from limitnode._local import LocalLimiter

BUCKET = {"rate": 10, "period": "1s"}


def key(limit: Dict[str, Any]) -> Dict[str, Any]:
    return {"key": "k", "limit": limit}


# A step: at seconds on the clock, req is answered (allowed, remaining, retry_after_ms).
Step = Tuple[float, Dict[str, Any], Tuple[bool, int, int]]

CASES: List[Tuple[str, int, List[Step]]] = [
    (
        "a token bucket admits its burst at once, then one unit every period/rate",
        1,
        [*((1.0, key(BUCKET), (True, 9 - i, 0)) for i in range(10)), (1.0, key(BUCKET), (False, 0, 100)), (1.1, key(BUCKET), (True, 0, 0))],
    ),
    (
        "gcra and the leaky bucket decide as the token bucket does",
        1,
        [
            (1.0, key({**BUCKET, "algorithm": "gcra", "burst": 1}), (True, 0, 0)),
            (1.05, key({**BUCKET, "algorithm": "gcra", "burst": 1}), (False, 0, 50)),
            (1.0, key({**BUCKET, "algorithm": "leaky_bucket", "burst": 1}), (True, 0, 0)),
            (1.1, key({**BUCKET, "algorithm": "leaky_bucket", "burst": 1}), (True, 0, 0)),
        ],
    ),
    (
        "a fixed window admits rate per window and refills at the next one",
        1,
        [
            (1.5, key({"algorithm": "fixed_window", "rate": 2, "period": "1s"}), (True, 1, 0)),
            (1.6, key({"algorithm": "fixed_window", "rate": 2, "period": "1s"}), (True, 0, 0)),
            (1.7, key({"algorithm": "fixed_window", "rate": 2, "period": "1s"}), (False, 0, 300)),
            (2.0, key({"algorithm": "fixed_window", "rate": 2, "period": "1s"}), (True, 1, 0)),
        ],
    ),
    (
        "a sliding window log admits rate in any period",
        1,
        [
            (10.0, key({"algorithm": "sliding_window_log", "rate": 2, "period": "1s"}), (True, 1, 0)),
            (10.4, key({"algorithm": "sliding_window_log", "rate": 2, "period": "1s"}), (True, 0, 0)),
            (10.5, key({"algorithm": "sliding_window_log", "rate": 2, "period": "1s"}), (False, 0, 500)),
            (11.0, key({"algorithm": "sliding_window_log", "rate": 2, "period": "1s"}), (True, 0, 0)),
        ],
    ),
    (
        "a sliding window counter weighs the previous window by its overlap",
        1,
        [
            *((1.0, key({"algorithm": "sliding_window_counter", "rate": 10, "period": "1s"}), (True, 9 - i, 0)) for i in range(10)),
            *((2.5, key({"algorithm": "sliding_window_counter", "rate": 10, "period": "1s"}), (True, 4 - i, 0)) for i in range(5)),
            (2.5, key({"algorithm": "sliding_window_counter", "rate": 10, "period": "1s"}), (False, 0, 100)),
        ],
    ),
    (
        "two replicas each enforce half of a limit",
        2,
        [*((1.0, key(BUCKET), (True, 4 - i, 0)) for i in range(5)), (1.0, key(BUCKET), (False, 0, 200))],
    ),
    (
        "checks are decided together: a denial consumes none of them",
        1,
        [
            (1.0, {"checks": [{"key": "a", "limit": {"rate": 1, "period": "1m"}}, {"key": "b", "limit": {"rate": 5, "period": "1m"}}]}, (True, 0, 0)),
            (1.0, {"checks": [{"key": "a", "limit": {"rate": 1, "period": "1m"}}, {"key": "b", "limit": {"rate": 5, "period": "1m"}}]}, (False, 0, 60_000)),
            (1.0, {"key": "b", "limit": {"rate": 5, "period": "1m"}}, (True, 3, 0)),
        ],
    ),
    ("a policy, which only the cluster knows, is denied", 1, [(1.0, {"key": "k", "policy": "per-user"}, (False, 0, 0))]),
]


class LocalFallbackTest(unittest.TestCase):
    def test_decisions(self) -> None:
        for name, replicas, steps in CASES:
            with self.subTest(name):
                now = [0.0]
                local = LocalLimiter(replicas, 1000, lambda: now[0])
                for i, (at, req, want) in enumerate(steps):
                    now[0] = at
                    d = local.decide(req)
                    self.assertEqual((d.allowed, d.remaining, d.retry_after_ms), want, f"step {i}")

    def test_it_forgets_every_key_when_it_holds_too_many(self) -> None:
        local = LocalLimiter(1, 2, lambda: 1.0)
        one = {"rate": 1, "period": "1h"}
        self.assertEqual([local.decide({"key": k, "limit": one}).allowed for k in "aabca"], [True, False, True, True, True])

    def test_it_refuses_what_the_cluster_refuses_naming_the_field(self) -> None:
        refusals = [
            ("a cost above the capacity", {"key": "k", "limit": {"rate": 5}, "cost": 6}, "cost"),
            ("a window algorithm with a burst", {"key": "k", "limit": {"algorithm": "fixed_window", "rate": 5, "burst": 5}}, "limit.burst"),
            ("a period that is not a Go duration", {"key": "k", "limit": {"rate": 5, "period": "5 minutes"}}, "limit.period"),
            ("a rate of 0 in a check", {"checks": [{"key": "a", "limit": {"rate": 1}}, {"key": "b", "limit": {"rate": 0}}]}, "checks[1].limit.rate"),
            ("no key", {"limit": {"rate": 1}}, "key"),
        ]
        for what, req, field in refusals:
            with self.subTest(what):
                with self.assertRaises(LimitnodeError) as caught:
                    LocalLimiter(1, 10, lambda: 1.0).decide(req)
                self.assertEqual((caught.exception.status, caught.exception.field), (400, field))


if __name__ == "__main__":
    unittest.main()
