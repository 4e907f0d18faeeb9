"""GLF101, GLF102: legacy ``torch.nn.utils.weight_norm`` / ``spectral_norm``.

The legacy functions keep the weight as a plain attribute recomputed by a forward
pre-hook.  Legacy weight_norm sets that non-leaf weight as soon as it is applied, so
``copy.deepcopy`` of the module raises even before training; legacy spectral_norm
sets one at every training-mode forward.  The ``torch.nn.utils.parametrizations``
versions (same names) do not have the problem.
"""

from __future__ import annotations

import ast

from .. import messages, witness
from ..findings import Finding
from ..program.imports import ImportMap
from ..program.modules import ClassInfo
from ..program.stmtwalk import Parents, parent_map, walk, walk_lines, word_lines
from ..program.helper_objects import copies_itself
from ..program.flags import constructed_with
from . import behind_unset_option, decides_own_copy, finding

RULES = {
    "GLF101": "legacy torch.nn.utils.weight_norm / remove_weight_norm",
    "GLF102": "legacy torch.nn.utils.spectral_norm / remove_spectral_norm",
}

EXAMPLES = [
    (
        """
import torch.nn as nn
conv = nn.utils.weight_norm(nn.Conv1d(4, 4, 3))
""",
        ["GLF101"],
    ),
    (
        """
from torch.nn.utils import spectral_norm
disc = spectral_norm(nn.Conv2d(1, 8, 3))
""",
        ["GLF102"],
    ),
    (
        """
from torch.nn.utils.parametrizations import weight_norm, spectral_norm
conv = weight_norm(spectral_norm(nn.Conv1d(4, 4, 3)))
""",
        [],
    ),
    (
        """
from torch.nn.utils.weight_norm import WeightNorm
def normalised(module):
    return any(isinstance(h, WeightNorm) for h in module._forward_pre_hooks.values())
""",
        [],
    ),
    (
        """
import copy, torch.nn as nn
from torch.nn.utils import weight_norm
class WNLinear(nn.Linear):
    def __init__(self, n, m):
        super().__init__(n, m)
        weight_norm(self)
""",
        ["GLF101"],
    ),
    (
        """
import copy, torch.nn as nn
from torch.nn.utils import weight_norm
class WNLinear(nn.Linear):
    def __init__(self, n, m):
        super().__init__(n, m)
        weight_norm(self)
        self.__deepcopy__ = self._copy_without_weight.__get__(self, type(self))
    def _copy_without_weight(self, memo):
        ...
""",
        ["GLF101?"],
    ),
    (
        """
import torch.nn as nn
weight_norm = nn.utils.weight_norm
if hasattr(nn.utils.parametrizations, "weight_norm"):
    weight_norm = nn.utils.parametrizations.weight_norm
""",
        [],
    ),
]

LEGACY = {
    "torch.nn.utils.weight_norm": ("GLF101", "weight_norm", "torch.nn.utils.parametrizations.weight_norm"),
    "torch.nn.utils.weight_norm.weight_norm": ("GLF101", "weight_norm", "torch.nn.utils.parametrizations.weight_norm"),
    "torch.nn.utils.remove_weight_norm": ("GLF101", "remove_weight_norm", "torch.nn.utils.parametrize.remove_parametrizations"),
    "torch.nn.utils.weight_norm.remove_weight_norm": ("GLF101", "remove_weight_norm", "torch.nn.utils.parametrize.remove_parametrizations"),
    "torch.nn.utils.weight_norm.WeightNorm": ("GLF101", "WeightNorm", "torch.nn.utils.parametrizations.weight_norm"),
    "torch.nn.utils.spectral_norm": ("GLF102", "spectral_norm", "torch.nn.utils.parametrizations.spectral_norm"),
    "torch.nn.utils.spectral_norm.spectral_norm": ("GLF102", "spectral_norm", "torch.nn.utils.parametrizations.spectral_norm"),
    "torch.nn.utils.remove_spectral_norm": ("GLF102", "remove_spectral_norm", "torch.nn.utils.parametrize.remove_parametrizations"),
    "torch.nn.utils.spectral_norm.remove_spectral_norm": ("GLF102", "remove_spectral_norm", "torch.nn.utils.parametrize.remove_parametrizations"),
    "torch.nn.utils.spectral_norm.SpectralNorm": ("GLF102", "SpectralNorm", "torch.nn.utils.parametrizations.spectral_norm"),
}

