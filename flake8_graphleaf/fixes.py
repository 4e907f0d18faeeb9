"""The fixes: each finding that has one gets a :class:`Fix` of text edits.

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
import builtins
import keyword

from .findings import SAFE, UNSAFE, Edit, Finding, Fix
from .flow import CONTAINER_MUTATORS
from .imports import ImportMap
from .modules import ClassInfo
from .stmtwalk import parent_map
from .textpos import Text

_SIMPLE = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
_DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.Starred)


def attach_fixes(tree: ast.Module, text: Text, findings: list[Finding], classes: dict[str, ClassInfo], imports: ImportMap) -> None:
    ctx = _Context(tree, text, classes, imports)
    for f in findings:
        try:
            builder = _BUILDERS.get(f.code)
            if builder is not None:
                f.fix = builder(f, ctx)
        except (ValueError, AttributeError, IndexError, KeyError):  # a fix we cannot build is no fix
            f.fix = None


class _Context:
    def __init__(self, tree, text: Text, classes, imports: ImportMap):
        self.tree = tree
        self.text = text
        self.classes = classes
        self.imports = imports
        self._parents: dict | None = None

    @property
    def parents(self) -> dict:
        if self._parents is None:
            self._parents = parent_map(self.tree)
        return self._parents

    def method(self, f: Finding) -> ast.FunctionDef | None:
        info = self.classes.get(f.class_name or "")
        name = f.data.get("method")
        if info is None or not name:
            return None
        for stmt in info.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                if stmt.lineno <= f.line <= stmt.end_lineno:
                    return stmt
        return None

    def edit(self, node: ast.AST, content: str) -> Edit:
        (l1, c1), (l2, c2) = self.text.start(node), self.text.end(node)
        return Edit(l1, c1, l2, c2, content)

    def insert(self, line: int, col: int, content: str) -> Edit:
        return Edit(line, col, line, col, content)


def _at(root: ast.AST, line: int, col: int, kinds) -> ast.AST | None:
    for n in ast.walk(root):
        if isinstance(n, kinds) and getattr(n, "lineno", None) == line and n.col_offset == col:
            return n
    return None


def _self_attr_nodes(method: ast.FunctionDef, self_name: str, attr: str) -> list[ast.Attribute]:
    nodes = [
        n for n in ast.walk(method)
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == self_name
    ]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _self_attribute(f: Finding, ctx: "_Context"):
    """(method, self name, attribute) for a finding on a plain ``self.<attr>``, else None."""
    method = ctx.method(f)
    if method is None:
        return None
    self_name = _self_name(method)
    attr = (f.attribute or "").removeprefix(self_name + ".")
    if f.attribute != f"{self_name}.{attr}" or not attr.isidentifier():
        return None
    return method, self_name, attr


def _self_name(method) -> str:
    params = method.args.posonlyargs + method.args.args
    return params[0].arg if params else "self"


def _read_elsewhere(ctx: _Context, method, attr: str) -> bool:
    """Is ``.attr`` read, or named in a string, anywhere in the file outside ``method``?"""
    inside = set(map(id, ast.walk(method)))
    for n in ast.walk(ctx.tree):
        if id(n) in inside:
            continue
        if isinstance(n, ast.Attribute) and n.attr == attr:
            parent = ctx.parents.get(n)
            stored = isinstance(n.ctx, ast.Store) and not isinstance(parent, ast.AugAssign)
            if not stored:
                return True
        if isinstance(n, ast.Constant) and n.value == attr:
            return True
    return False


def _wrap(ctx: _Context, node: ast.AST) -> str:
    seg = ctx.text.segment(node)
    return seg if isinstance(node, _SIMPLE) else f"({seg})"


def _fresh_name(attr: str, method, tree) -> str:
    base = attr.lstrip("_") or "value"
    if not base.isidentifier():
        base = "value"
    # Names the method uses or binds, and names bound at module level (globals it may read).
    used = {n.id for n in ast.walk(method) if isinstance(n, ast.Name)}
    used |= {a.arg for a in ast.walk(method) if isinstance(a, ast.arg)}
    used |= {n.name for n in ast.walk(method) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            used.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            used |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        else:
            used |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    used |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    name = base
    while name in used or keyword.iskeyword(name) or hasattr(builtins, name):
        name += "_"
    return name


def _top_statement(method, node, parents) -> ast.stmt | None:
    """The statement of ``method.body`` (top level) that contains ``node``."""
    cur = node
    while cur is not None and parents.get(cur) is not method:
        cur = parents.get(cur)
    return cur if cur is not None and cur in method.body else None


_TERMINAL = (ast.Return, ast.Raise)


def _reachable_after(method, target: ast.stmt) -> list[ast.stmt]:
    """Statements that may run after ``target`` in one call of ``method``: the rest of
    its block, then of each enclosing block (not the other branch of an ``if``), and
    the whole body of each enclosing loop (its next iteration).  Climbing stops at a
    block that returns or raises after ``target``."""
    path: list[tuple[ast.AST, list, int]] = []

    def find(owner: ast.AST) -> bool:
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(owner, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if stmt is target or (
                    getattr(stmt, "lineno", 0) <= target.lineno <= getattr(stmt, "end_lineno", 0) and find(stmt)
                ):
                    path.append((owner, block, i))
                    return True
        for case in getattr(owner, "cases", None) or []:
            if find(case):
                return True
        return False

    if not find(method):
        return []
    out: list[ast.stmt] = []
    for owner, block, i in path:  # innermost first
        rest = block[i + 1:]
        out += rest
        if isinstance(owner, (ast.For, ast.AsyncFor, ast.While)):
            out += owner.body
        if any(isinstance(s, _TERMINAL) for s in rest) or isinstance(block[i], _TERMINAL):
            break
    return out


def _statement(node, parents) -> ast.stmt | None:
    cur = node
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = parents.get(cur)
    return cur


def _alone_on_lines(ctx: _Context, stmt: ast.stmt) -> bool:
    text = ctx.text
    first = text.line(stmt.lineno)
    (_, c1), (_, c2) = text.start(stmt), text.end(stmt)
    if first[:c1].strip():
        return False
    rest = text.line(stmt.end_lineno)[c2:].strip()
    return rest == "" or rest.startswith("#")


# -- is an expression certainly a single tensor? ---------------------------------------
# Unsafe fixes add `.detach()`; on a tuple, a dict or a model output that would crash,
# so they are only offered where the value is certainly one tensor.
_TUPLE_RESULTS = frozenset(
    """split chunk unbind sort topk max min median mode kthvalue aminmax std_mean var_mean
    frexp histogram meshgrid broadcast_tensors tensor_split hsplit vsplit dsplit unique
    unique_consecutive svd qr eig eigh slogdet lstsq nonzero where tolist item
    multi_head_attention_forward""".split()
)
_TENSOR_METHODS = frozenset(
    """clone mean sum prod view reshape permute transpose contiguous float half double bfloat16 to
    flatten squeeze unsqueeze softmax log_softmax sigmoid tanh relu exp log abs pow matmul mm bmm
    norm std var masked_fill clamp clip expand expand_as repeat type_as cumsum cumprod flip roll
    narrow select gather index_select masked_select mul add sub div neg sqrt rsqrt square
    logsumexp amax amin diagonal tril triu t sin cos erf gelu silu cpu cuda detach_""".split()
)
_TENSOR_MODULES = frozenset(
    """Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm1d
    BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d RMSNorm
    Embedding EmbeddingBag Dropout Dropout1d Dropout2d Dropout3d ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh
    Softmax LogSoftmax LeakyReLU ELU PReLU Hardswish Hardsigmoid Identity Flatten Unflatten Upsample
    AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d PixelShuffle
    MSELoss L1Loss CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss SmoothL1Loss HuberLoss KLDivLoss""".split()
)


def certainly_tensor(node: ast.AST, ctx: "_Context", method, depth: int = 0) -> bool:
    if depth > 6 or node is None:
        return False
    self_name = _self_name(method) if method is not None else None
    facts = None
    if method is not None:
        parent = ctx.parents.get(method)
        info = ctx.classes.get(parent.name) if isinstance(parent, ast.ClassDef) else None
        facts = info.facts if info is not None else None
    if isinstance(node, (ast.BinOp,)):
        if isinstance(node.op, ast.MatMult):
            return True
        return certainly_tensor(node.left, ctx, method, depth + 1) or certainly_tensor(node.right, ctx, method, depth + 1)
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
        return certainly_tensor(node.operand, ctx, method, depth + 1)
    if isinstance(node, ast.Subscript):
        return certainly_tensor(node.value, ctx, method, depth + 1)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == self_name and facts is not None:
            return node.attr in facts.params or node.attr in facts.buffers
        return node.attr in ("T", "mT", "H", "real", "imag") and certainly_tensor(node.value, ctx, method, depth + 1)
    if isinstance(node, ast.Call):
        func = node.func
        qual = ctx.imports.qualname(func) or ""
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if qual.startswith("torch."):
            if last in _TUPLE_RESULTS or last[:1].isupper():
                return False
            if "pool" in last and any(k.arg == "return_indices" for k in node.keywords):
                return False
            return qual.count(".") == 1 or qual.startswith("torch.nn.functional.")
        if isinstance(func, ast.Attribute):
            recv = func.value
            if isinstance(recv, ast.Name) and recv.id == self_name and facts is not None:
                ctor = facts.submodule_ctors.get(func.attr, "")
                return ctor.rsplit(".", 1)[-1] in _TENSOR_MODULES
            if last in _TENSOR_METHODS:
                return certainly_tensor(recv, ctx, method, depth + 1) or last in ("clone", "contiguous", "view", "reshape")
        return False
    if isinstance(node, ast.Name) and method is not None:
        value = _last_assignment(method, node)
        return value is not None and certainly_tensor(value, ctx, method, depth + 1)
    return False


def _last_assignment(method, use: ast.Name) -> ast.AST | None:
    """The value of the single plain assignment to ``use.id`` before ``use`` in ``method``."""
    found = []
    for n in ast.walk(method):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and (n.lineno, n.col_offset) < (use.lineno, use.col_offset):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == use.id for t in targets):
                found.append(n)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            names = {x.id for x in ast.walk(n.target if not isinstance(n, ast.With) else n) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
            if use.id in names:
                return None
    if len(found) != 1 or found[0].value is None:
        return None
    return found[0].value


# -- rename to a local variable (safe) ------------------------------------------------
def _rename_to_local(f: Finding, ctx: _Context) -> Fix | None:
    found = _self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    nodes = _self_attr_nodes(method, self_name, attr)
    if not nodes:
        return None
    first = nodes[0]
    parents = ctx.parents
    only_stores = all(
        isinstance(n.ctx, ast.Store) and not isinstance(parents.get(n), ast.AugAssign) for n in nodes
    )
    if not only_stores:
        # Written before any read on every path: the first use is a plain assignment
        # at the top level of the method, and does not read the attribute itself.
        stmt = _top_statement(method, first, parents)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return None
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(t is first for t in targets):
            return None
        if any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(stmt.value)):
            return None
    for n in ast.walk(method):  # a string naming the attribute (getattr, hasattr, setattr)
        if isinstance(n, ast.Constant) and n.value == attr:
            return None
    if _read_elsewhere(ctx, method, attr):
        return None
    name = _fresh_name(attr, method, ctx.tree)
    edits = tuple(ctx.edit(n, name) for n in nodes)
    return Fix(SAFE, f"use a local variable '{name}' instead of '{self_name}.{attr}'", edits)


# -- GLF001 ----------------------------------------------------------------------------
def _fix_attr_store(f: Finding, ctx: _Context) -> Fix | None:
    if f.data.get("kind") != "attr":
        return None
    fix = _rename_to_local(f, ctx)
    if fix is not None:
        return fix
    return _detached_mirror(f, ctx)


def _detached_mirror(f: Finding, ctx: _Context) -> Fix | None:
    found = _self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    target = _at(method, f.line, f.col, ast.Attribute)
    if target is None:
        return None
    parents = ctx.parents
    stmt = _statement(target, parents)
    if stmt is None or not _alone_on_lines(ctx, stmt):
        return None
    desc = f"keep a detached copy in '{self_name}.{attr}' (readers outside forward lose its gradient)"
    later = {id(n) for s in _reachable_after(method, stmt) for n in ast.walk(s)}
    later_reads = [
        n for n in _self_attr_nodes(method, self_name, attr) if isinstance(n.ctx, ast.Load) and id(n) in later
    ]
    if isinstance(stmt, ast.AugAssign) and stmt.target is target:
        if later_reads or not certainly_tensor(stmt.value, ctx, method):
            return None
        return Fix(UNSAFE, desc, (ctx.edit(stmt.value, _wrap(ctx, stmt.value) + ".detach()"),))
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return None
    value = stmt.value
    direct = isinstance(stmt, ast.AnnAssign) or (len(stmt.targets) == 1 and stmt.targets[0] is target)
    if value is None or (direct and isinstance(value, _DISPLAYS + (ast.IfExp, ast.Constant, ast.Lambda))):
        return None
    if direct and not certainly_tensor(value, ctx, method):
        return None
    if not direct and not _tensor_leaves(value, ctx, method):
        return None
    if direct and not later_reads:
        return Fix(UNSAFE, desc, (ctx.edit(value, _wrap(ctx, value) + ".detach()"),))
    # Assign to a local, and keep a detached mirror on the attribute.
    if later_reads and _top_statement(method, stmt, parents) is not stmt:
        return None
    name = _fresh_name(attr, method, ctx.tree)
    text = ctx.text
    nl = text.newline()
    indent = text.indent_of(stmt.lineno)
    mirror = f"{indent}{self_name}.{attr} = {name}.detach(){nl}"
    end_line = stmt.end_lineno
    if end_line >= len(text.lines) and not text.line(end_line).endswith(("\n", "\r")):
        insert = ctx.insert(end_line, len(text.line(end_line)), nl + mirror.rstrip("\r\n"))
    else:
        insert = ctx.insert(end_line + 1, 0, mirror)
    edits = [ctx.edit(target, name), insert] + [ctx.edit(n, name) for n in later_reads]
    return Fix(UNSAFE, desc, tuple(edits))


def _tensor_leaves(value: ast.AST, ctx: _Context, method) -> bool:
    """Does unpacking ``value`` into a tuple target give tensors only?  Known for the
    recurrent layers (output, (h, c)) and for tuple displays of tensors."""
    if isinstance(value, ast.Tuple):
        return all(certainly_tensor(e, ctx, method) for e in value.elts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and method is not None:
        parent = ctx.parents.get(method)
        info = ctx.classes.get(parent.name) if isinstance(parent, ast.ClassDef) else None
        if info is not None and isinstance(value.func.value, ast.Name) and value.func.value.id == _self_name(method):
            ctor = info.facts.submodule_ctors.get(value.func.attr, "")
            return ctor.rsplit(".", 1)[-1] in ("LSTM", "GRU", "RNN")
    return False


# -- GLF002 ----------------------------------------------------------------------------
def _fix_container(f: Finding, ctx: _Context) -> Fix | None:
    if f.data.get("kind") != "container":
        return None
    found = _self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    fix = _rename_to_local(f, ctx)
    if fix is not None:
        return fix
    # Unsafe: detach what goes in, if forward never reads the container back.
    parents = ctx.parents
    for n in _self_attr_nodes(method, self_name, attr):
        parent = parents.get(n)
        if isinstance(parent, ast.Attribute) and parent.attr in CONTAINER_MUTATORS:
            continue
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
            continue
        if isinstance(n.ctx, ast.Store):
            continue
        return None
    node = _at(method, f.line, f.col, (ast.Call, ast.Subscript))
    value = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "append" and len(node.args) == 1:
            value = node.args[0]
        elif node.func.attr == "insert" and len(node.args) == 2:
            value = node.args[1]
    elif isinstance(node, ast.Subscript):
        stmt = _statement(node, parents)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node:
            value = stmt.value
    if value is None or not certainly_tensor(value, ctx, method):
        return None
    return Fix(UNSAFE, f"store .detach() in '{self_name}.{attr}' (readers outside forward lose the gradient)",
               (ctx.edit(value, _wrap(ctx, value) + ".detach()"),))


# -- GLF004 ----------------------------------------------------------------------------
def _fix_buffer(f: Finding, ctx: _Context) -> Fix | None:
    method = ctx.method(f)
    if method is None:
        return None
    self_name = _self_name(method)
    attr = (f.attribute or "").removeprefix(self_name + ".")
    parents = ctx.parents
    kind = f.data.get("kind")
    node = _at(method, f.line, f.col, (ast.Attribute, ast.Call, ast.Subscript))
    if node is None:
        return None
    stmt = _statement(node, parents)
    if stmt is None or not _alone_on_lines(ctx, stmt):
        return None
    later = {id(n) for s in _reachable_after(method, stmt) for n in ast.walk(s)}
    read_after = any(
        isinstance(n.ctx, ast.Load) and id(n) in later for n in _self_attr_nodes(method, self_name, attr)
    )
    applicability = UNSAFE if read_after else SAFE
    why = " (forward reads the buffer afterwards: its gradient history changes)" if read_after else ""
    if kind == "attr" and isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
        if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and stmt.targets[0] is node):
            return None
        if not certainly_tensor(stmt.value, ctx, method):
            return None
        return Fix(applicability, "assign .detach() of the new value" + why,
                   (ctx.edit(stmt.value, _wrap(ctx, stmt.value) + ".detach()"),))
    if kind == "register_buffer" and isinstance(node, ast.Call) and len(node.args) >= 2:
        value = node.args[1]
        return Fix(applicability, "register .detach() of the value" + why,
                   (ctx.edit(value, _wrap(ctx, value) + ".detach()"),))
    if kind in ("inplace", "container") and stmt.lineno == stmt.end_lineno:
        torch_name = next((k for k, v in ctx.imports.names.items() if v == "torch"), None)
        if torch_name is None:
            return None
        text = ctx.text
        indent = text.indent_of(stmt.lineno)
        unit = "\t" if indent.startswith("\t") else "    "
        line = stmt.lineno
        return Fix(
            applicability,
            "update the buffer under torch.no_grad()" + why,
            (ctx.insert(line, 0, f"{indent}with {torch_name}.no_grad():{text.newline()}{unit}"),),
        )
    return None


# -- GLF101 / GLF102 ----------------------------------------------------------------------
_NEW_NAMES = {"weight_norm", "spectral_norm"}
DEFAULT_NAME = '"weight"'


def _fix_legacy(f: Finding, ctx: _Context) -> Fix | None:
    name = f.attribute or ""
    node = _at(ctx.tree, f.line, f.col, (ast.Attribute, ast.Name))
    if node is None:
        return None
    if f.code == "GLF101":
        desc = ("state_dict keys change (weight_g/weight_v become parametrizations.weight.original0/1); "
                "old checkpoints need their keys mapped")
    else:
        desc = ("state_dict keys change (weight_orig/weight_u/weight_v become parametrizations.weight.original "
                "and the parametrization's _u/_v), and the power iteration updates u and v in another order, "
                "so outputs differ slightly")
    if name in _NEW_NAMES:
        if isinstance(node, ast.Attribute):
            prefix = ctx.text.segment(node.value)
            if prefix.rsplit(".", 1)[-1] == name:  # torch.nn.utils.weight_norm.weight_norm
                prefix = prefix.rsplit(".", 1)[0]
            return Fix(UNSAFE, f"use {prefix}.parametrizations.{name}; {desc}",
                       (ctx.edit(node, f"{prefix}.parametrizations.{name}"),))
        imp = _import_of(ctx, node.id)
        if imp is None:
            return None
        legacy = [a for a in imp.names if a.name in _NEW_NAMES]
        if imp.module in ("torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm") or len(legacy) == len(imp.names):
            if len(legacy) != len(imp.names):
                return None
            new_stmt = f"from torch.nn.utils.parametrizations import {', '.join(_alias(a) for a in imp.names)}"
            return Fix(UNSAFE, f"import {name} from torch.nn.utils.parametrizations; {desc}", (ctx.edit(imp, new_stmt),))
        # Split the import: keep the others, import the legacy names from parametrizations.
        if not _alone_on_lines(ctx, imp):
            return None
        keep = [a for a in imp.names if a not in legacy]
        text = ctx.text
        indent = text.indent_of(imp.lineno)
        nl = text.newline()
        new = (
            f"from {imp.module} import {', '.join(_alias(a) for a in keep)}{nl}"
            f"{indent}from torch.nn.utils.parametrizations import {', '.join(_alias(a) for a in legacy)}"
        )
        return Fix(UNSAFE, f"import {name} from torch.nn.utils.parametrizations; {desc}", (ctx.edit(imp, new),))
    if name in ("remove_weight_norm", "remove_spectral_norm"):
        call = ctx.parents.get(node)
        if not (isinstance(call, ast.Call) and call.func is node and call.args and not any(isinstance(a, ast.Starred) for a in call.args)):
            return None
        if isinstance(node, ast.Attribute):
            prefix = ctx.text.segment(node.value)
            if prefix.rsplit(".", 1)[-1] in ("weight_norm", "spectral_norm"):
                prefix = prefix.rsplit(".", 1)[0]
            func = f"{prefix}.parametrize.remove_parametrizations"
        else:
            torch_name = next((k for k, v in ctx.imports.names.items() if v == "torch"), None)
            if torch_name is None:
                return None
            func = f"{torch_name}.nn.utils.parametrize.remove_parametrizations"
        module = ctx.text.segment(call.args[0])
        pname = ctx.text.segment(call.args[1]) if len(call.args) > 1 else None
        for k in call.keywords:
            if k.arg == "name":
                pname = ctx.text.segment(k.value)
        return Fix(UNSAFE, f"use {func}; it only undoes the parametrizations API, so apply that too",
                   (ctx.edit(call, f"{func}({module}, {pname or DEFAULT_NAME})"),))
    return None


def _alias(a: ast.alias) -> str:
    return f"{a.name} as {a.asname}" if a.asname else a.name


def _import_of(ctx: _Context, local: str) -> ast.ImportFrom | None:
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("torch.nn.utils"):
            for a in n.names:
                if (a.asname or a.name) == local:
                    return n
    return None


# -- GLF201 ----------------------------------------------------------------------------
def _fix_deepcopy(f: Finding, ctx: _Context) -> Fix | None:
    call = _at(ctx.tree, f.line, f.col, ast.Call)
    if call is None or len(call.args) != 1 or call.keywords:
        return None
    arg = call.args[0]
    scope = ctx.parents.get(call)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = ctx.parents.get(scope)
    if certainly_tensor(arg, ctx, scope):
        caveat = "the copy no longer requires grad"
    elif isinstance(arg, ast.Call) and not isinstance(arg.func, ast.Attribute) or (
        isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("forward", "__call__")
    ):
        caveat = "the copy no longer requires grad; if the model returns a tuple or dict, copy each item instead"
    else:
        return None
    return Fix(UNSAFE, f"copy the tensor with .detach().clone() ({caveat})",
               (ctx.edit(call, _wrap(ctx, arg) + ".detach().clone()"),))


_BUILDERS = {
    "GLF001": _fix_attr_store,
    "GLF002": _fix_container,
    "GLF004": _fix_buffer,
    "GLF101": _fix_legacy,
    "GLF102": _fix_legacy,
    "GLF201": _fix_deepcopy,
}
