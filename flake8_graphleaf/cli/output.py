"""Output formats for ``graphleaf check``: text, concise, json, sarif, github.

``text`` and ``concise`` print the line flake8 prints (``path:line:col: CODE message``,
col = ast col_offset + 1) so the two front ends agree.  ``json``, ``sarif`` and
``github`` count columns in characters (1-based), as ruff, SARIF ("unicodeCodePoints")
and GitHub do; that differs from flake8's count only on lines with non-ASCII text
before the finding.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from itertools import repeat
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ..analysis.witness import lines as witness_lines
from ..analysis.confidence import LEVELS, precision_words
from ..analysis.findings import SAFE, Finding

FORMATS = ("text", "concise", "json", "sarif", "github")
EDIT_FORMATS = ("json", "sarif")  # the formats that show each fix's edits
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# The repository (pyproject.toml's [project.urls] Repository, tested) and its documents on the main branch;
# each rule's page is there (docs/rules/ holds the same pages as rule_docs/).
REPO_URL = "https://github.com/flake8-graphleaf/flake8-graphleaf"
DOCS_URL = REPO_URL + "/blob/main/"
RULE_URL = DOCS_URL + "docs/rules/{code}.md"

# SARIF "precision" (GitHub code scanning): how often a finding of the rule is right,
# from the review of torch, timm, transformers and lightning in docs/precision.md.
PRECISION = {"GLF101": "very-high", "GLF102": "very-high", "GLF900": "very-high",
             "GLF103": "medium", "GLF202": "medium"}
TAGS = {"GLF0": ["correctness", "pytorch", "deepcopy"], "GLF1": ["deprecated-api", "pytorch", "deepcopy"],
        "GLF2": ["correctness", "pytorch", "deepcopy"], "GLF9": ["syntax"]}


def rule_url(code: str) -> str:
    return RULE_URL.format(code=code)


# Where the pages are in the repository; their relative links start there.
PAGES = "flake8_graphleaf/rule_docs"
PAGE_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def page_link_url(link: str) -> str:
    """A rule page's link as a URL: a relative one made into its address in the repository."""
    if re.match(r"[a-z]+:", link) or link.startswith("#"):
        return link
    path, _, anchor = link.partition("#")
    return DOCS_URL + posixpath.normpath(posixpath.join(PAGES, path)) + (f"#{anchor}" if anchor else "")


@lru_cache(maxsize=None)
def rule_page(code: str) -> tuple[str, str]:
    """(markdown of the rule's page, its "What it does" text as one paragraph); empty
    strings when the page is not installed."""
    try:
        text = (files("flake8_graphleaf") / "rule_docs" / f"{code}.md").read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, OSError):
        return "", ""
    what = ""
    m = re.search(r"^## What it does\s*\n(.*?)(?:\n\s*\n|\n## )", text, re.S | re.M)
    if m:
        what = " ".join(m.group(1).split())
    return text, what


@dataclass
class FileReport:
    path: str  # as shown to the user
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # one line, for GLF900
    error_line: int = 1
    error_col: int = 0  # 0-based, as flake8 gives E999 (SyntaxError.offset)
    lines: list[str] = field(default_factory=list)  # the analysed text's lines, for columns and context
    refused: bool = False  # could not be read at all: not counted as checked
    internal: bool = False  # a bug of graphleaf's (exit 2)


def error_finding(message: str, line: int = 1, col: int = 0) -> Finding:
    return Finding(code="GLF900", line=line, col=col, message=message)


def all_findings(reports: list[FileReport]) -> list[tuple[FileReport, Finding]]:
    out = []
    for r in reports:
        if r.error is not None:
            out.append((r, error_finding(r.error, r.error_line, r.error_col)))
        out += [(r, f) for f in r.findings]
    return out


def char_col(report: FileReport, line: int, byte_col: int | None) -> int:
    """A 0-based UTF-8 byte column (ast) as a 0-based character column."""
    if byte_col is None:
        return 0
    if 1 <= line <= len(report.lines):
        text = report.lines[line - 1]
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))
    return byte_col


def start_col(report: FileReport, f: Finding) -> int:
    """The 1-based character column of json, sarif and github.  A parse error's is
    ``SyntaxError.offset`` (ruff's column), where flake8's text shows offset + 1."""
    if f.code == "GLF900":
        return max(1, f.col)
    return char_col(report, f.line, f.col) + 1


def flake8_line(report: FileReport, f: Finding) -> str:
    return f"{report.path}:{f.line}:{f.col + 1}: {f.code} {f.message}"


