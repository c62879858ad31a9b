"""The retry rule against scripted nodes: real HTTP servers on 127.0.0.1
that answer as a node would in each case (a 503 with Retry-After, a
connection cut after the request arrived, a node that never answers)."""

from __future__ import annotations

import json
import socket
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional

from limitnode import Limit, Limiter, LimitnodeError, RetryEvent, UnavailableError

ALLOWED = {"allowed": True, "limit": 10, "remaining": 9, "reset_after_ms": 100, "retry_after_ms": 0}
UNAVAILABLE = {"error": "no leader could be reached in time; retry", "code": "unavailable"}
LIMIT: Limit = {"rate": 10, "period": "1s"}

Script = Callable[[BaseHTTPRequestHandler], object]


def answer(status: int, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> Script:
    def run(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    return run


def cut_off(h: BaseHTTPRequestHandler) -> None:
    h.close_connection = True
    h.connection.shutdown(socket.SHUT_RDWR)


class Node:
    """A scripted node: it answers its nth request with scripts[n], the last script after that."""

    def __init__(self, *scripts: Script) -> None:
        self.bodies: List[Dict[str, Any]] = []
        node = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                node.bodies.append(json.loads(raw) if raw else {})
                scripts[min(len(node.bodies), len(scripts)) - 1](self)

            do_POST = do_DELETE = handle_one

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.addr = f"127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_address() -> str:
    """An address nothing listens on: a port the OS gave and took back."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class RetryRuleTest(unittest.TestCase):
    def node(self, *scripts: Script) -> Node:
        n = Node(*scripts)
        self.addCleanup(n.stop)
        return n

    def limiter(self, nodes: List[str], **kwargs: Any) -> Limiter:
        limiter = Limiter(nodes, **kwargs)
        self.addCleanup(limiter.close)
        return limiter

    def test_a_node_that_refuses_the_connection_is_passed_at_once(self) -> None:
        up = self.node(answer(200, ALLOWED))
        retries: List[RetryEvent] = []
        d = self.limiter([closed_address(), up.addr], on_failure="raise", on_retry=retries.append).allow({"key": "k", "limit": LIMIT})
        self.assertEqual((d.allowed, d.attempts), (True, 2))
        self.assertEqual(retries, [], "a request that never left is no retry")

    def test_a_request_cut_off_after_it_arrived_goes_to_the_next_node_with_the_same_request_id(self) -> None:
        broken, up = self.node(cut_off), self.node(answer(200, ALLOWED))
        retries: List[RetryEvent] = []
        d = self.limiter([broken.addr, up.addr], on_failure="raise", on_retry=retries.append).allow({"key": "k", "limit": LIMIT})
        self.assertEqual(d.attempts, 2)
        self.assertEqual([b["request_id"] for b in broken.bodies + up.bodies], [d.request_id, d.request_id])
        self.assertEqual([(r.node, r.request_id, r.delay) for r in retries], [(f"http://{broken.addr}", d.request_id, 0)])

    def test_a_503_is_waited_out_then_retried_with_the_same_request_id(self) -> None:
        flaky = self.node(answer(503, UNAVAILABLE, {"Retry-After": "1"}), answer(200, ALLOWED))
        retries: List[RetryEvent] = []
        d = self.limiter([flaky.addr], on_failure="raise", timeout=5, on_retry=retries.append).allow({"key": "k", "limit": LIMIT, "request_id": "mine"})
        self.assertTrue(d.allowed)
        self.assertEqual([b["request_id"] for b in flaky.bodies], ["mine", "mine"])
        self.assertEqual([r.delay for r in retries], [1])

    def test_a_retry_after_past_the_timeout_gives_up_at_once(self) -> None:
        down = self.node(answer(503, UNAVAILABLE, {"Retry-After": "1"}))
        with self.assertRaises(UnavailableError) as caught:
            self.limiter([down.addr], on_failure="raise", timeout=0.5).allow({"key": "k", "limit": LIMIT})
        self.assertEqual((caught.exception.status, caught.exception.code), (503, "unavailable"))
        self.assertEqual(len(down.bodies), 1)

    def test_no_answer_in_time_is_answered_by_the_failure_policy(self) -> None:
        released = threading.Event()
        silent = self.node(lambda h: released.wait(30))
        self.addCleanup(released.set)
        d = self.limiter([silent.addr], on_failure="open", timeout=0.3).allow({"key": "k", "limit": LIMIT})
        self.assertEqual((d.allowed, d.degraded), (True, True))
        assert isinstance(d.cause, UnavailableError)
        self.assertTrue(d.cause.outcome_unknown)

    def test_a_lease_is_not_acquired_twice_after_an_unknown_outcome(self) -> None:
        granted = {"granted": True, "id": "l1", "key": "k", "max": 1, "active": 1, "expires_in_ms": 1000, "retry_after_ms": 0}
        broken, up = self.node(cut_off), self.node(answer(200, granted))
        with self.assertRaises(UnavailableError) as caught:
            self.limiter([broken.addr, up.addr]).acquire_lease({"key": "k", "max": 1, "ttl": "1s"})
        self.assertTrue(caught.exception.outcome_unknown)
        self.assertEqual(up.bodies, [])

    def test_a_release_retried_after_an_unknown_outcome_that_finds_no_lease_is_done(self) -> None:
        broken = self.node(cut_off)
        up = self.node(answer(404, {"error": "no lease l1", "code": "not_found", "field": "id"}))
        self.limiter([broken.addr, up.addr]).release_lease("l1")
        self.assertEqual(len(up.bodies), 1)
        with self.assertRaises(LimitnodeError) as caught:
            self.limiter([up.addr]).release_lease("l1")  # no retry: the 404 stands
        self.assertEqual(caught.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
