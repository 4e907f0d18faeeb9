"""Structural rewrites with libcst (adding a method, wrapping statements in ``with torch.no_grad():``):
libcst keeps comments and layout.  Detection stays on ``ast``; this module only finds the node that
``ast`` named (by its position) and turns the rewritten module back into one text :class:`Edit`."""

from __future__ import annotations

from typing import Callable

from ..analysis.findings import Edit
from ..analysis.program.textpos import split_lines


class NoFix(Exception):
    """A rewrite that cannot be made; the message says why (it becomes the finding's no-fix reason)."""


class Covered(NoFix):
    """No rewrite is needed: what it would do is there already (a copy-safe state that detaches
    the names asked for)."""


def parse(ctx):
    """The libcst module and positions of ``ctx``'s text (parsed once per context), or raise NoFix."""
    cached = getattr(ctx, "_cst", None)
    if cached is not None:
        return cached
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, PositionProvider
    except ImportError:  # pragma: no cover - libcst is a dependency
        raise NoFix("libcst is not installed") from None
    source = ctx.text.source
    hit = _PARSED.get(source)
    if hit is None:
        try:
            wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
            positions = wrapper.resolve(PositionProvider)
        except Exception as exc:  # noqa: BLE001 - syntax libcst does not know
            raise NoFix(f"libcst cannot parse this file ({exc.__class__.__name__})") from None
        by_line: dict[int, list] = {}
        for node, pos in positions.items():
            by_line.setdefault(pos.start.line, []).append((node, pos))
        hit = (wrapper.module, positions, by_line)
        if len(_PARSED) >= 4:  # the last few texts: every fix of one file reuses one parse
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[source] = hit
    ctx._cst = hit[:2]
    ctx._cst_lines = hit[2]
    return ctx._cst


# libcst parses of the last texts (libcst trees are immutable: sharing them is safe)
_PARSED: dict[str, tuple] = {}


def find(ctx, kind, line: int, col: int | None = None, pred: Callable | None = None):
    """The libcst node of type ``kind`` that starts at ``line`` (and ``col``, 0-based characters)."""
    parse(ctx)
    for node, pos in ctx._cst_lines.get(line, ()):
        if isinstance(node, kind) and (col is None or pos.start.column == col):
            if pred is None or pred(node):
                return node
    raise NoFix(f"no {kind.__name__} found at line {line}")


def replace(ctx, old, new) -> Edit:
    """One Edit that turns the file into the file with ``old`` replaced by ``new`` (whole changed
    lines).  A statement is regenerated alone, in its place (the cost of one fix does not grow with
    the file); anything else through the whole module."""
    import libcst as cst

    module, positions = parse(ctx)
    if isinstance(old, cst.BaseStatement) and isinstance(new, cst.BaseStatement):
        old_code, new_code = module.code_for_node(old), module.code_for_node(new)
        lines = ctx.text.lines
        want = split_lines(old_code)
        start = positions[old].start.line - 1
        for first in range(start, max(-1, start - len(old.leading_lines) - 64), -1):
            if lines[first:first + len(want)] == want:
                e = diff_edit(old_code, new_code)
                return Edit(e.line + first, 0, e.end_line + first, 0, e.content)
    return diff_edit(ctx.text.source, module.deep_replace(old, new).code)


def diff_edit(old: str, new: str) -> Edit:
    a, b = split_lines(old), split_lines(new)
    p = 0
    while p < len(a) and p < len(b) and a[p] == b[p]:
        p += 1
    s = 0
    while s < len(a) - p and s < len(b) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    return Edit(p + 1, 0, len(a) - s + 1, 0, "".join(b[p:len(b) - s]))


def indent_unit(ctx) -> str:
    module, _ = parse(ctx)
    return module.default_indent


def torch_name(ctx) -> str | None:
    """The module-level name bound to ``torch`` (``import torch``, ``import torch as th``)."""
    return next((k for k, v in ctx.imports.names.items() if v == "torch"), None)


def wrap_no_grad(ctx, line: int, col: int) -> Edit:
    """Wrap the statement that starts at (line, col) in ``with torch.no_grad():``."""
    import libcst as cst

    torch = torch_name(ctx)
    if torch is None:
        raise NoFix("the file does not import torch under a name")
    stmt = find(ctx, (cst.SimpleStatementLine, cst.BaseCompoundStatement), line, col)
    module, _ = parse(ctx)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) != 1:
        raise NoFix("the statement shares its line with others")
    inner = stmt.with_changes(leading_lines=[])
    item = cst.WithItem(cst.parse_expression(f"{torch}.no_grad()", config=module.config_for_parsing))
    block = cst.With(items=[item], body=cst.IndentedBlock(body=[inner]), leading_lines=stmt.leading_lines)
    return replace(ctx, stmt, block)
