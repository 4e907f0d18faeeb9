"""Runtime locator: which tensors make ``copy.deepcopy(obj)`` raise, and which line put them there.

``copy.deepcopy`` raises ``RuntimeError: Only Tensors created explicitly by the user
(graph leaves) support the deepcopy protocol`` as soon as it reaches a tensor that is
not a graph leaf (``grad_fn is not None``).  :func:`find_graph_tensors` walks exactly
what deepcopy would walk and lists every such tensor with its path;
:func:`explain` adds, for each one, the source line that the static analysis
(:mod:`flake8_graphleaf.analysis`) names for that class and attribute;
:func:`trace_stores` records, while a forward runs, the file:line that assigned a graph
tensor to a module attribute or updated a buffer in place with one.

This is the only module of the package, with :mod:`flake8_graphleaf.explain`, that
imports torch; the linter never imports it.  The walk is pure Python, iterative (no
recursion limit on deep or cyclic graphs) and never mutates what it inspects.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import copyreg
import functools
import inspect
import linecache
import os
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import torch
from torch import nn

from .stmtwalk import parent_map

__all__ = [
    "GraphTensor",
    "Source",
    "StoreRecord",
    "StoreLog",
    "find_graph_tensors",
    "explain",
    "format_explanation",
    "trace_stores",
]

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_THIS_FILE = os.path.abspath(__file__)

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


# --------------------------------------------------------------------------- results


@dataclass
class Source:
    """A line that stored (or may have stored) a graph tensor."""

    file: str
    line: int
    code: str  # rule code ("GLF002"), or "trace" for a line recorded by trace_stores
    text: str  # the source line, stripped
    attribute: str | None = None
    message: str = ""
    traced: bool = False  # a static finding whose line trace_stores also recorded

    def location(self) -> str:
        return f"{_display_path(self.file)}:{self.line}"


@dataclass
class GraphTensor:
    """A tensor that deepcopy would reach and refuse (it is not a graph leaf)."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    grad_fn: str | None
    requires_grad: bool
    owner_class: str | None  # class of the object whose attribute holds it (module, hook object, ...)
    attribute: str | None  # that attribute's name, e.g. "features" for model.encoder.features[3]
    sources: list[Source] = field(default_factory=list)
    # [(owner object, attribute names from it down to the tensor)], nearest owner first.
    owners: list[tuple[Any, tuple[str, ...]]] = field(default_factory=list, repr=False, compare=False)
    tensor: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        shape = "(" + ", ".join(str(s) for s in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
        return f"{shape} {self.dtype} {self.device} grad_fn={self.grad_fn}"


@dataclass
class Problem:
    """Something deepcopy would fail on that is not a graph tensor (e.g. an object that cannot be copied)."""

    path: str
    error: str


class Findings(list):
    """The list of :class:`GraphTensor` returned by :func:`find_graph_tensors` / :func:`explain`;
    ``problems`` lists what else deepcopy would stumble on."""

    problems: list[Problem]

    def __init__(self, items: Iterable[GraphTensor] = (), problems: Iterable[Problem] = ()):
        super().__init__(items)
        self.problems = list(problems)

    def __str__(self) -> str:
        return format_explanation(self)


# --------------------------------------------------------------------------- the walk

# A path is a linked list of nodes (parent, kind, key, owner), rendered only for reports.
# ATTR nodes are attributes of ``owner`` (a module or an object whose state deepcopy
# copies); they make the attribute chains that the static mapping compares.
_ATTR, _KEY, _INDEX, _RAW = 0, 1, 2, 3
_EMPTY_SKIP = (dict, list, tuple, set, frozenset, collections.OrderedDict)


def _attr_seg(key) -> str:
    if isinstance(key, str) and _IDENT.match(key):
        return "." + key
    if isinstance(key, str) and key.isdigit():
        return f"[{key}]"  # nn.Sequential / nn.ModuleList children: model.layers[3]
    return f"[{key!r}]"


def _module_name(root: str, qualname: str) -> str:
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


def find_graph_tensors(obj: Any, name: str | None = None) -> Findings:
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
    """
    if name is None:
        name = "model" if isinstance(obj, nn.Module) else "obj"
    found: list[GraphTensor] = []
    problems: list[Problem] = []
    seen: set[int] = set()
    keep: list[Any] = []  # transient objects (reduce results) stay alive so their ids are not reused
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
            if not x.is_leaf:
                found.append(_graph_tensor(x, path))
                continue
            dc = getattr(cls, "__deepcopy__", None)
            if dc is parameter_deepcopy or (uninit is not None and isinstance(x, uninit)):
                continue  # Parameter.__deepcopy__ rebuilds from .data: no grad, no __dict__
            if dc is not tensor_deepcopy and _trial_deepcopy(x, path, problems):
                continue
            # Tensor.__deepcopy__: .grad, then slots (subclasses), then __dict__.
            children = []
            grad = x.grad
            if grad is not None:
                children.append((grad, (path, _RAW, ".grad", None)))
            if cls is not Tensor:
                for slot in copyreg._slotnames(cls):
                    if hasattr(x, slot):
                        children.append((getattr(x, slot), (path, _ATTR, slot, None)))
            tensor_dict = getattr(x, "__dict__", None)
            if tensor_dict:
                children += [(v, (path, _ATTR, k, None)) for k, v in tensor_dict.items()]
        elif cls is list or cls is tuple:
            children = [(v, (path, _INDEX, i, None)) for i, v in enumerate(x)]
        elif cls is dict or cls is OrderedDict:
            children = []
            for k, v in x.items():
                if type(k) not in atomic:
                    children.append((k, (path, _RAW, f".keys()[{k!r}]", None)))
                children.append((v, (path, _KEY, k, None)))
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
            if getattr(x, "__deepcopy__", None) is not None and _trial_deepcopy(x, path, problems):
                continue
            try:
                rv = _reduce(x, cls)
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
        children += [(v, (path, _INDEX, i, None)) for i, v in enumerate(listiter)]
    if dictiter is not None:
        children += [(v, (path, _KEY, k, None)) for k, v in dictiter]
    return children


def _trial_deepcopy(x, path, problems) -> bool:
    """True when ``x``'s own ``__deepcopy__`` copies it fine (nothing under it to report)."""
    try:
        copy.deepcopy(x)
    except RecursionError:
        problems.append(Problem(_render(path), "RecursionError: too deep for copy.deepcopy"))
        return True
    except Exception as exc:
        if _graph_leaf_error(exc):
            return False  # walk its state to find the tensor
        problems.append(Problem(_render(path), f"{type(exc).__name__}: {exc}"))
        return True
    return True


def _graph_tensor(t, path) -> GraphTensor:
    owners = _owners(path)
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
    )


