"""The deepcopy walk: which tensors make ``copy.deepcopy(obj)`` raise, and where deepcopy reaches them.

``copy.deepcopy`` raises ``RuntimeError: Only Tensors created explicitly by the user
(graph leaves) support the deepcopy protocol`` as soon as it reaches a tensor that is
not a graph leaf (``grad_fn is not None``).  :func:`find_graph_tensors` walks exactly
what deepcopy would walk (``__deepcopy__``, ``__reduce_ex__`` / ``__getstate__``, ``__slots__``,
hook dicts, bound methods' ``__self__``, partial arguments) and lists every such tensor with
its path.  It is the only such walk in the package: ``explain`` and ``verify`` use it.

Imports torch.  Pure Python, iterative (no recursion limit on deep or cyclic graphs), and it
never mutates what it inspects.
"""

from __future__ import annotations

import collections
import copy
import copyreg
import functools
import os
import re
import sys
import sysconfig
import types
from typing import Any

import torch
from torch import nn

from .findings import Findings, GraphTensor, Problem

TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def library_dirs() -> tuple[str, ...]:
    """Folders of code that is not the user's: torch, this package, the standard library, installed packages
    (also a site-packages folder put on ``sys.path`` after the start, by a ``conftest.py`` or a ``.pth``)."""
    return _library_dirs(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _library_dirs(search_path: tuple[str, ...]) -> tuple[str, ...]:
    dirs = {TORCH_DIR, _PACKAGE_DIR}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            path = sysconfig.get_paths()[key]
        except KeyError:
            continue
        dirs.add(os.path.abspath(path) + os.sep)
    for path in search_path:
        if path and ("site-packages" in path or "dist-packages" in path):
            dirs.add(os.path.abspath(path) + os.sep)
    return tuple(sorted(dirs))


def _user_code(code) -> bool:
    name = code.co_filename
    return bool(name) and name[:1] != "<" and not os.path.abspath(name).startswith(library_dirs())

_dispatch = getattr(copy, "_deepcopy_dispatch", {})
_atomic_fn = getattr(copy, "_deepcopy_atomic", None)
_ATOMIC: frozenset[type] = frozenset(
    {t for t, f in _dispatch.items() if f is _atomic_fn}
    | {
        type(None), int, float, bool, complex, bytes, str, types.CodeType, type, range,
        types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented), types.FunctionType, property,
        torch.dtype, torch.device, torch.layout, torch.memory_format,
    }
) | {__import__("weakref").ref}

_MODULE_STATE_DICTS = ("_parameters", "_buffers", "_modules")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------- the walk

# A path is a linked list of nodes (parent, kind, key, owner), rendered only for reports.
# ATTR nodes are attributes of ``owner`` (a module or an object whose state deepcopy
# copies); they make the attribute chains that the static mapping compares.  KEY and INDEX
# nodes name their container as ``owner`` (the object a recorded store put the tensor into).
_ATTR, _KEY, _INDEX, _RAW = 0, 1, 2, 3
_EMPTY_SKIP = (dict, list, tuple, set, frozenset, collections.OrderedDict)


def _attr_seg(key) -> str:
    if isinstance(key, str) and _IDENT.match(key):
        return "." + key
    if isinstance(key, str) and key.isdigit():
        return f"[{key}]"  # nn.Sequential / nn.ModuleList children: model.layers[3]
    return f"[{key!r}]"


def module_name(root: str, qualname: str) -> str:
    if not qualname:
        return root
    return root + "".join(_attr_seg(p) for p in qualname.split("."))


def _render(path) -> str:
    parts = []
    while path is not None:
        path, kind, key, _owner = path
        if kind == _ATTR:
            parts.append(_attr_seg(key))
        elif kind == _KEY:
            parts.append(f"[{key!r}]")
        elif kind == _INDEX:
            parts.append(f"[{key}]")
        else:
            parts.append(key)
    return "".join(reversed(parts))


def _owners(path) -> list[tuple[Any, tuple[str, ...]]]:
    """[(owner, attribute names from it down to the tensor)], nearest owner first."""
    keys: list[str] = []
    owners: list[tuple[Any, tuple[str, ...]]] = []
    while path is not None:
        path, kind, key, owner = path
        if kind == _ATTR and isinstance(key, str):
            keys.append(key)
            if owner is not None:
                chain = tuple(reversed(keys))
                if owners and owners[-1][0] is owner:
                    owners[-1] = (owner, chain)
                else:
                    owners.append((owner, chain))
    return owners


def _is_plain_module(x, cls) -> bool:
    return (
        isinstance(x, nn.Module)
        and cls.__getstate__ is nn.Module.__getstate__
        and cls.__reduce_ex__ is object.__reduce_ex__
        and getattr(cls, "__reduce__", object.__reduce__) is object.__reduce__
        and cls not in copyreg.dispatch_table
    )


