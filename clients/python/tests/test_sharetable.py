"""The rule of local shares (limitnode._sharetable), on a clock and timers
the test moves: when a key is asked for, how much, spending until the
deadline, renewing, retiring and giving back, closing. The same walks as the
Go table's tests (internal/sharetable)."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Callable, List, Optional, Tuple

from limitnode._sharetable import Grant, ShareKey, ShareReturn, ShareTable


class FakeClock:
    """A clock the test moves, with the timers the table sets on it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: List[Tuple[float, Callable[[], None]]] = []

    def time(self) -> float:
        return self.now

    def after(self, delay: float, f: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, f))

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def run_due(self) -> None:
        due = [f for at, f in self.timers if at <= self.now]
        self.timers = [(at, f) for at, f in self.timers if at > self.now]
        for f in due:
            f()


def key(cost: int, name: str = "k") -> ShareKey[str]:
    return ShareKey(name, f"{name}'s name", 1.0, 100, cost)


def table(clock: FakeClock, given: Optional[List[List[ShareReturn[str]]]] = None) -> ShareTable[str, str]:
    t: ShareTable[str, str] = ShareTable(clock.time, clock.after)
    if given is not None:
        t.give_back = given.append
    return t


class ShareTableTest(unittest.TestCase):
    def test_a_steady_key_is_answered_from_its_shares(self) -> None:
        """The second request asks; the share answers; a renewal is asked for
        when half spent; the renewal gives back the older share's rest, the
        timer what a share holds with a quarter of its time left, close the
        rest; a closed table asks for nothing."""
        clock = FakeClock()
        given: List[List[ShareReturn[str]]] = []
        t = table(clock, given)
        got = t.take(key(1), 1)
        self.assertEqual((got.answered, got.ask), (False, 0), "the first request is sent as it is")
        got = t.take(key(1), 1)
        self.assertEqual((got.answered, got.ask), (False, 4), "the second asks for twice the 2 units seen")
        t.settle("k", clock.now, Grant("7", 4, 0.5), "template")
        for name, advance, left, renew in [
            ("from the share", 0.01, 3, False),
            ("half spent: a renewal is due", 0, 2, True),
            ("a renewal under way is not asked again", 0, 1, False),
        ]:
            clock.advance(advance)
            got = t.take(key(1), 1)
            self.assertEqual((got.answered, got.left, got.template, got.renew > 0), (True, left, "template", renew), name)
        t.settle("k", clock.now, Grant("8", 10, 0.5), "renewed")
        self.assertEqual(given.pop(0), [ShareReturn("k's name", "7", 1)], "the renewal gives back the unit left of the older share")
        for left in (9, 8):
            got = t.take(key(1), 1)
            self.assertEqual((got.answered, got.template, got.left), (True, "renewed", left))
        clock.advance(0.4)
        self.assertFalse(t.take(key(1), 1).answered, "a share with a quarter of its time left answers no more")
        self.assertEqual(given.pop(0), [ShareReturn("k's name", "8", 8)], "retiring the share gives back its 8 units")

        t.settle("k", clock.now, Grant("9", 6, 0.5), "last")
        t.take(key(2), 1)
        self.assertEqual(t.close(), [ShareReturn("k's name", "9", 4)])
        for name in ("k", "a key first seen after close"):
            t.take(key(1, name), 1)
            got = t.take(key(1, name), 1)
            self.assertEqual((got.answered, got.ask), (False, 0), f"a closed table answers or asks for {name}")
        t.settle("k", clock.now, Grant("10", 3, 0.5), "late")
        self.assertEqual(given, [[ShareReturn("k's name", "10", 3)]], "a share granted after close is given back whole")

    def test_requests_wait_once_for_an_ask_that_brought_a_share_before(self) -> None:
        clock = FakeClock()
        t = table(clock)
        t.take(key(1), 1)
        t.take(key(1), 1)  # asks
        t.settle("k", clock.now, Grant("1", 1, 1.0), "a")
        got = t.take(key(1), 1)
        self.assertTrue(got.answered and got.renew > 0, "spending the share answers, and asks for a renewal")
        waited: List[object] = []
        waiter = threading.Thread(target=lambda: waited.append(t.take(key(1), 5)))
        waiter.start()
        waiter.join(0.05)
        self.assertEqual(waited, [], "answered while an ask was under way")
        t.settle("k", clock.now, Grant("2", 5, 1.0), "b")
        waiter.join(5)
        self.assertEqual([(w.answered, w.template) for w in waited], [(True, "b")], "the waiting request takes from the new share")  # type: ignore[attr-defined]

        # Asks that bring nothing (the renewal, then the ask once the share
        # is spent): the next one is not waited for.
        while True:
            got = t.take(key(1), 1)
            if got.renew > 0:
                t.settle("k", clock.now)
            if not got.answered:
                break
        t.settle("k", clock.now)
        self.assertGreater(t.take(key(1), 1).ask, 0)
        start = time.monotonic()
        got = t.take(key(1), 1)
        self.assertEqual((got.answered, got.ask), (False, 0))
        self.assertLess(time.monotonic() - start, 0.5, "waited for an ask after one that brought nothing")

    def test_a_wait_for_an_ask_ends_at_the_wait_given(self) -> None:
        clock = FakeClock()
        t = table(clock)
        t.take(key(1), 1)
        t.take(key(1), 1)
        t.settle("k", clock.now, Grant("1", 1, 1.0), "a")
        self.assertGreater(t.take(key(1), 1).renew, 0)
        start = time.monotonic()
        got = t.take(key(1), 0.05)
        self.assertEqual((got.answered, got.ask), (False, 0))
        self.assertLess(time.monotonic() - start, 1)

    def test_an_idle_keys_share_is_given_back_while_it_lasts(self) -> None:
        for giving in (True, False):
            with self.subTest(giving=giving):
                clock = FakeClock()
                given: List[List[ShareReturn[str]]] = []
                t = table(clock, given if giving else None)
                t.take(key(1), 1)
                t.take(key(1), 1)
                t.settle("k", clock.now, Grant("1", 10, 0.4), "a")
                t.take(key(3), 1)
                clock.advance(0.299)
                clock.run_due()
                got = t.take(key(1), 1)
                self.assertEqual((got.answered, got.left, got.renew > 0), (True, 6, True), "before its time to retire")
                t.settle("k", clock.now)  # the renewal brought nothing
                clock.advance(0.001)
                clock.run_due()
                if not giving:
                    got = t.take(key(1), 1)
                    self.assertEqual((got.answered, got.left), (True, 5), "past its time to retire, without give_back")
                    clock.advance(0.1)
                    self.assertFalse(t.take(key(1), 1).answered, "at its end")
                    continue
                self.assertEqual(given, [[ShareReturn("k's name", "1", 6)]])
                self.assertFalse(t.take(key(1), 1).answered, "a retired share answered")
                self.assertEqual(t.close(), [], "close gave back again")

    def test_a_share_is_spent_until_its_deadline_from_the_send_and_no_later(self) -> None:
        clock = FakeClock()
        t = table(clock)
        t.take(key(1), 1)
        t.take(key(1), 1)
        # Times in powers of two, exact in floating point.
        sent_at = clock.now
        clock.advance(1 / 32)  # the answer took 31 ms
        t.settle("k", sent_at, Grant("1", 50, 1 / 8), "a")
        clock.advance(1 / 8 - 1 / 32 - 1 / 128)
        self.assertTrue(t.take(key(1), 1).answered, "8 ms before the deadline")
        clock.advance(1 / 128)
        self.assertFalse(t.take(key(1), 0).answered, "at the deadline (with its renewal under way, not waited for)")


if __name__ == "__main__":
    unittest.main()