# --------------------------------------------------------------------------- static mapping


def _display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


def _user_class_files(cls) -> list[tuple[type, str]]:
    out = []
    for c in cls.__mro__:
        mod = getattr(c, "__module__", "") or ""
        if c is object or mod == "builtins" or mod == "torch" or mod.startswith("torch."):
            continue
        try:
            f = inspect.getsourcefile(c)
        except (TypeError, OSError):
            f = None
        if f and not os.path.abspath(f).startswith(_TORCH_DIR):
            out.append((c, os.path.abspath(f)))
    return out


class _StaticIndex:
    """Findings of the static analysis, one analysis per source file."""

    def __init__(self):
        self._cache: dict[str, list] = {}

    def findings(self, path: str) -> list:
        if path not in self._cache:
            from .analysis import analyze_source

            try:
                with open(path, encoding="utf-8") as fh:
                    src = fh.read()
                self._cache[path] = analyze_source(src, path)
            except (OSError, SyntaxError, UnicodeDecodeError, RecursionError, ValueError):
                self._cache[path] = []
        return self._cache[path]


def _finding_chain(attribute: str | None) -> tuple[str, tuple[str, ...]]:
    """'self.stats[...]' -> ('self', ('stats',)); 'self.<name>' -> ('self', ('*',))."""
    if not attribute:
        return "", ()
    text = re.sub(r"\[.*?\]", "", attribute)
    parts = text.split(".")
    root, rest = parts[0], parts[1:]
    return root, tuple("*" if p.startswith("<") else p for p in rest if p)


def _chain_matches(fchain, chain) -> bool:
    return len(fchain) == len(chain) and all(a == "*" or a == b for a, b in zip(fchain, chain))


