"""``graphleaf rules`` (the codes, one line each) and ``graphleaf rule CODE`` (a rule's page)."""

from __future__ import annotations

import sys

from ..analysis.rules import all_rules


def cmd_rules(args) -> int:
    rules = all_rules()
    width = max(len(c) for c in rules)
    for code, summary in rules.items():
        print(f"{code:<{width}}  {summary}")
    return 0


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
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
