"""The operator's side of the API, as the Limiter calls it: a key's state,
a page of keys and a key's reset; blocks; policies. Reads are retried like
decisions; puts are idempotent; deletions are not sent twice."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence
from urllib.parse import quote, urlencode

from . import _answers
from ._calls import IDEMPOTENT_CALL, ONCE_CALL, READ_CALL, CallKind
from ._types import Block, BlockPage, KeyPage, KeyState, Policy, PolicyPage, PolicyRequest


def _segment(name: str) -> str:
    return quote(name, safe="")


def _query(**params: Any) -> str:
    given = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"?{urlencode(given)}" if given else ""


def _reader(read: _answers.Reader) -> Callable[[Any, int], Any]:
    return lambda v, _status: read(v, "answer")


class Admin:
    """Keys, blocks and policies: the Limiter's calls for operators."""

    def _request(
        self,
        method: str,
        path: str,
        payload: Optional[Dict[str, Any]],
        kind: CallKind,
        ok: Sequence[int],
        read: Callable[[Any, int], Any],
        timeout: Optional[float],
    ) -> Any:
        raise NotImplementedError  # the Limiter's

    def get_key(self, key: str, *, timeout: Optional[float] = None) -> KeyState:
        """What the cluster holds of ``key`` under each limit, consuming
        nothing; a LimitnodeError with status 404 when it holds nothing."""
        return self._request("GET", f"/v1/keys/{_segment(key)}", None, READ_CALL, (200,), _reader(_answers.KEY_STATE), timeout)

    def list_keys(
        self, *, prefix: Optional[str] = None, after: Optional[str] = None, limit: Optional[int] = None, timeout: Optional[float] = None
    ) -> KeyPage:
        """A page of the live keys (sorted) that start with ``prefix`` and sort
        after ``after``, up to ``limit`` (1 to 1,000, default 100), with their
        state; its ``next``, when present, is where the next page starts."""
        path = "/v1/keys" + _query(prefix=prefix, after=after, limit=limit)
        return self._request("GET", path, None, READ_CALL, (200,), _reader(_answers.KEY_PAGE), timeout)

    def reset_key(self, key: str, *, timeout: Optional[float] = None) -> int:
        """Delete ``key``'s state under every limit, on every node (role
        admin), and return how many limits it held state under; a
        LimitnodeError with status 404 when it held none."""
        reset = self._request("DELETE", f"/v1/keys/{_segment(key)}", None, ONCE_CALL, (200,), _reader(_answers.KEY_RESET), timeout)
        return int(reset["limits"])

    def put_block(self, key: str, ttl: str, reason: str = "", *, timeout: Optional[float] = None) -> Block:
        """Block ``key`` for ``ttl`` (a Go duration, 1s to 8784h) of cluster
        time, on every node and path, telling callers ``reason`` (role
        admin). A block the key had is replaced."""
        body: Dict[str, Any] = {"ttl": ttl, "reason": reason} if reason else {"ttl": ttl}
        return self._request("PUT", f"/v1/blocks/{_segment(key)}", body, IDEMPOTENT_CALL, (200,), _reader(_answers.BLOCK), timeout)

    def delete_block(self, key: str, *, timeout: Optional[float] = None) -> Block:
        """Lift ``key``'s block and return it as it was (role admin); a
        LimitnodeError with status 404 when the key is not blocked."""
        return self._request("DELETE", f"/v1/blocks/{_segment(key)}", None, ONCE_CALL, (200,), _reader(_answers.BLOCK), timeout)

    def list_blocks(self, *, after: Optional[str] = None, limit: Optional[int] = None, timeout: Optional[float] = None) -> BlockPage:
        """A page of the blocked keys, sorted, after ``after``, up to ``limit``
        (1 to 1,000, default 100)."""
        path = "/v1/blocks" + _query(after=after, limit=limit)
        return self._request("GET", path, None, READ_CALL, (200,), _reader(_answers.BLOCK_PAGE), timeout)

    def put_policy(self, name: str, policy: PolicyRequest, *, timeout: Optional[float] = None) -> Policy:
        """Create or replace the policy ``name`` (role admin) and return it as stored."""
        return self._request("PUT", f"/v1/policies/{_segment(name)}", dict(policy), IDEMPOTENT_CALL, (200,), _reader(_answers.POLICY), timeout)

    def get_policy(self, name: str, *, timeout: Optional[float] = None) -> Policy:
        """The policy ``name`` as the node has applied it, with its
        ``version`` and ``shadow_denied``; a LimitnodeError with status 404
        when there is none."""
        return self._request("GET", f"/v1/policies/{_segment(name)}", None, READ_CALL, (200,), _reader(_answers.POLICY), timeout)

    def list_policies(self, *, after: Optional[str] = None, limit: Optional[int] = None, timeout: Optional[float] = None) -> PolicyPage:
        """A page of the policies, sorted by name, after ``after``, up to ``limit``."""
        path = "/v1/policies" + _query(after=after, limit=limit)
        return self._request("GET", path, None, READ_CALL, (200,), _reader(_answers.POLICY_PAGE), timeout)

    def delete_policy(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Delete the policy ``name`` (role admin); a LimitnodeError with status 404 when there is none."""
        self._request("DELETE", f"/v1/policies/{_segment(name)}", None, ONCE_CALL, (200,), _reader(_answers.DELETED), timeout)
