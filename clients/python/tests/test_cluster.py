"""The client against a real three-node cluster, in the order of the test
names: answers from a follower, denials with their headers, batches,
leases, both middlewares, the types against the served OpenAPI document,
reserve then settle, waiting for capacity, keys, blocks and policies, a
follower stopped with SIGSTOP, then a leader killed mid-traffic, then a
cluster without a quorum answered by each failure policy. The last two
change the cluster, so they come last."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import typing
import unittest
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional
from wsgiref.simple_server import WSGIRequestHandler, make_server

import limitnode
from limitnode import Limiter, LimitnodeError, RetryEvent, UnavailableError
from limitnode.asgi import RateLimitMiddleware as ASGIRateLimit
from limitnode.wsgi import RateLimitMiddleware as WSGIRateLimit

from .cluster import Cluster, get_json, wait_for

# A counter: a bucket of 100,000 that refills 100,000 a year, so a test's charges are what it spent.
COUNTER: limitnode.Limit = {"rate": 100_000, "period": "8760h", "burst": 100_000}


def spent(limiter: Limiter, key: str) -> int:
    """How much of COUNTER the key has used, asked with cost 0."""
    return 100_000 - limiter.allow({"key": key, "limit": COUNTER, "cost": 0}).remaining


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class ClusterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.stop()

    def limiter(self, nodes: Optional[List[str]] = None, **kwargs: Any) -> Limiter:
        kwargs.setdefault("on_failure", "raise")
        limiter = Limiter(nodes if nodes is not None else self.cluster.addresses(), **kwargs)
        self.addCleanup(limiter.close)
        return limiter

    def test_01_a_follower_answers_with_the_leaders_decision(self) -> None:
        leader = self.cluster.leader()
        follower = self.cluster.followers()[0]
        d = self.limiter([follower.http]).allow({"key": "follower", "limit": {"rate": 10, "period": "1m"}})
        self.assertEqual((d.allowed, d.status, d.remaining, d.degraded, d.attempts), (True, 200, 9, False, 1))
        self.assertEqual(d.leader, leader.id)
        self.assertEqual(d.headers["RateLimit-Remaining"], "9")
        self.assertAlmostEqual(d.reset_at, time.time() + d.reset_after_ms / 1000, delta=1)

    def test_02_a_denial_is_a_429_with_the_headers_the_cluster_sent(self) -> None:
        limiter = self.limiter()
        limit: limitnode.Limit = {"rate": 2, "period": "1m"}
        for _ in range(2):
            limiter.allow({"key": "denied", "limit": limit})
        d = limiter.allow({"key": "denied", "limit": limit})
        self.assertEqual((d.allowed, d.status), (False, 429))
        self.assertTrue(0 < d.retry_after_ms <= 60_000)
        self.assertGreaterEqual(d.retry_after_seconds, -(-d.retry_after_ms // 1000), "Retry-After is early")
        self.assertEqual(d.headers["Retry-After"], str(d.retry_after_seconds))
        self.assertEqual(d.headers["RateLimit-Limit"], "2")
        self.assertEqual(d.headers["RateLimit-Remaining"], "0")
        self.assertEqual(d.headers["RateLimit-Policy"], '"default";q=2;w=60')
        self.assertRegex(d.headers["RateLimit"], r'^"default";r=0;t=\d+$')

    def test_03_a_request_id_is_charged_once(self) -> None:
        limiter = self.limiter(self.cluster.addresses()[::-1])
        req: limitnode.AllowRequest = {"key": "repeat", "limit": COUNTER, "request_id": "repeat-1"}
        first, again = limiter.allow(req), limiter.allow(req)
        self.assertEqual((first.duplicate, again.duplicate), (False, True))
        self.assertEqual(again.remaining, first.remaining)
        self.assertEqual(spent(limiter, "repeat"), 1)

    def test_04_a_batch_is_decided_item_by_item(self) -> None:
        limit: limitnode.Limit = {"rate": 1, "period": "1m"}
        first, second, bad = self.limiter().allow_batch(
            [{"key": "batch", "limit": limit}, {"key": "batch", "limit": limit}, {"key": "batch-bad", "limit": {"rate": 0}}]
        )
        assert isinstance(first, limitnode.Decision) and isinstance(second, limitnode.Decision)
        self.assertEqual((first.allowed, first.status, second.allowed, second.status), (True, 200, False, 429))
        self.assertGreaterEqual(second.retry_after_seconds, 1)
        assert isinstance(bad, LimitnodeError)
        self.assertEqual((bad.status, bad.code, bad.field), (400, "invalid_argument", "limit.rate"))

    def test_05_an_invalid_request_is_refused_whatever_the_failure_policy(self) -> None:
        with self.assertRaises(LimitnodeError) as caught:
            self.limiter(on_failure="open").allow({"key": "bad", "limit": {"rate": 10, "period": "soon"}})
        self.assertNotIsInstance(caught.exception, UnavailableError)
        self.assertEqual((caught.exception.status, caught.exception.field), (400, "limit.period"))

    def test_06_leases_are_acquired_refused_renewed_queued_and_released(self) -> None:
        limiter = self.limiter()
        req: limitnode.LeaseRequest = {"key": "reports", "max": 1, "ttl": "30s"}
        held = limiter.acquire_lease(req)
        self.assertTrue(held.granted)
        refused = limiter.acquire_lease(req)
        self.assertFalse(refused.granted)
        self.assertTrue(refused.retry_after_seconds >= 1 and refused.active == 1)
        self.assertGreater(limiter.renew_lease(held.id, "2m").expires_in_ms, 60_000)

        # A waiter in the queue is granted the slot once it is given back.
        result: List[str] = []

        def wait_in_queue() -> None:
            with limiter.lease({**req, "max_wait": "20s", "max_queue": 5}) as lease:
                result.append(f"built under {lease.id}")

        waiter = threading.Thread(target=wait_in_queue)
        waiter.start()
        wait_for("the waiter in the queue", lambda: len(get_json(self.cluster.addresses()[0], "/v1/leases?key=reports")[1]["waiting"]) == 1)
        limiter.release_lease(held.id)
        waiter.join(30)
        self.assertEqual(len(result), 1)
        with self.assertRaises(LimitnodeError) as caught:
            limiter.release_lease(held.id)
        self.assertEqual(caught.exception.status, 404)
        again = limiter.acquire_lease(req)  # the block gave its lease back: the slot is free
        self.assertTrue(again.granted)
        limiter.release_lease(again.id)

    def test_07_a_lease_given_back_elsewhere_is_lost(self) -> None:
        limiter, other = self.limiter(), self.limiter(self.cluster.addresses()[::-1])

        def listed() -> List[Dict[str, Any]]:
            return get_json(self.cluster.addresses()[1], "/v1/leases?key=lost")[1]["leases"]

        with self.assertRaises(limitnode.LeaseLostError):
            with limiter.lease({"key": "lost", "max": 1, "ttl": "3s"}) as held:
                wait_for("the lease to be held", lambda: len(listed()) == 1)
                other.release_lease(listed()[0]["id"])
                self.assertTrue(held.lost.wait(10), "no renewal found the lease gone")

    def test_08_the_wsgi_middleware_answers_a_denial_with_the_clusters_headers(self) -> None:
        def app(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"served\n"]

        def request(environ: Dict[str, Any]) -> Optional[limitnode.AllowRequest]:
            if environ["PATH_INFO"] == "/healthz":
                return None
            return {"key": f"wsgi:{environ.get('HTTP_X_API_KEY')}", "limit": {"rate": 1, "period": "1m"}}

        server = make_server("127.0.0.1", 0, WSGIRateLimit(app, self.limiter(), request), handler_class=_QuietHandler)
        self.addCleanup(server.server_close)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_port}"

        def get(path: str) -> Any:
            try:
                return urllib.request.urlopen(urllib.request.Request(url + path, headers={"X-API-Key": "k1"}), timeout=10)
            except urllib.error.HTTPError as error:
                return error

        ok = get("/export")
        self.assertEqual((ok.status, ok.read()), (200, b"served\n"))
        self.assertEqual(ok.headers["RateLimit-Remaining"], "0")
        self.assertIsNone(ok.headers["Retry-After"])
        denied = get("/export")
        self.assertEqual(denied.status, 429)
        self.assertEqual(denied.headers["RateLimit-Limit"], "1")
        self.assertEqual(denied.headers["RateLimit-Policy"], '"default";q=1;w=60')
        self.assertGreaterEqual(int(denied.headers["Retry-After"]), 1)
        self.assertIsNone(denied.headers["X-Limitnode-Degraded"])
        self.assertIsNone(denied.headers["Limitnode-Denied-By"], "an internal header reached the end client")
        body = json.loads(denied.read())
        self.assertEqual(sorted(body), ["allowed", "denied_by", "limit", "remaining", "reset_after_ms", "retry_after_ms"])
        self.assertEqual(body["denied_by"], {"check": 0, "limit": {"algorithm": "token_bucket", "rate": 1, "period": "1m0s", "burst": 1}, "cause": "limit"})
        self.assertEqual(get("/healthz").status, 200)  # not limited

        # A blocked key: what denied it and why, and never the key.
        admin = self.limiter()
        admin.put_block("wsgi:k-blocked", "1m", "chargeback under review")
        self.addCleanup(admin.delete_block, "wsgi:k-blocked")
        blocked = urllib.request.Request(url + "/export", headers={"X-API-Key": "k-blocked"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(blocked, timeout=10)
        self.assertEqual(refused.exception.code, 429)
        self.assertIsNone(refused.exception.headers["Limitnode-Denied-By"])
        text = refused.exception.read().decode()
        self.assertNotIn("k-blocked", text, "the key reached the end client")
        why = json.loads(text)
        self.assertEqual((why["blocked"]["reason"], why["denied_by"]["cause"]), ("chargeback under review", "block"))
        self.assertGreater(why["blocked"]["ends_in_ms"], 0)

    def test_09_the_asgi_middleware_answers_a_denial_with_the_clusters_headers(self) -> None:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"served\n"})

        async def request(scope: Any) -> limitnode.AllowRequest:
            key = dict(scope["headers"]).get(b"x-api-key", b"").decode()
            return {"key": f"asgi:{key}", "limit": {"rate": 1, "period": "1m"}}

        limited = ASGIRateLimit(app, self.limiter(), request)

        async def get() -> List[Dict[str, Any]]:
            sent: List[Dict[str, Any]] = []

            async def receive() -> Dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: Any) -> None:
                sent.append(message)

            scope = {"type": "http", "method": "GET", "path": "/export", "headers": [(b"x-api-key", b"k1")]}
            await limited(scope, receive, send)
            return sent

        ok, denied = asyncio.run(get()), asyncio.run(get())
        self.assertEqual((ok[0]["status"], ok[1]["body"]), (200, b"served\n"))
        self.assertEqual(dict(ok[0]["headers"])[b"ratelimit-remaining"], b"0")
        self.assertNotIn(b"retry-after", dict(ok[0]["headers"]))
        headers = dict(denied[0]["headers"])
        self.assertEqual(denied[0]["status"], 429)
        self.assertEqual(headers[b"ratelimit-policy"], b'"default";q=1;w=60')
        self.assertGreaterEqual(int(headers[b"retry-after"]), 1)
        self.assertNotIn(b"limitnode-denied-by", headers)
        body = json.loads(denied[1]["body"])
        self.assertEqual((body["allowed"], body["denied_by"]["cause"], "checks" in body), (False, "limit", False))

    def test_10_the_types_are_the_served_openapi_documents(self) -> None:
        status, doc = get_json(self.cluster.addresses()[0], "/v1/openapi.json")
        self.assertEqual(status, 200)
        schemas = doc["components"]["schemas"]
        for typed, name in [
            (limitnode.Limit, "Limit"),
            (limitnode.Check, "Check"),
            (limitnode.AllowRequest, "AllowRequest"),
            (limitnode.LeaseRequest, "LeaseRequest"),
            (limitnode.CheckResult, "CheckResult"),
            (limitnode.Settlement, "Settlement"),
            (limitnode.KeyLimit, "KeyLimit"),
            (limitnode.KeyState, "KeyState"),
            (limitnode.KeyPage, "KeyPage"),
            (limitnode.Block, "Block"),
            (limitnode.BlockPage, "BlockPage"),
            (limitnode.Penalty, "Penalty"),
            (limitnode.PolicyRequest, "PolicyRequest"),
            (limitnode.Policy, "Policy"),
            (limitnode.PolicyPage, "PolicyList"),
        ]:
            with self.subTest(schema=name):
                self.assertEqual(set(typing.get_type_hints(typed)), set(schemas[name]["properties"]))
                self.assertEqual(set(typed.__required_keys__), set(schemas[name].get("required", [])))
        fields = {f.name for f in dataclasses.fields(limitnode.Decision)}
        self.assertLessEqual(set(schemas["AllowResponse"]["properties"]), fields)
        lease_fields = {f.name for f in dataclasses.fields(limitnode.Lease)}
        self.assertLessEqual(set(schemas["LeaseGranted"]["properties"]) | set(schemas["LeaseDenied"]["properties"]), lease_fields)

    def test_11_a_reservation_is_settled_once_giving_back_what_it_did_not_use(self) -> None:
        limiter = self.limiter()
        limiter.put_policy("tokens", {"limit": {"rate": 3600, "period": "1h", "burst": 1000}, "max_debt": 100})
        res = limiter.reserve({"policy": "tokens", "key": "acme", "cost": 500}, "1m")
        self.assertTrue(res.decision.allowed and res.decision.settlement_id, res.decision)
        s = res.settle(120)
        assert s is not None
        self.assertEqual((s["reserved"], s["cost"], s["refunded"], s["charged"], s.get("duplicate")), (500, 120, 380, 0, None))
        left = limiter.allow({"policy": "tokens", "key": "acme", "cost": 0}).remaining
        self.assertTrue(880 <= left <= 900, f"{left} left after the refund, want 880 and what refilled since")
        again = res.settle(120)
        assert again is not None
        self.assertEqual((again.get("duplicate"), again["refunded"]), (True, 380))
        with self.assertRaises(LimitnodeError) as conflict:
            res.settle(130)
        self.assertEqual((conflict.exception.status, conflict.exception.field), (409, "settlement_id"))
        with self.assertRaises(LimitnodeError) as unknown:
            limiter.settle("s0.0", 1)
        self.assertEqual(unknown.exception.status, 404)

        # More than reserved: charged into debt up to max_debt, the key denied until repaid.
        over = limiter.reserve({"policy": "tokens", "key": "bob", "cost": 900}, "1m").settle(1300)
        assert over is not None
        self.assertTrue(over["charged"] >= 200 and over["charged"] + over.get("forgiven", 0) == 400, over)
        denied = limiter.allow({"policy": "tokens", "key": "bob"})
        self.assertFalse(denied.allowed)
        self.assertGreaterEqual(denied.retry_after_seconds, 90)
        # A denied reservation has nothing to settle.
        none = limiter.reserve({"policy": "tokens", "key": "bob", "cost": 1}, "1m")
        self.assertFalse(none.decision.allowed)
        self.assertIsNone(none.settle(0))

    def test_12_wait_sleeps_out_a_reservation_within_max_wait(self) -> None:
        limiter = self.limiter()
        req: limitnode.AllowRequest = {"key": "paced", "limit": {"algorithm": "gcra", "rate": 1, "period": "2s", "burst": 1}}
        start = time.monotonic()  # before the burst: the next unit is due 2 s after it
        self.assertTrue(limiter.allow(req).allowed)
        self.assertFalse(limiter.wait(req, 0.001).allowed)
        d = limiter.wait(req, 3)
        took = time.monotonic() - start
        self.assertEqual((d.allowed, d.wait_ms), (True, 0))
        self.assertGreaterEqual(took, 1.99, "admitted before the next unit was due")
        with self.assertRaises(LimitnodeError) as caught:
            limiter.wait({"key": "window", "limit": {"algorithm": "fixed_window", "rate": 1}}, 1)
        self.assertEqual(caught.exception.field, "max_wait")

    def test_13_keys_are_read_listed_and_reset(self) -> None:
        limiter = self.limiter()
        limit: limitnode.Limit = {"rate": 10, "period": "1h"}
        limiter.allow({"key": "keys:a", "limit": limit, "cost": 3})
        limiter.allow({"key": "keys:b", "limit": limit})
        a = limiter.get_key("keys:a")
        self.assertEqual((a["key"], len(a["limits"]), a["limits"][0]["remaining"]), ("keys:a", 1, 7))
        self.assertNotIn("owner", a["limits"][0])
        page = limiter.list_keys(prefix="keys:", limit=1)
        self.assertEqual(([k["key"] for k in page["keys"]], page.get("next")), (["keys:a"], "keys:a"))
        rest = limiter.list_keys(prefix="keys:", after=page["next"])
        self.assertEqual([k["key"] for k in rest["keys"]], ["keys:b"])
        self.assertEqual(limiter.reset_key("keys:a"), 1)
        with self.assertRaises(LimitnodeError) as gone:
            limiter.get_key("keys:a")
        self.assertEqual(gone.exception.status, 404)
        self.assertEqual(limiter.allow({"key": "keys:a", "limit": limit}).remaining, 9)
        with self.assertRaises(LimitnodeError) as never:
            limiter.reset_key("keys:never")
        self.assertEqual(never.exception.status, 404)

    def test_14_a_block_denies_on_every_node_until_it_is_lifted(self) -> None:
        limiter = self.limiter()
        block = limiter.put_block("api-key:scraper", "10m", "scraping the catalogue")
        self.assertEqual((block["key"], block.get("reason")), ("api-key:scraper", "scraping the catalogue"))
        self.assertGreater(block["ends_in_ms"], 590_000)
        self.assertAlmostEqual(block["until_unix_ms"] - block["since_unix_ms"], 600_000, delta=1)
        for addr in self.cluster.addresses():
            d = self.limiter([addr]).allow({"key": "api-key:scraper", "limit": {"rate": 100, "period": "1m"}})
            self.assertFalse(d.allowed)
            assert d.blocked is not None and d.denied_by is not None
            self.assertEqual((d.blocked.get("reason"), d.denied_by["cause"]), ("scraping the catalogue", "block"))
        self.assertIn("api-key:scraper", [b["key"] for b in limiter.list_blocks(limit=100)["blocks"]])
        self.assertEqual(limiter.delete_block("api-key:scraper").get("reason"), "scraping the catalogue")
        self.assertTrue(limiter.allow({"key": "api-key:scraper", "limit": {"rate": 100, "period": "1m"}}).allowed)
        with self.assertRaises(LimitnodeError) as lifted:
            limiter.delete_block("api-key:scraper")
        self.assertEqual(lifted.exception.status, 404)
        with self.assertRaises(LimitnodeError) as short:
            limiter.put_block("k", "1ms")
        self.assertEqual((short.exception.status, short.exception.field), (400, "ttl"))

    def test_15_policies_are_put_read_listed_and_deleted(self) -> None:
        limiter = self.limiter()
        put = limiter.put_policy(
            "per-tenant",
            {"limit": {"rate": 100, "period": "1m"}, "overrides": {"tenant=big": {"rate": 1000, "period": "1m"}}, "key_template": "{tenant}:{route}"},
        )
        self.assertEqual((put["name"], put["limit"].get("algorithm")), ("per-tenant", "token_bucket"))
        self.assertEqual(limiter.allow({"policy": "per-tenant", "dimensions": {"tenant": "big", "route": "/x"}}).limit, 1000)
        got = limiter.get_policy("per-tenant")
        self.assertGreater(got.get("version", 0), 0)
        self.assertEqual(got.get("key_template"), "{tenant}:{route}")
        self.assertIn("per-tenant", [p["name"] for p in limiter.list_policies(limit=1000)["policies"]])
        limiter.delete_policy("per-tenant")
        with self.assertRaises(LimitnodeError) as gone:
            limiter.get_policy("per-tenant")
        self.assertEqual(gone.exception.status, 404)
        with self.assertRaises(LimitnodeError) as bad:
            limiter.put_policy("bad", {"limit": {"rate": 0}})
        self.assertEqual(bad.exception.field, "limit.rate")

    def test_16_a_follower_stopped_with_sigstop_costs_a_third_of_the_timeout_once(self) -> None:
        leader = self.cluster.leader()
        stopped, *others = self.cluster.followers()
        self.cluster.pause(stopped)
        self.addCleanup(self.cluster.resume, stopped)
        retries: List[RetryEvent] = []
        limiter = self.limiter([stopped.http, leader.http, *(n.http for n in others)], on_failure="closed", timeout=2, on_retry=retries.append)
        for i in range(5):
            start = time.monotonic()
            d = limiter.allow({"key": "behind-a-stopped-node", "limit": {"rate": 10, "period": "1h"}})
            took = time.monotonic() - start
            self.assertEqual((d.degraded, d.remaining), (False, 9 - i), f"call {i + 1}: {d.cause}")
            if i == 0:
                self.assertGreaterEqual(took, 0.6, f"the first call never waited for the stopped node: {d}, retries {retries}")
            else:
                self.assertLess(took, 0.6, f"call {i + 1} went back to the stopped node")

    def test_17_an_unknown_outcome_is_retried_with_the_same_request_id_when_the_leader_is_killed(self) -> None:
        leader = self.cluster.leader()
        followers = self.cluster.followers()
        nodes = [leader.http, *(f.http for f in followers)]

        # One request the leader holds open: a reservation it waits out
        # (hold), charged on a counter too. The leader is killed while it
        # holds it, so the client cannot know whether it was decided.
        spacing: limitnode.Limit = {"algorithm": "gcra", "rate": 1, "period": "2s", "burst": 1}
        watcher = self.limiter([f.http for f in followers], timeout=20)
        watcher.allow({"key": "held", "limit": spacing})
        retries: List[RetryEvent] = []
        client = self.limiter(nodes, timeout=20, on_retry=retries.append)
        held: List[limitnode.Decision] = []
        holder = threading.Thread(
            target=lambda: held.append(
                client.allow(
                    {"checks": [{"key": "held", "limit": spacing}, {"key": "held-counter", "limit": COUNTER}], "max_wait": "10s", "hold": True}
                )
            )
        )
        holder.start()

        # Traffic through every node while it happens: plain requests, which
        # carry no request_id, so that each retry may have cost one unit more.
        stop = threading.Event()
        allowed: List[int] = []
        failures: List[BaseException] = []
        traffic_retries: List[RetryEvent] = []
        traffic = self.limiter(nodes, timeout=20, on_retry=traffic_retries.append)

        def work() -> None:
            try:
                while not stop.is_set():
                    d = traffic.allow({"key": "traffic", "limit": COUNTER})
                    if d.allowed:
                        allowed.append(1)
            except BaseException as error:
                failures.append(error)

        workers = [threading.Thread(target=work) for _ in range(4)]
        for w in workers:
            w.start()
        wait_for("the held request to be decided", lambda: spent(watcher, "held-counter") == 1)
        self.cluster.kill(leader)
        holder.join(30)
        before = len(allowed)
        wait_for("traffic after the new leader", lambda: len(allowed) > before + 20 or bool(failures))
        stop.set()
        for w in workers:
            w.join(30)

        self.assertEqual(failures, [])
        self.assertEqual(len(held), 1, "the held request got no answer")
        d = held[0]
        self.assertTrue(d.allowed)
        self.assertTrue(d.duplicate, "the retry was not answered with the first decision")
        self.assertGreaterEqual(d.attempts, 2)
        self.assertGreaterEqual(len(retries), 1)
        self.assertEqual(retries[0].node, f"http://{leader.http}")
        self.assertEqual({r.request_id for r in retries}, {d.request_id}, "a retry carried another request_id")
        self.assertEqual(spent(watcher, "held-counter"), 1, "the held request was charged more than once")
        traffic_spent = spent(watcher, "traffic")
        self.assertTrue(
            len(allowed) <= traffic_spent <= len(allowed) + len(traffic_retries),
            f"the traffic spent {traffic_spent} for {len(allowed)} admitted with {len(traffic_retries)} retries",
        )

    def test_18_a_cluster_without_a_quorum_is_answered_by_the_failure_policy(self) -> None:
        # One node of three left: it answers, but cannot decide.
        doomed, survivor = self.cluster.live()
        self.cluster.kill(doomed)
        dead = [n.http for n in self.cluster.nodes if n is not survivor]
        limit: limitnode.Limit = {"rate": 4, "period": "1h"}

        def ask(on_failure: limitnode.FailurePolicy, nodes: List[str]) -> limitnode.Decision:
            return self.limiter(nodes, on_failure=on_failure, timeout=0.8).allow({"key": "no-quorum", "limit": limit})

        closed = ask("closed", [survivor.http, *dead])
        self.assertEqual((closed.allowed, closed.status, closed.degraded), (False, 429, True))
        self.assertIsInstance(closed.cause, UnavailableError)
        self.assertEqual(closed.headers["X-Limitnode-Degraded"], "true")
        self.assertEqual(closed.headers["Retry-After"], "1")

        opened = ask("open", [*dead, survivor.http])
        self.assertEqual((opened.allowed, opened.degraded), (True, True))

        with self.assertRaises(UnavailableError) as reached:
            ask("raise", [survivor.http])
        self.assertTrue(reached.exception.outcome_unknown)  # the request reached the survivor
        with self.assertRaises(UnavailableError) as unreachable:
            ask("raise", dead)
        self.assertFalse(unreachable.exception.outcome_unknown)  # no node could be reached

        # Two replicas share the limit: each may pass 2 of the 4 alone.
        local = self.limiter(dead, on_failure="local", replicas=2)
        answers = [local.allow({"key": "no-quorum", "limit": limit}) for _ in range(3)]
        self.assertEqual(
            [(a.allowed, a.degraded, a.limit, a.remaining) for a in answers], [(True, True, 2, 1), (True, True, 2, 0), (False, True, 2, 0)]
        )
        self.assertGreater(answers[2].retry_after_ms, 0)
        self.assertEqual(answers[2].headers["RateLimit-Limit"], "2")
        with self.assertRaises(LimitnodeError) as caught:
            local.allow({"key": "no-quorum", "limit": {"rate": 4, "period": "1h", "algorithm": "fixed_window", "burst": 2}})
        self.assertEqual((caught.exception.status, caught.exception.field), (400, "limit.burst"))


if __name__ == "__main__":
    unittest.main()
