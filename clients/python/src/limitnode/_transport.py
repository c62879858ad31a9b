"""One HTTP exchange with one node, and what its failure means: a request
that provably never left (the connection could not be opened) may go to the
next node as it is; one that may have reached a node has an unknown
outcome, and only a request the cluster deduplicates may be sent again.

Connections are kept alive, a few per node. One taken from the pool is
first checked for readability without waiting: an idle connection that
has something to read is one the node closed (it restarted, or timed the
connection out), and is replaced instead of being written to, which would
leave the outcome unknown."""

from __future__ import annotations

import http.client
import select
import ssl
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Union
from urllib.parse import urlsplit

_POOL_PER_NODE = 8


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


Attempt = Union[Answer, NotSent, Unknown]


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
        """Send one request and read its whole answer, within timeout
        seconds per blocking step. It never raises for the network: a failure
        is a NotSent or an Unknown."""
        conn = self._take(url)
        if conn is None:
            conn = self._dial(url, timeout)
            try:
                conn.connect()
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                return NotSent(error)
        elif conn.sock is not None:
            conn.sock.settimeout(timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            return Unknown(error)
        if resp.will_close:
            conn.close()
        else:
            self._give_back(url, conn)
        return Answer(resp.status, resp.headers, data)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