_LEGACY_HOOKS = {}
try:  # the legacy reparametrizations keep a non-leaf weight and recompute it in a pre-hook
    from torch.nn.utils.weight_norm import WeightNorm as _WN

    _LEGACY_HOOKS[_WN] = "GLF101"
except ImportError:  # pragma: no cover
    pass
try:
    from torch.nn.utils.spectral_norm import SpectralNorm as _SN

    _LEGACY_HOOKS[_SN] = "GLF102"
except ImportError:  # pragma: no cover
    pass


@functools.lru_cache(maxsize=64)
def _parsed(path: str):
    import ast

    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return None
    return tree, parent_map(tree)


def _built_at(path: str, line: int, col: int, chain: tuple[str, ...]) -> bool:
    """True when the expression at line:col builds the submodule at ``self.<chain>``:
    ``self.a = f(...)`` for ("a",), or positional argument i of ``self.a = Seq(...)`` for ("a", "i")."""
    import ast

    parsed = _parsed(path)
    if parsed is None or not chain:
        return False
    tree, parents = parsed
    node = next((n for n in ast.walk(tree) if getattr(n, "lineno", None) == line
                 and getattr(n, "col_offset", None) == col and isinstance(n, (ast.Name, ast.Attribute))), None)
    if node is None:
        return False
    call = parents.get(node)
    if not isinstance(call, ast.Call):
        return False
    indices = []
    cur = call
    while True:
        parent = parents.get(cur)
        if isinstance(parent, ast.Call) and cur in parent.args:
            indices.append(str(parent.args.index(cur)))
            cur = parent
            continue
        if isinstance(parent, ast.Starred) or isinstance(parent, (ast.List, ast.Tuple)):
            return False
        break
    stmt = parents.get(cur)
    if not isinstance(stmt, ast.Assign) or stmt.value is not cur:
        return False
    names = [t.attr for t in stmt.targets if isinstance(t, ast.Attribute)]
    if chain[0] not in names:
        return False
    return tuple(reversed(indices)) == tuple(chain[1:])


def _legacy_code(owner, chain) -> str | None:
    if not isinstance(owner, nn.Module) or len(chain) != 1:
        return None
    for hook in getattr(owner, "_forward_pre_hooks", {}).values():
        code = _LEGACY_HOOKS.get(type(hook))
        if code and getattr(hook, "name", None) == chain[0]:
            return code
    return None


def _source_of(f, path: str) -> Source:
    text = linecache.getline(path, f.line).strip()
    return Source(file=path, line=f.line, code=f.code, text=text, attribute=f.attribute, message=f.message)


def _map_static(item: GraphTensor, index: _StaticIndex, extra_files: Iterable[str]) -> list[Source]:
    files: list[tuple[set[str], str]] = []  # (class names this file may speak for, path)
    for owner, _chain in item.owners:
        for c, f in _user_class_files(type(owner)):
            files.append(({c.__name__}, f))
    for f in extra_files:
        if f:
            files.append((set(), os.path.abspath(f)))
    by_file: dict[str, set[str]] = {}
    for names, f in files:
        by_file.setdefault(f, set()).update(names)
    out: list[Source] = []
    seen = set()

    def add(f, path):
        key = (path, f.line, f.code)
        if key not in seen:
            seen.add(key)
            out.append(_source_of(f, path))

    # 1. Stores on an attribute: class + attribute chain, nearest owner first.
    for owner, chain in item.owners:
        if not chain:
            continue
        mro_names = {c.__name__ for c in type(owner).__mro__}
        for path in by_file:
            for f in index.findings(path):
                if f.code not in ("GLF001", "GLF002", "GLF003", "GLF004", "GLF005"):
                    continue
                root, fchain = _finding_chain(f.attribute)
                if not _chain_matches(fchain, chain):
                    continue
                if root == "self" or (f.data or {}).get("root") == "self":
                    if f.class_name not in mro_names:
                        continue
                elif f.class_name is not None and f.code != "GLF003" and f.class_name not in mro_names:
                    continue
                add(f, path)
        if out:
            return out
    # 2. Legacy weight_norm / spectral_norm: the weight is set by the library's pre-hook.
    for owner, chain in item.owners[:1]:
        code = _legacy_code(owner, chain)
        if code is None:
            continue
        ancestors = {type(o).__name__ for o, _ in item.owners}
        candidates = [(f, p) for p in by_file for f in index.findings(p) if f.code == code]
        preferred = [(f, p) for f, p in candidates if f.class_name in ancestors] or candidates
        # Narrow down to the call that built this very submodule: `self.fc = spectral_norm(...)`
        # for model.fc.weight, the 2nd argument of `self.net = nn.Sequential(...)` for model.net[1].weight.
        chains = {(type(o).__name__, c) for o, c in item.owners}
        exact = [(f, p) for f, p in preferred if any(
            f.class_name == cls and _built_at(p, f.line, f.col, chain[:-1]) for cls, chain in chains)]
        for f, p in exact or preferred:
            add(f, p)
    return out


