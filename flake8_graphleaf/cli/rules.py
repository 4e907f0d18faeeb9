"""``graphleaf rules`` (the codes, one line each, with their selection, fix and levels) and
``graphleaf rule CODE`` (a rule's page, its links made into paths or URLs a terminal can open)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..analysis.confidence import RETIRED
from ..analysis.rules import all_rules, levels_of
from ..fix.attach import fix_kinds
from .output import PAGE_LINK, page_link_url, rule_url


def selection_of(code: str) -> str:
    """Whether the default selection reports the rule: every code but the retired one."""
    return "opt-in" if code == RETIRED else "default"


def fix_of(code: str) -> str:
    if code == RETIRED:
        return "its code's"  # the lower levels of the real codes, fixed as those codes are
    kinds = fix_kinds(code)
    return "/".join(kinds) if kinds else "none"


def cmd_rules(args) -> int:
    rules = all_rules()
    rows = [("code", "selected", "fix", "levels", "summary")]
    for code, summary in rules.items():
        levels = levels_of(code)
        rows.append((code, selection_of(code), fix_of(code), "/".join(levels) if levels else "-", summary))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)) + "  " + row[4])
    print(f"\nselected: reported by default, or only when asked for ({RETIRED}: `--confidence low`); "
          "fix: what `graphleaf fix` can apply (unsafe ones with --unsafe-fixes); levels: the confidence "
          "levels its findings can have (the default reports high only). `graphleaf rule CODE` prints a page.")
    return 0


def _target(folder: Path, link: str) -> str:
    """A page's relative link as a terminal can open it: the file, where this is a clone that has
    it, else its URL in the repository. Absolute URLs and in-page anchors stay as they are."""
    if re.match(r"[a-z]+:", link) or link.startswith("#"):
        return link
    local = (folder / link.partition("#")[0]).resolve()
    return str(local) if local.exists() else page_link_url(link)


def terminal_page(text: str, folder: Path) -> str:
    """``[text](link)`` as ``text (target)``, the target a path or a URL (:func:`_target`)."""
    def one(m: re.Match) -> str:
        target = _target(folder, m.group(2))
        return m.group(1) if target == m.group(1) else f"{m.group(1)} ({target})"
    return PAGE_LINK.sub(one, text)


def cmd_rule(args) -> int:
    from importlib.resources import files

    code = args.code.strip().upper()
    rules = all_rules()
    if code not in rules:
        sys.stderr.write(f"graphleaf: unknown rule code {args.code!r}; `graphleaf rules` lists them\n")
        return 2
    page = files("flake8_graphleaf") / "rule_docs" / f"{code}.md"
    try:
        text = page.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, OSError):
        sys.stderr.write(f"graphleaf: {code} ({rules[code]}) has no documentation page installed "
                         f"(flake8_graphleaf/rule_docs/{code}.md is missing)\n")
        return 2
    folder = Path(os.fspath(page)).parent
    text = terminal_page(text, folder).rstrip("\n")
    sys.stdout.write(f"{text}\n\n---\nThis page: {Path(os.fspath(page)).resolve()}\nOnline: {rule_url(code)}\n")
    return 0