def fix_hint(f: Finding, unsafe_enabled: bool) -> str | None:
    if f.fix is None:
        return None
    if f.fix.applicability == SAFE:
        return f"fix: {f.fix.description} (safe: `graphleaf fix`)"
    if unsafe_enabled:
        return f"fix: {f.fix.description} (unsafe: `graphleaf fix` applies it, as unsafe-fixes is on)"
    return f"fix: {f.fix.description} (unsafe: `graphleaf fix --unsafe-fixes`)"


def render_text(reports: list[FileReport], unsafe_enabled: bool, concise: bool, show_witness: bool = False) -> str:
    out = []
    for report, f in all_findings(reports):
        out.append(flake8_line(report, f))
        if show_witness and f.witness:
            out += [f"    {line}" for line in witness_lines(f.witness)]
        if concise:
            continue
        if f.code != "GLF900" and 1 <= f.line <= len(report.lines):
            src = report.lines[f.line - 1].rstrip("\n")
            start = char_col(report, f.line, f.col)
            width = 1
            if f.end_line == f.line and f.end_col is not None:
                width = max(1, char_col(report, f.line, f.end_col) - start)
            out.append(f"    {f.line:>4} | {src}")
            out.append(f"         | {' ' * start}{'^' * width}")
        hint = fix_hint(f, unsafe_enabled)
        if hint:
            out.append(f"         = {hint}")
    return "".join(line + "\n" for line in out)


def _loc(row: int, col: int) -> dict:
    return {"row": row, "column": col}


def render_json(reports: list[FileReport]) -> str:
    items = []
    for report, f in all_findings(reports):
        start = start_col(report, f)
        end_line = f.end_line or f.line
        end = char_col(report, end_line, f.end_col) + 1 if f.end_col is not None else start
        fix = None
        if f.fix is not None:
            fix = {
                "applicability": f.fix.applicability,
                "message": f.fix.description,
                "edits": [
                    {
                        "content": e.content,
                        "location": _loc(e.line, e.col + 1),
                        "end_location": _loc(e.end_line, e.end_col + 1),
                    }
                    for e in f.fix.edits
                ],
            }
        items.append({
            "code": f.code,
            "message": f.message,
            "filename": os.path.abspath(report.path) if report.path != "-" else report.path,
            "location": _loc(f.line, start),
            "end_location": _loc(end_line, end),
            "fix": fix,
            "url": rule_url(f.code),
            "noqa_row": f.line,
            "confidence": f.confidence,
            "trust": list(f.trust),
            "witness": f.witness,
        })
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _uri(path: str) -> str:
    p = Path(path)
    if not p.is_absolute():
        rel = os.path.relpath(os.path.abspath(path))
        if not rel.startswith(".."):
            return quote(Path(rel).as_posix())
    return Path(os.path.abspath(path)).as_uri()


def _step_uri(uri: str, path: str | None) -> str:
    """A witness step's file: the finding's (``uri``), or the other file of the program it is in."""
    return uri if path is None else _uri(os.path.relpath(path))  # relative under the working directory, as the finding's


def _region(start_line: int, start_col: int, end_line: int, end_col: int) -> dict:
    return {"startLine": start_line, "startColumn": start_col, "endLine": end_line, "endColumn": end_col}


def render_sarif(reports: list[FileReport], rules: dict[str, str]) -> str:
    # the rules the results name, once each (as ruff does): a rule's help is a page, not a line
    rule_ids = sorted({f.code for _, f in all_findings(reports)} & set(rules))
    index = {code: i for i, code in enumerate(rule_ids)}
    results = []
    for report, f in all_findings(reports):
        uri = _uri(report.path) if report.path != "-" else "stdin"
        start = start_col(report, f)
        end_line = f.end_line or f.line
        end = char_col(report, end_line, f.end_col) + 1 if f.end_col is not None else start
        result = {
            "ruleId": f.code,
            "level": "error",
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": _region(f.line, start, end_line, max(end, start) if end_line == f.line else end),
                }
            }],
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        # how sure: the level (CodeQL's words) and the measured precision it rests on, 0-100
        words, rank = precision_words(f)
        result["rank"] = rank
        result["properties"] = {"precision": words, "confidence": f.confidence, "trust": list(f.trust)}
        if f.witness:
            # the chain from the grad source to the store, as a SARIF code flow, and whole
            result["properties"]["witness"] = f.witness
            result["codeFlows"] = [{
                "message": {"text": f.witness["source"]},
                "threadFlows": [{"locations": [
                    {"location": {"physicalLocation": {"artifactLocation": {"uri": _step_uri(uri, path)},
                                                       "region": {"startLine": line}},
                                  "message": {"text": code}}}
                    for (line, code), path in zip(f.witness.get("steps", ()), f.witness.get("step_paths") or repeat(None))
                ]}],
            }]
        if f.fix is not None:
            result["fixes"] = [{
                "description": {"text": f"{f.fix.description} ({f.fix.applicability} fix)"},
                "artifactChanges": [{
                    "artifactLocation": {"uri": uri},
                    "replacements": [
                        {
                            "deletedRegion": _region(e.line, e.col + 1, e.end_line, e.end_col + 1),
                            "insertedContent": {"text": e.content},
                        }
                        for e in f.fix.edits
                    ],
                }],
            }]
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "graphleaf",
                    "fullName": "flake8-graphleaf",
                    "version": __version__,
                    "informationUri": REPO_URL,
                    "rules": [_sarif_rule(code, rules[code]) for code in rule_ids],
                }
            },
            "columnKind": "unicodeCodePoints",
            "invocations": [{"executionSuccessful": not any(r.error for r in reports)}],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _user_part(markdown: str) -> str:
    """A rule page up to "How the analysis decides": what a reader of an alert needs."""
    return re.split(r"^## How the analysis decides\s*$", markdown, maxsplit=1, flags=re.M)[0].rstrip() + "\n"


