"""flake8 adapter: hands flake8's own ``ast`` tree to the analysis and yields its findings."""

from __future__ import annotations

import ast
from typing import Iterator

from . import __version__
from .analysis import Options, analyze_tree
from .analysis.confidence import LEVELS, RETIRED
from .project.encoding import undecodable
from .analysis.noqa import is_silenced, noqa_map
from .project.resolver import shared_resolver


class GraphLeafChecker:
    name = "flake8-graphleaf"
    version = __version__
    module_bases: frozenset[str] = frozenset()

    confidence: str = "high"

    def __init__(self, tree: ast.AST, lines: list[str], filename: str = "stdin"):
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser) -> None:
        parser.add_option(
            "--graphleaf-module-bases",
            default="",
            parse_from_config=True,
            comma_separated_list=True,
            help="More base classes (names or dotted names) whose subclasses are torch modules, "
            "e.g. MyFrameworkModule,mylib.BaseNet.",
        )
        parser.add_option(
            "--graphleaf-confidence",
            default="high",
            parse_from_config=True,
            choices=list(LEVELS),
            help="The lowest confidence level to report: high (the default: only what is proven), "
            "medium (one step of the witness taken on trust) or low (all).",
        )
        parser.add_option(
            "--graphleaf-argument-stores",
            action="store_true",
            default=False,
            parse_from_config=True,
            help="The same as --graphleaf-confidence=low (the retired opt-in code GLF010).",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        bases = options.graphleaf_module_bases or []
        if isinstance(bases, str):
            bases = [b.strip() for b in bases.split(",")]
        cls.module_bases = frozenset(b for b in bases if b)
        level = str(getattr(options, "graphleaf_confidence", None) or "high").strip().lower()
        named = [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ()),
                 *(getattr(options, "extended_default_select", None) or ())]
        if getattr(options, "graphleaf_argument_stores", False) or any(str(c).upper() == RETIRED for c in named):
            level = "low"  # the retired opt-in code named: its findings are the lower levels
        cls.confidence = level if level in LEVELS else "high"

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        source = "".join(self.lines)
        why = self._not_source(source)
        if why:
            yield 1, 0, f"GLF900 {why}", type(self)
            return
        try:
            place = shared_resolver().options_for(self.filename) if self.filename not in ("stdin", "-") else {}
            options = Options(module_bases=self.module_bases, confidence=self.confidence, **place)
            findings = analyze_tree(self.tree, source, options)
        except RecursionError:
            yield 1, 0, "GLF900 flake8-graphleaf could not analyse this file: it nests too deeply", type(self)
            return
        noqa = None
        for f in findings:
            if f.confidence != "high":
                # a '# noqa: GLF010' written for the retired code of the lower levels
                noqa = noqa_map(source) if noqa is None else noqa
                if is_silenced(RETIRED, f.line, noqa):
                    continue
            yield f.line, f.col, f.text(), type(self)

    def _not_source(self, source: str) -> str | None:
        """Bytes Python cannot decode without a coding line: flake8 reads such a file as Latin-1
        and reports nothing (Python refuses to import it). Only a text whose every character is a
        Latin-1 one, some beyond ASCII, can have been read so; its bytes are read again to tell."""
        if source.isascii() or self.filename in ("stdin", "-") or max(source) > "\xff":
            return None
        try:
            with open(self.filename, "rb") as fh:
                raw = fh.read()
        except OSError:
            return None
        why = undecodable(raw)
        return f"could not read: {why}" if why else None
