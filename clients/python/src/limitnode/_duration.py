"""Go durations ("500ms", "1m30s"), the API's spelling of every length of
time, read exactly as integer nanoseconds, as Go's time.ParseDuration does."""

from __future__ import annotations

import re
from typing import Optional

_UNIT_NANOS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # µ, as Go spells it
    "\u03bcs": 1_000,  # μ, which Go accepts too
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}

_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(text: str) -> Optional[int]:
    """Return the nanoseconds of a Go duration, or None when text is not one.
    Fractions below a nanosecond are dropped, as Go drops them."""
    rest, sign = text, 1
    if rest[:1] in ("-", "+"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if rest == "":
        return None
    total = 0
    while rest:
        m = _PART.match(rest)
        if m is None or (m.group(1) == "" and not m.group(2)):
            return None
        unit = _UNIT_NANOS[m.group(3)]
        total += int(m.group(1) or "0") * unit
        if m.group(2):
            total += int(m.group(2)) * unit // 10 ** len(m.group(2))
        rest = rest[m.end():]
    return sign * total


def duration_seconds(text: str) -> Optional[float]:
    """Return a Go duration in seconds, or None when text is not one."""
    nanos = parse_duration(text)
    return None if nanos is None else nanos / 1e9
