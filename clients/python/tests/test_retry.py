"""The retry rule against scripted nodes: real HTTP servers on 127.0.0.1
that answer as a node would in each case (a 503 with Retry-After, a
connection cut after the request arrived, a node that never answers), and
as no node should (answers that are not JSON, of the wrong types, endless,
dripped), and a listener that takes connections and never reads them, as
the kernel does for a node stopped with SIGSTOP."""

from __future__ import annotations

import json
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

from limitnode import MAX_ANSWER_BYTES, MAX_RETRY_AFTER, AllowRequest, Decision, Limit, Limiter, LimitnodeError, RetryEvent, UnavailableError

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


def raw(data: bytes, pause: float = 0.0, stop: Optional[threading.Event] = None) -> Script:
    """Write data as the whole answer, status line and all; with pause, a
    byte at a time, pause seconds apart, until stop is set or the client
    goes away."""

    def run(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        try:
            if not pause:
                h.wfile.write(data)
                return
            for i in range(len(data)):
                if stop is not None and stop.is_set():
                    return
                h.wfile.write(data[i : i + 1])
                h.wfile.flush()
                time.sleep(pause)
        except OSError:
            pass

    return run


def endless(written: List[int]) -> Script:
    """Answer 200 and write a JSON string's bytes until the client goes away (or 1 GiB), counting them."""

    def run(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        chunk = b" " * 65536
        try:
            h.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"allowed":true')
            while written[0] < 1 << 30:
                h.wfile.write(chunk)
                written[0] += len(chunk)
        except OSError:
            pass

    return run


def http_answer(status_line: str, body: bytes, headers: str = "Content-Type: application/json\r\n") -> bytes:
    return f"HTTP/1.1 {status_line}\r\n{headers}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


class Hung:
    """A listener that takes connections and never reads nor answers them."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.taken: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.taken.append(conn)

    def stop(self) -> None:
        self.listener.close()
        for conn in self.taken:
            conn.close()


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

    def test_a_request_cut_off_after_it_arrived_goes_to_the_next_node_as_it_was(self) -> None:
        cases: List[Tuple[str, AllowRequest, bool]] = [
            ("a plain request, without a request_id", {"key": "k", "limit": LIMIT}, False),
            ("one with max_wait, with a request_id of the Limiter's own", {"key": "k", "limit": LIMIT, "max_wait": "1s"}, True),
            ("a reservation to settle, with a request_id of the Limiter's own", {"key": "k", "limit": LIMIT, "settle": {"ttl": "1m"}}, True),
            ("one with the caller's request_id, with it", {"key": "k", "limit": LIMIT, "request_id": "mine"}, True),
        ]
        for name, req, with_id in cases:
            with self.subTest(name):
                broken, up = self.node(cut_off), self.node(answer(200, ALLOWED))
                retries: List[RetryEvent] = []
                d = self.limiter([broken.addr, up.addr], on_failure="raise", on_retry=retries.append).allow(req)
                self.assertEqual(d.attempts, 2)
                sent = [b.get("request_id") for b in broken.bodies + up.bodies]
                self.assertEqual(sent, [d.request_id, d.request_id])
                self.assertEqual(d.request_id is not None, with_id)
                if "request_id" in req:
                    self.assertEqual(d.request_id, req["request_id"])
                self.assertEqual([(r.node, r.request_id, r.delay) for r in retries], [(f"http://{broken.addr}", d.request_id, 0)])

    def test_only_a_batchs_reservations_get_a_request_id(self) -> None:
        item = dict(ALLOWED, status=200)
        up = self.node(answer(200, {"responses": [item, item]}))
        plain, waiting = self.limiter([up.addr], on_failure="raise").allow_batch([{"key": "k", "limit": LIMIT}, {"key": "k", "limit": LIMIT, "max_wait": "1s"}])
        sent = up.bodies[0]["requests"]
        self.assertNotIn("request_id", sent[0])
        self.assertTrue(sent[1]["request_id"])
        assert isinstance(plain, Decision) and isinstance(waiting, Decision)
        self.assertEqual((plain.request_id, waiting.request_id), (None, sent[1]["request_id"]))

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

    def test_a_node_that_takes_the_call_and_never_answers_costs_a_third_of_the_timeout(self) -> None:
        hung = Hung()
        self.addCleanup(hung.stop)
        up = self.node(answer(200, ALLOWED))
        limiter = self.limiter([hung.addr, up.addr], on_failure="closed", timeout=1.5)
        start = time.monotonic()
        d = limiter.allow({"key": "k", "limit": LIMIT})
        first = time.monotonic() - start
        self.assertEqual((d.degraded, d.allowed, d.attempts), (False, True, 2), d.cause)
        self.assertTrue(0.45 <= first < 1.2, f"the first call took {first:.2f} s; want about a third of 1.5")
        self.assertGreaterEqual(len(hung.taken), 1, "the hung node was never asked")
        start = time.monotonic()
        again = limiter.allow({"key": "k", "limit": LIMIT})
        self.assertEqual(again.attempts, 1, "the next call went back to the hung node")
        self.assertLess(time.monotonic() - start, 0.4)
        self.assertEqual([b.get("request_id") for b in up.bodies], [None, None])

    def test_a_malformed_decision_is_answered_by_the_failure_policy(self) -> None:
        fields = b'"limit":5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0'
        written = [0]
        cases = {
            "a body that is not JSON": http_answer("200 OK", b"<html>not a decision</html>"),
            "null": http_answer("200 OK", b"null"),
            "an empty object": http_answer("200 OK", b"{}"),
            "allowed as a string": http_answer("200 OK", b'{"allowed":"false",' + fields + b"}"),
            "allowed as a number": http_answer("200 OK", b'{"allowed":1,' + fields + b"}"),
            "a number as a string": http_answer("200 OK", b'{"allowed":true,"limit":"5","remaining":4,"reset_after_ms":100,"retry_after_ms":0}'),
            "a number as a boolean": http_answer("200 OK", b'{"allowed":true,"limit":true,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}'),
            "a fraction": http_answer("200 OK", b'{"allowed":true,"limit":5.5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}'),
            "NaN": http_answer("200 OK", b'{"allowed":true,"limit":NaN,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}'),
            "a negative wait": http_answer("200 OK", b'{"allowed":true,' + fields + b',"wait_ms":-1000}'),
            "checks that are not a list": http_answer("200 OK", b'{"allowed":true,' + fields + b',"checks":{}}'),
            "a denial with status 200": http_answer("200 OK", b'{"allowed":false,' + fields + b"}"),
            "an admission with status 429": http_answer("429 Too Many Requests", b'{"allowed":true,' + fields + b"}"),
            "bytes that are not UTF-8": http_answer("200 OK", b"{\xff\xfe}"),
            "a declared length over the bound": b"HTTP/1.1 200 OK\r\nContent-Length: 3000000000\r\nConnection: close\r\n\r\n{",
            "a redirect": http_answer("302 Found", b"", "Location: /elsewhere\r\n"),
        }
        for name, data in cases.items():
            with self.subTest(answer=name):
                n = self.node(raw(data))
                d = self.limiter([n.addr], on_failure="open", timeout=5).allow({"key": "k", "limit": LIMIT})
                self.assertEqual((d.degraded, d.allowed), (True, True))
                assert isinstance(d.cause, UnavailableError)
                self.assertTrue(d.cause.outcome_unknown)
        with self.subTest(answer="an endless body"):
            n = self.node(endless(written))
            start = time.monotonic()
            d = self.limiter([n.addr], on_failure="open", timeout=5).allow({"key": "k", "limit": LIMIT})
            self.assertEqual((d.degraded, d.allowed), (True, True))
            self.assertLess(time.monotonic() - start, 5)
            self.assertLess(written[0], 4 * MAX_ANSWER_BYTES, "the endless body was read on")

    def test_a_malformed_batch_is_the_failure_policys_and_a_malformed_lease_an_unavailable_error(self) -> None:
        item = b'{"status":200,"allowed":true,"limit":5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}'
        for body in (b"null", b'{"responses":null}', b'{"responses":[' + item + b"]}", b'{"responses":[' + item + b",null]}", b'{"responses":[' + item + b',{"status":"200"}]}'):
            with self.subTest(body=body):
                n = self.node(raw(http_answer("200 OK", body)))
                out = self.limiter([n.addr], on_failure="closed").allow_batch([{"key": "a", "limit": LIMIT}, {"key": "b", "limit": LIMIT}])
                self.assertEqual([(getattr(d, "degraded", None), getattr(d, "allowed", None)) for d in out], [(True, False), (True, False)])
        n = self.node(raw(http_answer("200 OK", b"null")))
        with self.assertRaises(UnavailableError):
            self.limiter([n.addr]).acquire_lease({"key": "k", "max": 1, "ttl": "1s"})

    def test_a_429s_retry_after_is_whole_seconds_at_most_a_day(self) -> None:
        denied = {"allowed": False, "limit": 5, "remaining": 0, "reset_after_ms": 100, "retry_after_ms": 3000}
        for header, want in [("7", 7), ("86401", MAX_RETRY_AFTER), ("99999999999999999999", MAX_RETRY_AFTER), ("-5", 0), ("1.5", 0), ("Wed, 21 Oct 2015 07:28:00 GMT", 0)]:
            with self.subTest(header=header):
                n = self.node(answer(429, denied, {"Retry-After": header}))
                d = self.limiter([n.addr], on_failure="raise").allow({"key": "k", "limit": LIMIT})
                self.assertEqual(d.retry_after_seconds, want)

    def test_a_503_whose_retry_after_is_not_seconds_is_waited_a_second(self) -> None:
        flaky = self.node(answer(503, UNAVAILABLE, {"Retry-After": "-1"}), answer(200, ALLOWED))
        retries: List[RetryEvent] = []
        d = self.limiter([flaky.addr], on_failure="raise", timeout=5, on_retry=retries.append).allow({"key": "k", "limit": LIMIT})
        self.assertTrue(d.allowed)
        self.assertEqual([r.delay for r in retries], [1])

    def test_a_503_sends_the_call_to_the_next_node_at_once(self) -> None:
        down, up = self.node(answer(503, UNAVAILABLE, {"Retry-After": "1"})), self.node(answer(200, ALLOWED))
        retries: List[RetryEvent] = []
        limiter = self.limiter([down.addr, up.addr], on_failure="raise", timeout=5, on_retry=retries.append)
        start = time.monotonic()
        self.assertTrue(limiter.allow({"key": "k", "limit": LIMIT}).allowed)
        self.assertLess(time.monotonic() - start, 0.9, "the call waited out the 503's Retry-After")
        self.assertEqual([r.delay for r in retries], [0])
        self.assertEqual(limiter.allow({"key": "k", "limit": LIMIT}).attempts, 1, "the node that answered 503 was preferred")
        self.assertEqual(len(down.bodies), 1)

    def test_a_dripped_answer_ends_at_the_timeout(self) -> None:
        stop = threading.Event()
        self.addCleanup(stop.set)
        whole = http_answer("200 OK", json.dumps(ALLOWED).encode())
        head, body = whole.split(b"\r\n\r\n", 1)
        for name, script in {"headers": raw(whole, pause=0.1, stop=stop), "body": _then_drip(head + b"\r\n\r\n", body, stop)}.items():
            with self.subTest(dripped=name):
                n = self.node(script)
                start = time.monotonic()
                d = self.limiter([n.addr], on_failure="closed", timeout=0.6).allow({"key": "k", "limit": LIMIT})
                took = time.monotonic() - start
                self.assertEqual((d.degraded, d.allowed), (True, False))
                self.assertLess(took, 1.5, f"a dripped answer held the call {took:.1f} s")


def _then_drip(head: bytes, body: bytes, stop: threading.Event) -> Script:
    """Write head at once, then body a byte every 0.1 s."""

    def run(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        try:
            h.wfile.write(head)
            h.wfile.flush()
        except OSError:
            return
        raw(body, pause=0.1, stop=stop)(h)

    return run


if __name__ == "__main__":
    unittest.main()