def explain(
    obj: Any,
    name: str | None = None,
    *,
    trace: "StoreLog | None" = None,
    extra_files: Iterable[str] = (),
    print_result: bool = True,
    file=None,
) -> Findings:
    """:func:`find_graph_tensors`, plus the line that stored each tensor, and print it.

    Each tensor's owner class (and the classes of the objects above it) is looked up with
    ``inspect.getsourcefile``; that file goes through the static analysis, and the
    findings for the same class and attribute are the tensor's ``sources``.  ``extra_files``
    (e.g. the file that built the model) are searched too, for stores made outside a
    class and for legacy ``weight_norm`` calls.  With a ``trace`` from :func:`trace_stores`,
    the recorded lines are added.
    """
    items = find_graph_tensors(obj, name)
    index = _StaticIndex()
    extra = list(extra_files)
    for item in items:
        item.sources = _map_static(item, index, extra)
        if trace is not None:
            for rec in trace.records_for(item):
                same = [s for s in item.sources if s.file == rec.file and s.line == rec.line]
                for s in same:
                    s.traced = True
                if same:
                    continue
                text = rec.text + (f"  (via {rec.library_frame})" if rec.library_frame else "")
                item.sources.append(
                    Source(file=rec.file, line=rec.line, code="trace", text=text, attribute=rec.attribute,
                           message=f"{rec.how} recorded by trace_stores ({rec.grad_fn})", traced=True)
                )
    if print_result:
        print(format_explanation(items), file=file or sys.stdout)
    return items


