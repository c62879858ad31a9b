"""One HTTP exchange with one node, and what its failure means: a request
that provably never left (the connection could not be opened) may go to the
next node as it is; one that may have reached a node has an unknown
outcome, and only a request the cluster deduplicates may be sent again.

Connections are kept alive, a few per node. One taken from the pool is
first checked for readability without waiting: an idle connection that
has something to read is one the node closed (it restarted, or timed the
connection out), and is replaced instead of being written to, which would
leave the outcome unknown.

An exchange has one deadline for all of it: connecting, sending, the
status line and headers, and the body. Every read from the socket waits at
most what is left of it, so a node that drips its answer a byte at a time
cannot stretch the call. The body is read up to MAX_ANSWER_BYTES: a longer
answer is malformed, read no further."""

from __future__ import annotations

import functools
import http.client
import io
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union
from urllib.parse import urlsplit

from ._answers import MalformedAnswer

_POOL_PER_NODE = 8

MAX_ANSWER_BYTES = 8 << 20
"""The most of an answer's body a client reads: 8 MiB."""


@dataclass
class Answer:
    """A node's whole answer."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes


@dataclass
class NotSent:
    """The request never left: the connection could not be opened."""

    error: BaseException


@dataclass
class Unknown:
    """The request may have reached the node, which did not answer it."""

    error: BaseException


@dataclass
class Malformed:
    """The node answered something that is not an answer (over MAX_ANSWER_BYTES)."""

    error: MalformedAnswer


Attempt = Union[Answer, NotSent, Unknown, Malformed]


class _DeadlineIO(io.RawIOBase):
    """A socket's reading side that gives each read what is left until a
    deadline. It holds the socket's file that http.client made (``held``),
    and closes it when it closes: while a file of a socket is open, closing
    the connection leaves the socket open for the answer to be read."""

    def __init__(self, sock: socket.socket, deadline: float, held: io.IOBase) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._held = held

    def close(self) -> None:
        self._held.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole answer within the timeout")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _DeadlineResponse(http.client.HTTPResponse):
    """An HTTPResponse that reads its status line, headers and body by a deadline."""

    def __init__(self, sock: socket.socket, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(_DeadlineIO(sock, deadline, self.fp))


def base_url(address: str) -> str:
    """Turn "host:port" into "http://host:port"; a URL stays as given, less a trailing slash."""
    url = address if address.startswith(("http://", "https://")) else f"http://{address}"
    return url.rstrip("/")


def _is_stale(conn: http.client.HTTPConnection) -> bool:
    """Report whether an idle connection has been closed by its node."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Pool:
    """Keep-alive connections to the nodes, safe for many threads."""

    def __init__(self, ssl_context: Optional[ssl.SSLContext]) -> None:
        self._ssl = ssl_context
        self._idle: Dict[str, List[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def _take(self, url: str) -> Optional[http.client.HTTPConnection]:
        with self._lock:
            idle = self._idle.get(url, [])
            while idle:
                conn = idle.pop()
                if not _is_stale(conn):
                    return conn
                conn.close()
        return None

    def _give_back(self, url: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(url, [])
            if len(idle) < _POOL_PER_NODE:
                idle.append(conn)
                return
        conn.close()

    def _dial(self, url: str, timeout: float) -> http.client.HTTPConnection:
        parts = urlsplit(url)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname or "", parts.port or 443, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=timeout)

    def exchange(self, url: str, method: str, path: str, body: Optional[bytes], headers: Dict[str, str], timeout: float) -> Attempt:
        """Send one request and read its whole answer, all of it within
        timeout seconds. It never raises for the network: a failure is a
        NotSent, an Unknown or a Malformed."""
        deadline = time.monotonic() + timeout
        conn = self._take(url)
        if conn is None:
            conn = self._dial(url, timeout)
            try:
                conn.connect()
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                return NotSent(error)
        try:
            left = deadline - time.monotonic()
            if conn.sock is None or left <= 0:
                raise TimeoutError("no time left to send the request")
            conn.sock.settimeout(left)
            conn.response_class = functools.partial(_DeadlineResponse, deadline=deadline)  # type: ignore[assignment]
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            return Unknown(error)
        try:
            return self._read(resp, url)
        finally:
            # A connection is reused only once its answer was read whole.
            if resp.will_close or not resp.isclosed():
                resp.close()
                conn.close()
            else:
                self._give_back(url, conn)

    @staticmethod
    def _read(resp: http.client.HTTPResponse, url: str) -> Attempt:
        """Read an answer's body, at most MAX_ANSWER_BYTES of it."""
        try:
            if resp.length is not None and resp.length > MAX_ANSWER_BYTES:
                return Malformed(MalformedAnswer(f"an answer of {resp.length} bytes from {url}, over {MAX_ANSWER_BYTES}"))
            data = resp.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as error:
            return Unknown(error)
        if len(data) > MAX_ANSWER_BYTES:
            return Malformed(MalformedAnswer(f"an answer over {MAX_ANSWER_BYTES} bytes from {url}"))
        return Answer(resp.status, resp.headers, data)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
