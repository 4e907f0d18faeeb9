"""The output examples of docs/cli.md, made by running the commands they show.

Each example in docs/cli.md is a marker comment naming a command, then a fenced block with what
it printed (stdout, then stderr, as a terminal shows them):

    <!-- example: graphleaf check --output-format concise fixtures/example/ -->

``python docs/cli_examples.py`` runs every command from the repository root and rewrites the
blocks, and the output README.md shows under its first command (the flake8 run on the example,
tests/test_repo.py); ``--check`` only says which differ (exit 1), as tests/test_cli_docs.py does. Two things
are made shorter, and the page says so: this checkout's path becomes /path/to/flake8-graphleaf,
and in SARIF each rule's help (its page) is cut to its first line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
README = ROOT / "README.md"
# README's first command, then the block with what it prints
README_BLOCK = re.compile(r"(```sh\n(?P<cmd>.+?)\n```\n.*?```text\n)(?P<body>.*?)(```)", re.S)
MARKER = re.compile(r"(<!-- example: (?P<cmd>.+?) -->\n```(?P<lang>\w*)\n)(?P<body>.*?)(```)", re.S)
SHOWN_ROOT = "/path/to/flake8-graphleaf"


def _shorten_sarif(text: str) -> str:
    doc = json.loads(text)
    for rule in doc["runs"][0]["tool"]["driver"]["rules"]:
        for key in ("text", "markdown"):
            first = rule["help"][key].splitlines()[0]
            rule["help"][key] = f"{first} … (the rule's page, cut here)"
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def output_of(command: str) -> str:
    words = shlex.split(command)
    assert words[0] == "graphleaf", command
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", *words[1:], "--no-cache"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    out = r.stdout
    if "sarif" in words:
        out = _shorten_sarif(out)
    out = out + r.stderr
    return out.replace(str(ROOT), SHOWN_ROOT)


def regenerate(text: str) -> str:
    return MARKER.sub(lambda m: m.group(1) + output_of(m.group("cmd")) + m.group(5), text)


def readme_output(command: str) -> str:
    """What README's first command prints: its last part, the flake8 run (the install before it is
    this environment's)."""
    words = shlex.split(command.split("&&")[-1])
    r = subprocess.run([sys.executable, "-m", *words], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return r.stdout


def regenerate_readme(text: str) -> str:
    return README_BLOCK.sub(lambda m: m.group(1) + readme_output(m.group("cmd")) + m.group(4), text, count=1)


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    new = regenerate(text)
    readme = README.read_text(encoding="utf-8")
    new_readme = regenerate_readme(readme)
    if "--check" in argv:
        stale = [f"docs/cli.md: the output shown for `{m.group('cmd')}` is not what it prints now"
                 for m, n in zip(MARKER.finditer(text), MARKER.finditer(new)) if m.group("body") != n.group("body")]
        if new_readme != readme:
            stale.append("README.md: the output shown under the first command is not what it prints now")
        for line in stale:
            print(line)
        return 1 if stale else 0
    DOC.write_text(new, encoding="utf-8")
    README.write_text(new_readme, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
