"""The pruned walks the rules use (stmtwalk.walk_lines, word_lines, Parents) give what the full
walks give on the nodes they are asked about; findings do not depend on how a name is spelled."""

from __future__ import annotations

import ast
import textwrap

from flake8_graphleaf.analysis import analyze_source
from flake8_graphleaf.analysis.program.stmtwalk import _SHARED, Parents, parent_map, statements, walk_lines, word_lines

TRICKY = textwrap.dedent(
    '''
    import functools
    @functools.lru_cache(
        maxsize=None)
    def f(a, b=target(1), *, c=lambda: target):
        return f"""{a!r:>{target}} {
        target}""" if a else [target for _ in range(3) if target]
    @decorate(target)
    class C(Base, metaclass=M):
        x: int = (
            target
            .attr)
        def g(self):
            match self:
                case {"k": target_v} if target:
                    pass
            with open(target) as fh, ctx(
                    target):
                try:
                    pass
                except (E, target) as e:
                    raise target from e
    '''
)


def test_walk_lines_reaches_every_name_of_its_lines_in_ast_walk_order():
    tree = ast.parse(TRICKY)
    full = list(ast.walk(tree))
    for line in range(1, len(TRICKY.splitlines()) + 1):
        got, parents = walk_lines(tree, [line])
        wanted = [n for n in full if (isinstance(n, ast.Name) and n.lineno == line)
                  or (isinstance(n, ast.Attribute) and n.end_lineno == line)]
        ids = {id(n) for n in got}
        assert all(id(n) in ids for n in wanted), line
        # (Load(), Add() ... are one object each, met everywhere: no place in the order)
        order = {id(n): i for i, n in enumerate(full) if not isinstance(n, _SHARED)}
        mine = [order[id(n)] for n in got if not isinstance(n, _SHARED)]
        assert mine == sorted(mine)
        true_parents = parent_map(tree)
        assert all(true_parents[n] is p for n, p in parents.items())


def test_parents_answers_as_the_full_map():
    tree = ast.parse(TRICKY)
    _, partial = walk_lines(tree, [3])
    lazy, full = Parents(tree, partial), parent_map(tree)
    for node in ast.walk(tree):
        assert lazy.get(node) is full.get(node)


def test_word_lines():
    assert word_lines(None, ["x"]) is None
    assert word_lines("x = 1\r\ny = x\r\n", ["x"]) is None  # \r: ast counts lines otherwise
    assert word_lines("a = 1\nxx = 2\nb = x\n", ["x"]) == [3]
    assert word_lines("a = 1\n# é\nb = 2\n", ["zzz"]) == [2]  # non-ASCII lines are always in


def test_statements_order_unchanged():
    tree = ast.parse(TRICKY)
    out, stack = [], [tree]
    while stack:  # the walk as it was before simple statements were left off the stack
        cur = stack.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(cur, name, None)
            if block:
                for child in reversed(block):
                    if isinstance(child, ast.stmt):
                        out.append(child)
                    stack.append(child)
        stack.extend(reversed(getattr(cur, "cases", None) or []))
    assert [id(s) for s in statements(tree)] == [id(s) for s in out]


STEP = textwrap.dedent(
    """
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
        def forward(self, x):
            return self.lin(x)
    def step(model, x):
        out = model(x)
        model.last_out = out
        return out
    CALL
    """
)


def test_a_call_spelled_with_compatibility_characters_is_still_a_call():
    plain = analyze_source(STEP.replace("CALL", "step(Net(), 1)"))
    # fullwidth letters: Python reads the name as "step" (NFKC), the text does not say "step"
    wide = analyze_source(STEP.replace("CALL", "\uff53\uff54\uff45\uff50(Net(), 1)"))
    assert [(f.code, f.line) for f in plain] == [(f.code, f.line) for f in wide]
    assert [f.code for f in plain] == ["GLF001"]


def test_lines_matching_with_a_literal_finds_the_same_lines_as_the_pattern():
    import re

    from flake8_graphleaf.analysis.program.stmtwalk import lines_matching

    source = "x = setattr(a, 'b', 1)\nsetattrs = 2\n\n  setattr (m, n, v)  # setattr(\nreset_attr(x)\nsetattr"
    pattern = re.compile(r"\bsetattr\s*\(")
    assert lines_matching(source, pattern, "setattr") == lines_matching(source, pattern) == {1, 4}
    word = re.compile(r"\bstep\b")
    text = "def step(x):\n    return x\nstepper = 1\nmodel.step()\n# step\nsteps"
    assert lines_matching(text, word, "step") == lines_matching(text, word) == {1, 4, 5}
    assert lines_matching("", word, "step") == set()
