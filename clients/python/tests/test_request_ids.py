"""Which requests carry a request_id, against a real three-node cluster
with API tokens whose callers may hold only 20 IDs at once
(-max-request-ids-per-caller; without tokens every caller is one, bound by
the cluster's million):
plain decisions carry none, so they never spend that memory and their
denials may be answered from deny leases; reservations carry one of the
Limiter's own, and past the bound a new one is refused."""

from __future__ import annotations

import unittest
from typing import Any, List

from limitnode import AllowRequest, Decision, Limit, Limiter, UnavailableError

from .cluster import Cluster

MAX_IDS = 20


class RequestIDsTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster.start(flags=["-max-request-ids-per-caller", str(MAX_IDS)], tokens={"service": ["decide"]})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.stop()

    def limiter(self, nodes: List[str], **kwargs: Any) -> Limiter:
        limiter = Limiter(nodes, on_failure="raise", token=self.cluster.token("service"), **kwargs)
        self.addCleanup(limiter.close)
        return limiter

    def test_1_plain_requests_are_decided_past_the_bound_they_carry_no_request_id(self) -> None:
        limiter = self.limiter(self.cluster.addresses())
        limit: Limit = {"rate": 1000, "period": "1h"}
        for i in range(3 * MAX_IDS):
            d = limiter.allow({"key": "plain", "limit": limit})
            self.assertEqual((d.allowed, d.request_id), (True, None), f"request {i + 1}")
        batch = limiter.allow_batch([{"key": "plain-batch", "limit": limit}] * (MAX_IDS + 1))
        self.assertTrue(all(isinstance(d, Decision) and d.allowed and d.request_id is None for d in batch), batch)

    def test_2_repeated_denials_of_a_plain_request_come_from_a_deny_lease_where_they_arrive(self) -> None:
        follower = self.cluster.followers()[0]
        limiter = self.limiter([follower.http])
        req: AllowRequest = {"key": "spent", "limit": {"rate": 1, "period": "1h"}}
        self.assertTrue(limiter.allow(req).allowed)
        denials = [limiter.allow(req) for _ in range(5)]
        self.assertTrue(all(not d.allowed and not d.degraded for d in denials))
        self.assertTrue(any(d.leased and d.leader is None for d in denials), [(d.leased, d.leader) for d in denials])

    def test_3_reservations_get_a_request_id_of_their_own_which_the_bound_counts(self) -> None:
        limiter = self.limiter(self.cluster.addresses(), timeout=0.5)
        paced: AllowRequest = {"key": "paced", "limit": {"algorithm": "gcra", "rate": 1000, "period": "1s", "burst": 1000}}
        ids = set()
        for i in range(MAX_IDS):
            d = limiter.allow(dict(paced, max_wait="1s"))  # type: ignore[misc]
            self.assertTrue(d.allowed)
            self.assertTrue(d.request_id is not None and d.request_id not in ids, f"request {i + 1}'s request_id: {d.request_id}")
            ids.add(d.request_id)
        with self.assertRaises(UnavailableError) as refused:
            limiter.allow(dict(paced, max_wait="1s"))  # type: ignore[misc]
        self.assertEqual((refused.exception.status, refused.exception.field), (503, "request_id"))
        self.assertTrue(limiter.allow(paced).allowed, "a plain request needs no ID")


if __name__ == "__main__":
    unittest.main()
