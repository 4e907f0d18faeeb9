"""flake8 adapter: hands flake8's own ``ast`` tree to the analysis and yields its findings."""

from __future__ import annotations

import ast
from typing import Iterator

from . import __version__
from .analysis import Options, analyze_tree


class GraphLeafChecker:
    name = "flake8-graphleaf"
    version = __version__
    module_bases: frozenset[str] = frozenset()

    def __init__(self, tree: ast.AST, lines: list[str]):
        self.tree = tree
        self.lines = lines

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

    @classmethod
    def parse_options(cls, options) -> None:
        bases = options.graphleaf_module_bases or []
        if isinstance(bases, str):
            bases = [b.strip() for b in bases.split(",")]
        cls.module_bases = frozenset(b for b in bases if b)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        source = "".join(self.lines)
        try:
            findings = analyze_tree(self.tree, source, Options(module_bases=self.module_bases))
        except RecursionError:
            yield 1, 0, "GLF900 flake8-graphleaf could not analyse this file: it nests too deeply", type(self)
            return
        for f in findings:
            yield f.line, f.col, f.text(), type(self)
