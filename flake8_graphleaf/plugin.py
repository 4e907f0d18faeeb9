"""flake8 adapter: hands flake8's own ``ast`` tree to the analysis and yields its findings."""

from __future__ import annotations

import ast
from typing import Iterator

from . import __version__
from .analysis import Options, analyze_tree
from .project.resolver import shared_resolver


class GraphLeafChecker:
    name = "flake8-graphleaf"
    version = __version__
    module_bases: frozenset[str] = frozenset()

    argument_stores: bool = False

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
            "--graphleaf-argument-stores",
            action="store_true",
            default=False,
            parse_from_config=True,
            help="Also report GLF010: stores whose only evidence is a forward argument that reaches "
            "no learnable computation (off by default).",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        bases = options.graphleaf_module_bases or []
        if isinstance(bases, str):
            bases = [b.strip() for b in bases.split(",")]
        cls.module_bases = frozenset(b for b in bases if b)
        cls.argument_stores = bool(getattr(options, "graphleaf_argument_stores", False))

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        source = "".join(self.lines)
        try:
            place = shared_resolver().options_for(self.filename) if self.filename not in ("stdin", "-") else {}
            options = Options(module_bases=self.module_bases, argument_stores=self.argument_stores, **place)
            findings = analyze_tree(self.tree, source, options)
        except RecursionError:
            yield 1, 0, "GLF900 flake8-graphleaf could not analyse this file: it nests too deeply", type(self)
            return
        for f in findings:
            yield f.line, f.col, f.text(), type(self)