def _graph_leaf_error(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and "graph leaves" in str(exc)


def find_graph_tensors(obj: Any, name: str | None = None, *, requiring_grad: bool = False,
                       seen: set[int] | None = None) -> Findings:
    """Every tensor that ``copy.deepcopy(obj)`` would reach and that is not a graph leaf.

    The walk follows deepcopy's own rules: lists, tuples and dicts item by item; a bound
    method through its ``__self__``; a ``nn.Module`` through its whole ``__dict__``
    (``_parameters``, ``_buffers``, ``_modules``, hook dicts and plain attributes); other
    objects through ``__reduce_ex__(4)`` (``__getstate__``, ``__slots__``, dataclasses,
    ``functools.partial`` arguments ...).  A leaf ``Tensor``'s ``.grad`` and ``__dict__``
    are followed, a ``Parameter``'s are not (``Parameter.__deepcopy__`` drops them).  An
    object with its own ``__deepcopy__`` is copied once on the side: if that succeeds
    nothing under it is reported; if it raises the graph-leaf error its state is walked.
    Each tensor is reported once, at the first path deepcopy would take to it.

    With ``requiring_grad=True`` leaves that require grad (``nn.Parameter`` included) are
    reported too: what a ``DataLoader`` worker cannot batch (process-boundary checks).

    ``seen`` (the ids of objects already walked) may be shared between calls: walking several roots
    that share objects (the modules a test made, with their submodules), each object is walked, and
    each tensor reported, once, under the first root that reaches it.
    """
    if name is None:
        name = "model" if isinstance(obj, nn.Module) else "obj"
    found: list[GraphTensor] = []
    problems: list[Problem] = []
    if seen is None:
        seen = set()
    keep: list[Any] = []  # transient objects (reduce results) stay alive so their ids are not reused
    # id(obj) -> (file, line, name, ids of its own attributes' values): its own copy method's line
    methods: dict[int, tuple] = {}
    stack: list[tuple[Any, Any]] = [(obj, (None, _RAW, name, None))]
    parameter_deepcopy = nn.Parameter.__deepcopy__
    tensor_deepcopy = torch.Tensor.__deepcopy__
    uninit = getattr(nn.parameter, "UninitializedTensorMixin", None)
    atomic = _ATOMIC
    skip_empty = _EMPTY_SKIP
    Tensor = torch.Tensor
    OrderedDict = collections.OrderedDict
    push = stack.append

    while stack:
        x, path = stack.pop()
        cls = type(x)
        if cls in atomic or isinstance(x, type):
            continue
        ident = id(x)
        if ident in seen:
            continue
        seen.add(ident)
        children: list[tuple[Any, Any]]

        if isinstance(x, Tensor):
            if not x.is_leaf or (requiring_grad and x.requires_grad):
                found.append(_graph_tensor(x, path, methods))
                continue
            dc = getattr(cls, "__deepcopy__", None)
            if dc is parameter_deepcopy or (uninit is not None and isinstance(x, uninit)):
                continue  # Parameter.__deepcopy__ rebuilds from .data: no grad, no __dict__
            if dc is not tensor_deepcopy and _trial_deepcopy(x, path, problems, methods):
                continue
            # Tensor.__deepcopy__: .grad, then slots (subclasses), then __dict__.
            children = []
            grad = x.grad
            if grad is not None:
                children.append((grad, (path, _RAW, ".grad", x)))  # owner: the leaf whose .grad it is
            if cls is not Tensor:
                for slot in copyreg._slotnames(cls):
                    if hasattr(x, slot):
                        children.append((getattr(x, slot), (path, _ATTR, slot, None)))
            tensor_dict = getattr(x, "__dict__", None)
            if tensor_dict:
                children += [(v, (path, _ATTR, k, None)) for k, v in tensor_dict.items()]
        elif cls is list or cls is tuple:
            children = [(v, (path, _INDEX, i, x)) for i, v in enumerate(x)]
        elif cls is dict or cls is OrderedDict:
            children = []
            for k, v in x.items():
                if type(k) not in atomic:
                    children.append((k, (path, _RAW, f".keys()[{k!r}]", None)))
                children.append((v, (path, _KEY, k, x)))
        elif cls is types.MethodType:
            # copy._deepcopy_method: type(x)(x.__func__, deepcopy(x.__self__, memo))
            children = [(x.__self__, (path, _RAW, ".__self__", None))]
        elif cls is set or cls is frozenset:
            children = [(v, (path, _RAW, f"{{{i}}}", None)) for i, v in enumerate(x)]
        elif _is_plain_module(x, cls) and getattr(x, "__deepcopy__", None) is None:
            children = []
            for k, v in x.__dict__.items():
                tv = type(v)
                if tv in atomic or (tv in skip_empty and not v) or k == "_compiled_call_impl":
                    continue
                if k in _MODULE_STATE_DICTS and (tv is dict or tv is OrderedDict):
                    seen.add(id(v))
                    children += [(sub, (path, _ATTR, n, x)) for n, sub in v.items() if sub is not None]
                else:
                    children.append((v, (path, _ATTR, k, x)))
        else:
            if getattr(x, "__deepcopy__", None) is not None and _trial_deepcopy(x, path, problems, methods):
                continue
            try:
                rv = _reduce_noting(x, cls, methods)
            except Exception as exc:  # deepcopy would raise this too
                problems.append(Problem(_render(path), f"{type(exc).__name__}: {exc}"))
                continue
            if isinstance(rv, str):
                continue
            keep.append(rv)
            children = _reduce_children(x, rv, path)

        for item in reversed(children):
            push(item)
    return Findings(found, problems)


def _reduce(x, cls):
    reductor = copyreg.dispatch_table.get(cls)
    if reductor is not None:
        return reductor(x)
    reductor = getattr(x, "__reduce_ex__", None)
    if reductor is not None:
        return reductor(4)
    reductor = getattr(x, "__reduce__", None)
    if reductor is not None:
        return reductor()
    raise copy.Error(f"un(deep)copyable object of type {cls}")


def _reduce_children(x, rv, path):
    """What copy._reconstruct deep-copies: args, state, list items, dict items."""
    rv = tuple(rv) + (None,) * (6 - len(rv))
    _func, args, state, listiter, dictiter, _setter = rv[:6]
    children = []
    if isinstance(x, functools.partial) and isinstance(state, tuple) and len(state) == 4:
        func, pargs, kwds, pdict = state
        children.append((func, (path, _RAW, ".func", None)))
        children += [(a, (path, _RAW, f".args[{i}]", None)) for i, a in enumerate(pargs or ())]
        children += [(v, (path, _RAW, f".keywords[{k!r}]", None)) for k, v in (kwds or {}).items()]
        children += [(v, (path, _ATTR, k, x)) for k, v in (pdict or {}).items()]
        return children
    for i, a in enumerate(args or ()):
        children.append((a, (path, _RAW, f".__reduce__()[1][{i}]", None)))
    if state is not None:
        slotstate = None
        if isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
            state, slotstate = state
        for part in (state, slotstate):
            if part is None:
                continue
            if isinstance(part, dict):
                children += [(v, (path, _ATTR, k, x)) for k, v in part.items()]
            else:
                children.append((part, (path, _RAW, ".__getstate__()", None)))
    if listiter is not None:
        children += [(v, (path, _INDEX, i, x)) for i, v in enumerate(listiter)]
    if dictiter is not None:
        children += [(v, (path, _KEY, k, x)) for k, v in dictiter]
    return children


def _reduce_noting(x, cls, methods):
    """:func:`_reduce`; where the class has its own ``__getstate__`` / ``__reduce_ex__`` / ``__reduce__`` in the
    user's code, its return line is noted in ``methods`` (the state it builds is what deepcopy copies)."""
    rv = _reduce(x, cls)
    for name in ("__getstate__", "__reduce_ex__", "__reduce__"):
        code = getattr(getattr(cls, name, None), "__code__", None)
        if code is not None and _user_code(code):
            # a state that only passes the object's own attributes on (drops a lock) is no root: the
            # method is named for the graph tensors it makes itself
            own = getattr(x, "__dict__", None)
            kept = frozenset(id(v) for v in own.values()) if type(own) is dict else frozenset()
            methods[id(x)] = (os.path.abspath(code.co_filename), _return_line(code), f"{cls.__qualname__}.{name}",
                              kept)
            break
    return rv


def cached_property_line(owner, attr) -> tuple[str, int] | None:
    """(file, return line) of the user's ``functools.cached_property`` whose value ``owner.<attr>`` is: the
    property's function made the tensor, and ``cached_property`` kept it in the instance's ``__dict__`` (a
    store by the standard library, which no recorder names)."""
    import functools

    if not isinstance(attr, str):
        return None
    for klass in type(owner).__mro__:
        prop = klass.__dict__.get(attr)
        if prop is None:
            continue
        func = getattr(prop, "func", None) if isinstance(prop, functools.cached_property) else None
        code = getattr(func, "__code__", None)
        if code is None or not _user_code(code):
            return None
        return os.path.abspath(code.co_filename), _return_line(code)
    return None


def _return_line(code) -> int:
    """The line of the function's only ``return`` statement, else its ``def`` line.  (The walk may run in
    a trace function, where no profiler or tracer sees the method run.)"""
    import ast
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return code.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name and \
                min([d.lineno for d in node.decorator_list] + [node.lineno]) == code.co_firstlineno:
            returns, stack = [], list(node.body)
            while stack:
                sub = stack.pop()
                if isinstance(sub, ast.Return):
                    returns.append(sub.lineno)
                elif not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    stack.extend(ast.iter_child_nodes(sub))
            return returns[0] if len(returns) == 1 else node.lineno
    return code.co_firstlineno


def module_call_lines(code, owner) -> list[tuple[int, str]]:
    """[(line, attribute)] of the calls in ``code`` (a method of ``owner``'s class, e.g. a dataset's
    ``__getitem__``) of a module ``owner`` holds whose parameters require grad: ``self.embedding(idx)``,
    ``self.encoder.encode(x)``.  The module is read from the instance's ``__dict__`` (no property runs): what
    the method makes with it has grad on, unless the call runs under ``torch.no_grad()``."""
    import ast
    import linecache

    try:
        state = object.__getattribute__(owner, "__dict__")
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except Exception:
        return []
    if type(state) is not dict:
        return []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name and \
                min([d.lineno for d in node.decorator_list] + [node.lineno]) == code.co_firstlineno:
            break
    else:
        return []
    self_name = node.args.args[0].arg if node.args.args else "self"
    out: list[tuple[int, str]] = []

    def visit(sub, quiet: bool) -> None:
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(sub, ast.With) and any(
                isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, (ast.Attribute, ast.Name))
                and getattr(i.context_expr.func, "attr", getattr(i.context_expr.func, "id", "")) in
                ("no_grad", "inference_mode") for i in sub.items):
            quiet = True
        if isinstance(sub, ast.Call) and not quiet:
            target = sub.func
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute):
                target = target.value  # self.encoder.encode(x)
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                    target.value.id == self_name:
                module = state.get(target.attr)
                if isinstance(module, nn.Module) and any(p.requires_grad for p in module.parameters()):
                    out.append((sub.lineno, target.attr))
        for child in ast.iter_child_nodes(sub):
            visit(child, quiet)

    for stmt in node.body:
        visit(stmt, False)
    return sorted(set(out))