def _sarif_rule(code: str, summary: str) -> dict:
    page, what = rule_page(code)
    if page:
        markdown = PAGE_LINK.sub(lambda m: f"[{m.group(1)}]({page_link_url(m.group(2))})", _user_part(page))
        markdown += f"\nThe analysis's details: {rule_url(code)}\n"
        why = re.search(r"^## Why is this bad\?\s*\n(.*?)(?:\n\s*\n|\n## |\Z)", page, re.S | re.M)
        text = f"{what}\n\nWhy is this bad? {' '.join(why.group(1).split()) if why else ''}\n\nSee {rule_url(code)}"
        text = re.sub(r"[`*]", "", text)
    else:
        markdown = text = f"{code}: {summary}. See {rule_url(code)}"
    return {
        "id": code,
        "name": (re.match(r"# ([\w-]+)", page).group(1) if re.match(r"# ([\w-]+)", page) else code),
        "shortDescription": {"text": summary},
        "fullDescription": {"text": what or summary},
        "help": {"text": text, "markdown": markdown},
        "helpUri": rule_url(code),
        "defaultConfiguration": {"level": "error"},
        "properties": {
            "tags": TAGS.get(code[:4], ["pytorch"]),
            "precision": PRECISION.get(code, "high"),
            "problem.severity": "error",
        },
    }


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(reports: list[FileReport]) -> str:
    out = []
    for report, f in all_findings(reports):
        col = start_col(report, f)
        props = f"file={_escape_property(report.path)},line={f.line},col={col}"
        if f.end_line is not None and f.end_col is not None:
            props += f",endLine={f.end_line},endColumn={char_col(report, f.end_line, f.end_col) + 1}"
        props += f",title={_escape_property(f.code)}"
        out.append(f"::error {props}::{_escape_data(f.code + ' ' + f.message)}")
    return "".join(line + "\n" for line in out)


def render(fmt: str, reports: list[FileReport], rules: dict[str, str], unsafe_enabled: bool,
           show_witness: bool = False) -> str:
    if fmt == "json":
        return render_json(reports)
    if fmt == "sarif":
        return render_sarif(reports, rules)
    if fmt == "github":
        return render_github(reports)
    return render_text(reports, unsafe_enabled, concise=fmt == "concise", show_witness=show_witness)


def statistics(reports: list[FileReport], rules: dict[str, str]) -> str:
    """One line per code (count, [*] where fixable, summary), then the count per confidence level."""
    found = all_findings(reports)
    counts = Counter(f.code for _, f in found)
    fixable = Counter(f.code for _, f in found if f.fix is not None)
    levels = Counter(f.confidence for _, f in found if f.code != "GLF900")
    out = []
    for code in sorted(counts):
        mark = "[*]" if fixable[code] else "   "
        by_level = Counter(f.confidence for _, f in found if f.code == code)
        split = "" if code == "GLF900" or set(by_level) == {"high"} else " (" + ", ".join(
            f"{by_level[level]} {level}" for level in LEVELS if by_level[level]) + ")"
        out.append(f"{counts[code]:<5} {code} {mark} {rules.get(code, '')}{split}")
    if set(levels) - {"high"}:  # what the lower levels add (--confidence medium|low)
        out.append("confidence: " + ", ".join(f"{levels[level]} {level}" for level in LEVELS))
    return "".join(line + "\n" for line in out)
