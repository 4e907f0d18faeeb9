"""Attaching fixes to findings: each finding that has one gets a :class:`Fix` of text edits.

The builders live in one module per fix family (``stores``, ``buffers``, ``legacy_norm``,
``deepcopy``); ``context`` and ``tensors`` are what they share.

A *safe* fix never changes what ``forward`` computes, nor any gradient:
- renaming an attribute to a local variable, when ``forward`` writes it before any
  read on every path and nothing else in the file reads it;
- ``.detach()`` of a buffer update that ``forward`` does not read afterwards.
Everything that changes what a reader outside ``forward`` sees is *unsafe*: the
detached mirror of an attribute, ``.detach()`` on container items, the
parametrizations API for legacy weight_norm / spectral_norm (its state_dict keys
differ), and ``t.detach().clone()`` for ``copy.deepcopy(t)`` (the value may be a
leaf that requires grad, or a container).
"""

from __future__ import annotations

import ast

from ..analysis import Options, analyze_file
from ..analysis.findings import Finding
from ..analysis.imports import ImportMap
from ..analysis.modules import ClassInfo
from ..analysis.textpos import Text
from .buffers import fix_buffer
from .context import Context
from .deepcopy import fix_deepcopy
from .legacy_norm import fix_legacy
from .stores import fix_attr_store, fix_container


def attach_fixes(tree: ast.Module, text: Text, findings: list[Finding], classes: dict[str, ClassInfo], imports: ImportMap) -> None:
    ctx = Context(tree, text, classes, imports)
    for f in findings:
        try:
            builder = _BUILDERS.get(f.data.get("code_if_resolved", f.code))
            if builder is not None:
                f.fix = builder(f, ctx)
        except (ValueError, AttributeError, IndexError, KeyError):  # a fix we cannot build is no fix
            f.fix = None


_BUILDERS = {
    "GLF001": fix_attr_store,
    "GLF002": fix_container,
    "GLF004": fix_buffer,
    "GLF101": fix_legacy,
    "GLF102": fix_legacy,
    "GLF201": fix_deepcopy,
}


def analyze_with_fixes(source: str, filename: str = "<unknown>", options: Options | None = None) -> list[Finding]:
    """:func:`flake8_graphleaf.analysis.analyze_source`, with each finding's fix attached."""
    result = analyze_file(ast.parse(source, filename=filename), source, options)
    if result.findings:
        attach_fixes(result.tree, Text(source), result.findings, result.classes, result.imports)
    return result.findings