_WHEN = {  # when the weight is a non-leaf tensor, and when a copy fails
    "GLF101": (None, messages.copy_clause("copy.deepcopy of the module", when="as soon as it is applied")),
    "GLF102": ("at every training-mode forward", messages.copy_clause("copy.deepcopy of the model", when="after one")),
}


def check(tree: ast.AST, imports: ImportMap, classes: dict[str, ClassInfo], source: str | None = None) -> list[Finding]:
    hits = []
    inner: set[int] = set()
    # A node naming one of LEGACY ends in its last name (an attribute) or is a name imported as one.
    words = {q.rpartition(".")[2] for q in LEGACY} | {k for k, v in imports.names.items() if v in LEGACY}
    lines = word_lines(source, words)
    if lines is None:
        nodes, parents = walk(tree), None
    else:
        nodes, partial = walk_lines(tree, lines)
        parents = Parents(tree, partial)
    for node in nodes:
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        if not isinstance(getattr(node, "ctx", None), ast.Load):
            continue
        qual = imports.qualname(node)
        if qual in LEGACY:
            hits.append((node, LEGACY[qual]))
            sub = node
            while isinstance(sub, ast.Attribute):
                sub = sub.value
                inner.add(id(sub))
    if not hits:
        return []
    if parents is None:
        parents = parent_map(tree)
    out = []
    for node, (code, name, new) in hits:
        if _is_fallback(node, parents, imports) or _only_named(node, parents):
            continue
        cls = _enclosing_class(node, parents)
        removal = name.startswith("remove_")
        if removal:
            message = (
                f"legacy torch.nn.utils.{name} undoes the legacy {name[7:]}, which makes the module's weight a "
                f"non-leaf tensor; copy.deepcopy of the module will raise while it is applied: move to the "
                f"parametrizations API and use {new}(module, 'weight')"
            )
        else:
            when, copy = _WHEN[code]
            message = messages.store(f"legacy torch.nn.utils.{name}", "makes the module's weight", None, copy,
                                     f"use {new}", by=when, tensor="a non-leaf tensor")
        f = finding(code, node, message, class_name=cls, attribute=name, data={"new": new, "qual": imports.qualname(node)})
        if not removal and cls in classes and _normalises_self(node, parents) and copies_itself(classes[cls]):
            # the class's objects decide their own copies (a __deepcopy__ of the class or one bound
            # on the object): that a copy meets the computed weight is not shown
            out.append(decides_own_copy(f, cls))
            continue
        unset = None if removal else _unset_option(node, parents, cls, imports)
        f.witness = witness.simple(
            f"torch.nn.utils.{name}: the legacy API registers a forward pre-hook that recomputes 'weight' from "
            "its parameters (weight_g / weight_v, weight_orig): a non-leaf tensor kept on the module",
            "legacy-norm", node, reached=f"the call itself, in {cls or 'module-level code'}", kept="until the module is removed "
            "from the legacy norm", copied="copy.deepcopy(model) copies the module's __dict__['weight']")
        out.append(f if unset is None else behind_unset_option(f, *unset))
    return out


def _unset_option(node, parents, cls: str | None, imports: ImportMap) -> tuple[str, str] | None:
    """(option, what the program passes) when ``node`` is in the body of ``if <option>:`` (``if
    <option> == "weight":``, or the same test on ``self.<attr>`` that ``__init__`` set from the
    option) in ``cls.__init__``, ``<option>`` an ``__init__`` parameter whose default skips that
    body, and no construction of the class the project makes is seen passing a value that runs
    it (every one passes ``use_weight_norm=False`` or the default, or none is seen: the class is
    built through a lookup, or only by its users); None otherwise (the default runs it, a value
    not known, a construction that sets it)."""
    project = getattr(imports, "project", None)
    module = getattr(getattr(imports, "current", None), "name", None)
    if cls is None or project is None or not module:
        return None
    cur, child = parents.get(node), node
    tests = []
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if isinstance(cur, ast.If) and child in cur.body:
            tests.append(cur.test)
        cur, child = parents.get(cur), cur
    if not isinstance(cur, ast.FunctionDef) or cur.name != "__init__" or not isinstance(parents.get(cur), ast.ClassDef):
        return None
    args = cur.args.args[1:]
    defaults = dict(zip([a.arg for a in args][len(args) - len(cur.args.defaults):], cur.args.defaults))
    defaults.update({a.arg: d for a, d in zip(cur.args.kwonlyargs, cur.args.kw_defaults) if d is not None})
    params = {a.arg for a in args + cur.args.kwonlyargs}
    aliases = _self_aliases(cur, params)
    for test in tests:
        option, wanted = _option_test(test)
        option = aliases.get(option, option)
        if option not in params:
            continue
        default = defaults.get(option)
        if not isinstance(default, ast.Constant):
            continue  # no default, or one not known: a construction must pass it
        skips = (lambda v: not v) if wanted is None else (lambda v: v != wanted)
        if not skips(default.value):
            continue  # the default runs the legacy call
        values = constructed_with(project, module, cls, option)
        if values and all(skips(v) for v in values):
            return option, " or ".join(sorted(repr(v) for v in values))
        if not values:
            return option, f"nothing (the default {default.value!r}; no construction in the project sets it)"
    return None