def format_explanation(items: Findings | list[GraphTensor]) -> str:
    problems = getattr(items, "problems", [])
    if not items and not problems:
        return "no tensor on the autograd graph is reachable: copy.deepcopy will not raise the graph-leaf error"
    lines = []
    if items:
        n = len(items)
        lines.append(
            f"copy.deepcopy raises: {n} tensor{'s' if n != 1 else ''} on the autograd graph "
            f"(not graph leaves) {'are' if n != 1 else 'is'} reachable"
        )
    for item in items:
        lines.append("")
        lines.append(f"{item.path}  {item.describe()}")
        if not item.sources:
            lines.append("    <- no static finding names this attribute (run the forward under trace_stores, "
                         "or `graphleaf explain --trace`, to record the line)")
        for s in item.sources:
            code = f"{s.code} (traced)" if s.traced and s.code != "trace" else s.code
            lines.append(f"    <- {s.location()} {code} {s.text}")
    for p in problems:
        lines.append("")
        lines.append(f"{p.path}: deepcopy would also fail here: {p.error}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- trace_stores


@dataclass
class StoreRecord:
    module: str  # qualified name of the module, e.g. "model.encoder"
    attribute: str
    how: str  # "assignment" or "in-place .add_()" ...
    file: str
    line: int
    text: str
    grad_fn: str | None
    library_frame: str | None = None  # "torch/nn/utils/weight_norm.py:78" when torch code did the store
    owner_id: int = 0

    def location(self) -> str:
        return f"{_display_path(self.file)}:{self.line}"


class StoreLog(list):
    """Records of :func:`trace_stores`, in the order they happened."""

    def records_for(self, item: GraphTensor) -> list[StoreRecord]:
        if not item.owners or not item.owners[0][1]:
            return []
        owner, chain = item.owners[0]
        last: dict[tuple[str, int, str], StoreRecord] = {}
        for rec in self:
            if rec.owner_id == id(owner) and rec.attribute == chain[0]:
                last[(rec.file, rec.line, rec.how)] = rec
        return list(last.values())

    def __str__(self) -> str:
        return "\n".join(
            f"{r.module}.{r.attribute} <- {r.location()} {r.how}: {r.text}"
            + (f"  (via {r.library_frame})" if r.library_frame else "")
            for r in self
        )


def _caller(skip_files=(_THIS_FILE,)) -> tuple[str, int, str | None]:
    """(file, line) of the first frame outside this file and torch, and the torch frame if one came first."""
    frame = sys._getframe(1)
    library = None
    while frame is not None:
        fname = os.path.abspath(frame.f_code.co_filename)
        if fname in skip_files or frame.f_code.co_name == "__setattr__" and fname.startswith(_TORCH_DIR):
            frame = frame.f_back
            continue
        if fname.startswith(_TORCH_DIR):
            if library is None:
                library = f"{_display_torch(fname)}:{frame.f_lineno}"
            frame = frame.f_back
            continue
        return fname, frame.f_lineno, library
    return "<unknown>", 0, library


def _display_torch(fname: str) -> str:
    return "torch/" + fname[len(_TORCH_DIR):].replace(os.sep, "/")


class _InplaceMode(torch.overrides.TorchFunctionMode):
    def __init__(self, watch, log, names):
        super().__init__()
        self.watch = watch  # id(tensor) -> (module, buffer name)
        self.log = log
        self.names = names

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if args and isinstance(args[0], torch.Tensor):
            hit = self.watch.get(id(args[0]))
            if hit is not None:
                fname = getattr(func, "__name__", "")
                if (fname.endswith("_") and not fname.startswith("_")) or fname.startswith("__i"):
                    t = args[0]
                    if t.grad_fn is not None:
                        module, attr = hit
                        if module._buffers.get(attr) is t or module.__dict__.get(attr) is t:
                            file, line, lib = _caller()
                            self.log.append(StoreRecord(
                                module=self.names.get(id(module), type(module).__name__), attribute=attr,
                                how=f"in-place .{fname}()", file=file, line=line,
                                text=linecache.getline(file, line).strip(), grad_fn=type(t.grad_fn).__name__,
                                library_frame=lib, owner_id=id(module),
                            ))
        return out


@contextlib.contextmanager
def trace_stores(model: nn.Module, name: str = "model") -> Iterator[StoreLog]:
    """Record where graph tensors are put on ``model``'s module tree while the block runs.

    Records every ``nn.Module.__setattr__`` (plain attribute or buffer) that stores a
    tensor with a ``grad_fn`` on a module of the tree, and every in-place op that leaves
    a registered buffer with a ``grad_fn``, each with the file:line that did it (the
    first frame outside torch, plus the torch frame when library code made the store,
    e.g. legacy weight_norm's pre-hook).  It only observes: results are unchanged.
    Nothing is patched outside the ``with`` block, so there is no cost when unused.
    Stores into containers (``self.features.append(x)``) are not seen; the static
    findings name those.
    """
    log = StoreLog()
    names = {id(m): _module_name(name, n) for n, m in model.named_modules(remove_duplicate=False)}
    watch: dict[int, tuple[nn.Module, str]] = {}
    modules = {id(m): m for m in model.modules()}
    for m in modules.values():
        for bname, b in m._buffers.items():
            if b is not None:
                watch[id(b)] = (m, bname)
    original = nn.Module.__dict__["__setattr__"]

    def traced_setattr(self, key, value):
        original(self, key, value)
        try:
            if id(self) in names and isinstance(value, torch.Tensor):
                if key in self._buffers:
                    watch[id(value)] = (self, key)
                if value.grad_fn is not None:
                    file, line, lib = _caller()
                    log.append(StoreRecord(
                        module=names[id(self)], attribute=key,
                        how="buffer assignment" if key in self._buffers else "assignment",
                        file=file, line=line, text=linecache.getline(file, line).strip(),
                        grad_fn=type(value.grad_fn).__name__, library_frame=lib, owner_id=id(self),
                    ))
        except Exception:  # never let the observer change the program's behaviour
            pass

    nn.Module.__setattr__ = traced_setattr
    mode = _InplaceMode(watch, log, names)
    try:
        with mode:
            yield log
    finally:
        nn.Module.__setattr__ = original
