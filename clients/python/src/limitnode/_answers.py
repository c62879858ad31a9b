"""Reading answers strictly: a body is parsed as JSON and held to the shape
its schema in api/openapi.yaml gives (each field present when required, of
its JSON type, integers whole and not negative, booleans JSON booleans), or
it is a MalformedAnswer, never a value made of whatever was there. Fields
the schema does not name are left as they are, so that a newer server's
additions pass through."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

MAX_RETRY_AFTER = 86_400
"""The most a Retry-After is read as: a day, in seconds."""


class MalformedAnswer(Exception):
    """An answer that is not what the API answers."""

    def __init__(self, message: str) -> None:
        super().__init__(f"limitnode: malformed answer: {message}")


Reader = Callable[[Any, str], Any]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def _fail(path: str, want: str, value: Any) -> Any:
    raise MalformedAnswer(f"{path} is {_kind(value)}, not {want}")


def boolean(v: Any, path: str) -> bool:
    return v if isinstance(v, bool) else _fail(path, "a boolean", v)


def string(v: Any, path: str) -> str:
    return v if isinstance(v, str) else _fail(path, "a string", v)


def count(v: Any, path: str) -> int:
    """A whole number from 0 (a JSON boolean is not one)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else _fail(path, "a whole number from 0", v)


def true_only(v: Any, path: str) -> bool:
    return True if v is True else _fail(path, "true", v)


def anything(v: Any, path: str) -> Any:
    return v


def array_of(item: Reader) -> Reader:
    def read(v: Any, path: str) -> List[Any]:
        if not isinstance(v, list):
            return _fail(path, "an array", v)
        for i, x in enumerate(v):
            item(x, f"{path}[{i}]")
        return v

    return read


def map_of(item: Reader) -> Reader:
    def read(v: Any, path: str) -> Dict[str, Any]:
        if not isinstance(v, dict):
            return _fail(path, "an object", v)
        for k, x in v.items():
            item(x, f"{path}.{k}")
        return v

    return read


Field = Tuple[Reader, bool]
"""A field's reader, and whether it is required."""


def req(read: Reader) -> Field:
    return (read, True)


def opt(read: Reader) -> Field:
    return (read, False)


def obj(fields: Mapping[str, Field]) -> Reader:
    """An object with fields; the others are left as they are."""

    def read(v: Any, path: str) -> Dict[str, Any]:
        if not isinstance(v, dict):
            return _fail(path, "an object", v)
        for name, (field_read, required) in fields.items():
            if v.get(name) is None:
                if name in v or required:
                    raise MalformedAnswer(f"{path}.{name} is {'null' if name in v else 'missing'}")
                continue
            field_read(v[name], f"{path}.{name}")
        return v

    return read


LIMIT = obj({"algorithm": opt(string), "rate": req(count), "period": opt(string), "burst": opt(count), "local_shares": opt(anything)})
_CHECK_RESULT = obj(
    {
        "key": req(string),
        "policy": opt(string),
        "shadow": opt(true_only),
        "allowed": req(boolean),
        "limit": req(count),
        "remaining": req(count),
        "reset_after_ms": req(count),
        "retry_after_ms": req(count),
    }
)
_DECISION = obj(
    {
        "allowed": req(boolean),
        "limit": req(count),
        "remaining": req(count),
        "reset_after_ms": req(count),
        "retry_after_ms": req(count),
        "wait_ms": opt(count),
        "held_ms": opt(count),
        "duplicate": opt(true_only),
        "checks": opt(array_of(_CHECK_RESULT)),
        "blocked": opt(obj({"key": opt(string), "reason": opt(string), "penalty": opt(string), "ends_in_ms": req(count)})),
        "denied_by": opt(obj({"check": req(count), "policy": opt(string), "policy_version": opt(count), "limit": req(LIMIT), "cause": req(string)})),
        "settlement_id": opt(string),
        "share": opt(obj({"id": req(string), "units": req(count), "spend_for_ms": req(count), "remaining": req(count)})),
    }
)


