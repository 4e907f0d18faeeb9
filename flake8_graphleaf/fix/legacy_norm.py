"""Fixes for legacy ``weight_norm`` / ``spectral_norm`` (GLF101, GLF102): the parametrizations API,
imports split as needed, ``remove_parametrizations(m, "weight")`` (unsafe: state_dict keys differ)."""

from __future__ import annotations

import ast

from ..analysis.findings import UNSAFE, Finding, Fix
from .context import Context, alone_on_lines, at
from .cst import NoFix

_RNN = ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell")


def fix_weight_drop(f: Finding, ctx: Context) -> Fix | None:
    """GLF005: no edit.  A weight-drop wrapper deletes a Parameter and sets a computed tensor in its
    place before each forward; rewriting that cannot be proven to keep its dropout, its RNN weight
    flattening and its state_dict, so the reason and the replacement go into the finding."""
    raise NoFix(
        "not rewritten automatically: a non-leaf tensor set on a module (weight drop and the like) cannot be "
        "moved without changing what forward or state_dict sees; register the computation with "
        "torch.nn.utils.parametrize.register_parametrization(module, name, YourParametrization()) instead"
    )


def _reads_g_v(ctx: Context) -> str | None:
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr in ("weight_g", "weight_v") and isinstance(n.ctx, ast.Load):
            return f"line {n.lineno} reads .{n.attr}"
        if isinstance(n, ast.Constant) and n.value in ("weight_g", "weight_v", "_g", "_v"):
            return f"line {n.lineno} names {n.value!r}"
    if ctx.project is not None:
        for attr in ("weight_g", "weight_v"):
            for r in ctx.project.index.attribute_reads(attr):
                return f"{r.path}:{r.line} reads {attr}"
    return None


def _is_rnn(ctx: Context, call: ast.Call) -> bool:
    if not call.args:
        return False
    arg = call.args[0]
    names = [call.args[1]] if len(call.args) > 1 else []
    names += [k.value for k in call.keywords if k.arg == "name"]
    if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(("weight_hh", "weight_ih"))
           for n in names):
        return True
    ctor = ""
    if isinstance(arg, ast.Call):
        ctor = ctx.imports.qualname(arg.func) or ast.unparse(arg.func)
    elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
        scope = ctx.parents.get(call)
        while scope is not None and not isinstance(scope, ast.ClassDef):
            scope = ctx.parents.get(scope)
        info = ctx.classes.get(scope.name) if scope is not None else None
        ctor = info.facts.submodule_ctors.get(arg.attr, "") if info is not None else ""
    elif isinstance(arg, ast.Name):
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                    isinstance(t, ast.Name) and t.id == arg.id for t in n.targets):
                ctor = ctx.imports.qualname(n.value.func) or ast.unparse(n.value.func)
    return ctor.rsplit(".", 1)[-1] in _RNN


def _uses(ctx: Context, node) -> list[ast.Call]:
    """The calls this legacy name makes (for an import: every call of the imported name)."""
    calls = []
    local = node.id if isinstance(node, ast.Name) else None
    for n in ast.walk(ctx.tree):
        if not isinstance(n, ast.Call):
            continue
        if n.func is node or (local and isinstance(n.func, ast.Name) and n.func.id == local):
            calls.append(n)
    return calls


def _guard_weight_norm(f: Finding, ctx: Context, node) -> None:
    if f.code != "GLF101":
        return
    if f.data.get("sent_at"):
        raise NoFix(f"not migrated: the module is sent to another process at {f.data['sent_at']}, and a module "
                    "with the parametrizations' weight_norm cannot be pickled either: send its state_dict() and "
                    "rebuild the module in the new process")
    why = _reads_g_v(ctx)
    if why:
        raise NoFix(f"not migrated: the code reads the legacy weight_g / weight_v ({why}), which the parametrizations "
                    "API replaces with parametrizations.weight.original0/1")
    for call in _uses(ctx, node):
        if _is_rnn(ctx, call):
            raise NoFix(f"not migrated: line {call.lineno} applies weight_norm to a recurrent layer "
                        "(nn.LSTM/GRU/RNN); parametrizations.weight_norm on it still breaks deepcopy after forward "
                        "(_flat_weights keeps the computed weights)")

# -- GLF101 / GLF102 ----------------------------------------------------------------------
_NEW_NAMES = {"weight_norm", "spectral_norm"}
DEFAULT_NAME = '"weight"'


def fix_legacy(f: Finding, ctx: Context) -> Fix | None:
    name = f.attribute or ""
    node = at(ctx.tree, f.line, f.col, (ast.Attribute, ast.Name))
    if node is None:
        return None
    _guard_weight_norm(f, ctx, node)
    if f.code == "GLF101":
        desc = ("state_dict keys change (weight_g/weight_v become parametrizations.weight.original0/1); "
                "old checkpoints need their keys mapped")
    else:
        desc = ("state_dict keys change (weight_orig/weight_u/weight_v become parametrizations.weight.original "
                "and the parametrization's _u/_v), and the power iteration updates u and v in another order, "
                "so outputs differ slightly")
    # torch refuses to pickle a parametrized module (deepcopy works): torch.save(model) and a spawned
    # process given the model raise "Serialization of parametrized modules is only supported through state_dict()"
    desc += ("; a parametrized module cannot be pickled whole (torch.save(model), a spawned process given the "
             "model): save or send its state_dict")
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
        if not alone_on_lines(ctx, imp):
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


def _import_of(ctx: Context, local: str) -> ast.ImportFrom | None:
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("torch.nn.utils"):
            for a in n.names:
                if (a.asname or a.name) == local:
                    return n
    return None