def _self_aliases(init: ast.FunctionDef, params: set[str]) -> dict[str, str]:
    """``self.<attr>`` names of ``__init__`` bound straight from a parameter (``self.scale_weight_norm
    = scale_weight_norm``), as ``"self.attr" -> parameter``; the option tests read either."""
    me = init.args.args[0].arg if init.args.args else "self"
    out = {}
    for stmt in init.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute)
                and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == me
                and isinstance(stmt.value, ast.Name) and stmt.value.id in params):
            out[f"self.{stmt.targets[0].attr}"] = stmt.value.id
    return out


def _option_test(test: ast.AST) -> tuple[str | None, object]:
    """(name, None) for ``if name:``; (name, literal) for ``if name == literal:``; else (None, None).
    A name is a parameter (``use_wn``) or ``self.<attr>``."""
    def named(node):
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None
    if named(test) is not None:
        return named(test), None
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and named(test.left) is not None and isinstance(test.comparators[0], ast.Constant)):
        return named(test.left), test.comparators[0].value
    return None, None


def _only_named(node, parents) -> bool:
    """The legacy name is only tested against (``isinstance(hook, WeightNorm)``), not used."""
    cur = parents.get(node)
    if isinstance(cur, ast.Tuple):
        cur = parents.get(cur)
    return (isinstance(cur, ast.Call) and isinstance(cur.func, ast.Name) and cur.func.id in ("isinstance", "issubclass")
            and node is not cur.func and (node in cur.args[1:] or any(node in getattr(a, "elts", ()) for a in cur.args[1:])))


def _normalises_self(node, parents) -> bool:
    """``weight_norm(self)`` / ``weight_norm(self.proj)`` in a method: the class's own object."""
    call = parents.get(node)
    if not (isinstance(call, ast.Call) and call.func is node and call.args):
        return False
    target = call.args[0]
    while isinstance(target, ast.Attribute):
        target = target.value
    return isinstance(target, ast.Name) and target.id == "self"


def _enclosing_class(node, parents) -> str | None:
    cur = parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.ClassDef):
            return cur.name
        cur = parents.get(cur)
    return None


def _mentions_new_api(test: ast.AST, imports: ImportMap) -> bool:
    for n in walk(test):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr") and n.args:
            q = imports.qualname(n.args[0]) or ast.unparse(n.args[0])
            if q.endswith("parametrizations"):
                return True
        if isinstance(n, ast.Attribute) and n.attr == "parametrizations":
            return True
    return False


def _is_fallback(node, parents, imports: ImportMap) -> bool:
    """True where the legacy name is only used when the parametrizations API is missing."""
    child, cur = node, parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.Call) and isinstance(cur.func, ast.Name) and cur.func.id == "getattr":
            if len(cur.args) >= 3 and child is cur.args[2] and _mentions_new_api(cur.args[0], imports):
                return True
        if isinstance(cur, (ast.If, ast.IfExp)) and _mentions_new_api(cur.test, imports):
            negated = isinstance(cur.test, ast.UnaryOp) and isinstance(cur.test.op, ast.Not)
            branch = cur.body if not negated else cur.orelse
            in_branch = child in branch if isinstance(branch, list) else child is branch
            if not in_branch and child is not cur.test:
                return True
        if isinstance(cur, ast.Assign) and child is cur.value:
            # `wn = nn.utils.weight_norm` followed by `if hasattr(...parametrizations...): wn = ...`
            names = {t.id for t in cur.targets if isinstance(t, ast.Name)}
            block = parents.get(cur)
            body = None
            for field in ("body", "orelse", "finalbody"):
                seq = getattr(block, field, None)
                if isinstance(seq, list) and cur in seq:
                    body = seq
            if body is not None and names:
                for later in body[body.index(cur) + 1:]:
                    if isinstance(later, ast.If) and _mentions_new_api(later.test, imports):
                        for s in walk(later):
                            if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in s.targets):
                                return True
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return False
        child, cur = cur, parents.get(cur)
    return False