def read_decision(v: Any, status: int, path: str = "answer") -> Dict[str, Any]:
    """The body of a /v1/allow answer with status 200 or 429; ``allowed`` must agree with it."""
    d = _DECISION(v, path)
    if d["allowed"] != (status == 200):
        raise MalformedAnswer(f"{path}.allowed is {d['allowed']} with status {status}")
    return d


def read_batch(v: Any, n: int) -> List[Dict[str, Any]]:
    """The body of a /v1/allow/batch answer to n requests."""
    responses = obj({"responses": req(array_of(anything))})(v, "answer")["responses"]
    if len(responses) != n:
        raise MalformedAnswer(f"{len(responses)} answers to a batch of {n}")
    for i, item in enumerate(responses):
        path = f"answer.responses[{i}]"
        status = obj({"status": req(count)})(item, path)["status"]
        if status in (200, 429):
            read_decision(item, status, path)
        else:
            obj({"error": req(string), "code": req(string), "field": opt(string)})(item, path)
    return responses


_LEASE = obj(
    {
        "granted": req(boolean),
        "key": req(string),
        "max": req(count),
        "active": req(count),
        "id": opt(string),
        "waiting": opt(count),
        "expires_in_ms": opt(count),
        "retry_after_ms": opt(count),
        "waited_ms": opt(count),
    }
)


def read_lease(v: Any, status: int) -> Dict[str, Any]:
    """A lease's acquire (200 granted, 429 refused) or renewal answer."""
    lease = _LEASE(v, "answer")
    if lease["granted"] != (status == 200):
        raise MalformedAnswer(f"answer.granted is {lease['granted']} with status {status}")
    if lease["granted"] and "id" not in lease:
        raise MalformedAnswer("answer.id is missing from a granted lease")
    return lease


SETTLEMENT = obj(
    {
        "settlement_id": req(string),
        "reserved": req(count),
        "cost": req(count),
        "refunded": req(count),
        "charged": req(count),
        "forgiven": opt(count),
        "retry_after_ms": opt(count),
        "duplicate": opt(true_only),
    }
)
KEY_STATE = obj(
    {"key": req(string), "limits": req(array_of(obj({"owner": opt(string), "limit": req(LIMIT), "remaining": req(count), "reset_after_ms": req(count)})))}
)
KEY_PAGE = obj({"keys": req(array_of(KEY_STATE)), "next": opt(string)})
KEY_RESET = obj({"reset": req(string), "limits": req(count)})
BLOCK = obj(
    {
        "key": req(string),
        "reason": opt(string),
        "penalty": opt(string),
        "since_unix_ms": req(count),
        "until_unix_ms": req(count),
        "ends_in_ms": req(count),
    }
)
BLOCK_PAGE = obj({"blocks": req(array_of(BLOCK)), "next": opt(string)})
POLICY = obj(
    {
        "name": req(string),
        "limit": req(LIMIT),
        "overrides": opt(map_of(LIMIT)),
        "shadow": req(boolean),
        "key_template": opt(string),
        "local_shares": opt(obj({"ttl": opt(string), "max_units": opt(count)})),
        "shadow_denied": opt(count),
        "version": opt(count),
        "penalty": opt(obj({"denials": req(count), "within": req(string), "block_for": req(string)})),
        "max_debt": opt(count),
    }
)
POLICY_PAGE = obj({"policies": req(array_of(POLICY)), "next": opt(string)})
DELETED = obj({"deleted": req(string)})
SHARE_RETURNED = obj({"returned": req(count)})


def parse_json(body: bytes) -> Any:
    """An answer's body as JSON, or a MalformedAnswer."""
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise MalformedAnswer(f"not JSON: {error}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def retry_after(value: Optional[str]) -> Optional[int]:
    """A Retry-After header as delay-seconds, at most MAX_RETRY_AFTER; None
    for anything else (absent, an HTTP date, a negative or malformed number)."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return min(int(value) if len(value) <= 12 else MAX_RETRY_AFTER, MAX_RETRY_AFTER)
