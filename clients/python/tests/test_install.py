"""The package installs with pip, offline, from its pyproject.toml: into a
fresh virtual environment, by an interpreter that has the build backend
(setuptools, with wheel where setuptools needs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Optional

PACKAGE = Path(__file__).resolve().parents[1]


def builder() -> Optional[str]:
    """An interpreter that can build the package without the network, or None."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if candidate and os.path.exists(candidate):
            probe = subprocess.run([candidate, "-c", "import setuptools, wheel, pip"], capture_output=True)
            if probe.returncode == 0:
                return candidate
    return None


class InstallTest(unittest.TestCase):
    def test_pip_installs_it_with_its_marker_of_types(self) -> None:
        python = builder()
        if python is None:
            message = "no python3 here has pip, setuptools and wheel to build the package offline"
            if os.environ.get("CI") == "true":
                self.fail(message)
            self.skipTest(message)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed copy, not the tree's
        with tempfile.TemporaryDirectory() as scratch:
            # The package is copied, so that the build leaves nothing in the tree.
            source = Path(scratch) / "src"
            shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
            venv = Path(scratch) / "venv"
            subprocess.run([python, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True, capture_output=True)
            pip = subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", str(source)],
                capture_output=True,
                text=True,
                env=env,
            )
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            check = subprocess.run(
                [str(venv / "bin" / "python"), "-c", "import limitnode, limitnode.wsgi, limitnode.asgi, pathlib; "
                 "print(limitnode.__version__, (pathlib.Path(limitnode.__file__).parent / 'py.typed').exists(), limitnode.__file__)"],
                capture_output=True,
                text=True,
                cwd=scratch,
                env=env,
            )
            self.assertEqual(check.returncode, 0, check.stderr)
            version, typed, where = check.stdout.split()
            self.assertEqual((version, typed), ("0.1.0", "True"))
            self.assertTrue(where.startswith(str(venv)), f"imported from {where}, not the environment")


if __name__ == "__main__":
    unittest.main()