def _trial_deepcopy(x, path, problems, methods=None) -> bool:
    """True when ``x``'s own ``__deepcopy__`` copies it fine (nothing under it to report)."""
    try:
        copy.deepcopy(x)
    except RecursionError:
        problems.append(Problem(_render(path), "RecursionError: too deep for copy.deepcopy"))
        return True
    except Exception as exc:
        if _graph_leaf_error(exc):
            if methods is not None:
                tb, site = exc.__traceback__, None
                while tb is not None:  # the innermost __deepcopy__ of the user's code: the line that copied it
                    code = tb.tb_frame.f_code
                    if code.co_name == "__deepcopy__" and _user_code(code):
                        site = (os.path.abspath(code.co_filename), tb.tb_lineno, f"{type(x).__qualname__}.__deepcopy__")
                    tb = tb.tb_next
                if site is not None:
                    methods[id(x)] = site + (frozenset(),)
            return False  # walk its state to find the tensor
        problems.append(Problem(_render(path), f"{type(exc).__name__}: {exc}"))
        return True
    return True


def _graph_tensor(t, path, methods=None) -> GraphTensor:
    owners = _owners(path)
    copy_method = None
    node = path
    while methods and node is not None and copy_method is None:  # the nearest object whose own method copied it
        owner = node[3]
        if owner is not None:
            entry = methods.get(id(owner))
            if entry is not None and id(t) not in entry[3]:
                copy_method = entry[:3]
        node = node[0]
    grad_of = path[3] if path is not None and path[1] == _RAW and path[2] == ".grad" else None
    # the object that holds it directly: the module or object of an attribute, the list or dict of an item
    holder = path[3] if path is not None and path[1] in (_ATTR, _KEY, _INDEX) else None
    owner_class = type(owners[0][0]).__name__ if owners else None
    attribute = owners[0][1][0] if owners and owners[0][1] else None
    return GraphTensor(
        path=_render(path),
        shape=tuple(t.shape),
        dtype=str(t.dtype).replace("torch.", ""),
        device=str(t.device),
        grad_fn=type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        requires_grad=bool(t.requires_grad),
        owner_class=owner_class,
        attribute=attribute,
        owners=owners,
        tensor=t,
        grad_of=grad_of,
        holder=holder,
        copy_method=copy_method,
    )


# --------------------------------------------------------------------------- static mapping
