"""Running the ``graphleaf`` CLI as a user does (a subprocess in a project folder), and reading
its concise output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def graphleaf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def codes(out: str) -> list[str]:
    """``path:line:col: CODE`` of each finding line of concise (or flake8) output, sorted."""
    return sorted(" ".join(line.split(" ", 2)[:2]) for line in out.splitlines() if ": GLF" in line)
