"""The Python blocks of docs/python.md and of this package's README, as they
stand: each runs against a real cluster (the README's addresses
127.0.0.1:7001-7003 replaced by the cluster's) and must print what its
"# prints:" comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import List, Tuple

from .cluster import REPO_ROOT, Cluster

PACKAGE = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / "docs" / "python.md", PACKAGE / "README.md"]


def examples() -> List[Tuple[str, str, List[str]]]:
    """Each ```python block of the pages: its name, its source, and what it says it prints."""
    out = []
    for page in PAGES:
        label = "docs" if page.parent.name == "docs" else "readme"
        for i, source in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)):
            out.append((f"{label}-{i + 1}", source, re.findall(r"^\s*# prints: (.*)$", source, re.M)))
    return out


class DocsTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.stop()

    def test_every_example_prints_what_it_says(self) -> None:
        found = examples()
        self.assertGreaterEqual(len(found), 11)
        a, b, c = self.cluster.addresses()
        env = dict(os.environ, PYTHONPATH=str(PACKAGE / "src"))
        with tempfile.TemporaryDirectory() as scratch:
            for name, source, prints in found:
                with self.subTest(example=name):
                    self.assertTrue(prints, f"{name} says nothing of what it prints")
                    source = source.replace("127.0.0.1:7001", a).replace("127.0.0.1:7002", b).replace("127.0.0.1:7003", c)
                    script = Path(scratch) / f"{name.replace('-', '_')}.py"
                    script.write_text(source)
                    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=scratch)
                    self.assertEqual(run.returncode, 0, f"{name} failed:\n{run.stderr}")
                    self.assertEqual(run.stdout.rstrip("\n").split("\n"), prints, f"{name}'s output:\n{run.stdout}")


if __name__ == "__main__":
    unittest.main()
