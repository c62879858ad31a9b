from __future__ import annotations

import unittest

from limitnode._duration import parse_duration


class DurationTest(unittest.TestCase):
    def test_go_durations_read_as_go_reads_them(self) -> None:
        cases = [
            ("0", 0),
            ("300ms", 300_000_000),
            ("1m30s", 90_000_000_000),
            ("1.5h", 5_400_000_000_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("2\u00b5s", 2_000),
            ("-1s", -1_000_000_000),
            ("8760h", 31_536_000_000_000_000),
            ("", None),
            ("1", None),
            ("1d", None),
            ("s", None),
            (".s", None),
            ("1s ", None),
        ]
        for text, want in cases:
            with self.subTest(text=text):
                self.assertEqual(parse_duration(text), want)


if __name__ == "__main__":
    unittest.main()
