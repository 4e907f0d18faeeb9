"""Torch's semantics, from torch itself: the generator of ``analysis/facts/semantics.json``.

The analysis never imports torch.  What it knows of torch's callables -- does this return a
tensor, does the result carry its inputs' autograd history (and whose), is it an integer or
boolean tensor, does it change its receiver in place, is it an alias of it -- comes from the
table this module writes, by *running* each public callable on small inputs that require grad:

    python -m flake8_graphleaf.runtime.torch_probe            # print the differences with the table
    python -m flake8_graphleaf.runtime.torch_probe --write    # regenerate the table

``tests/test_torch_facts.py`` regenerates it against the installed torch and fails on a difference.

How one callable is probed: a list of argument patterns (``(A,)``, ``(A, A)``, ``(A, 1)``,
``([A, A], 0)``, ``(X4, W4)`` ...) is tried in order, with fresh inputs each time; every pattern
that runs gives an entry for its number of arguments.  A float input that requires grad is a
*slot*; the call is repeated with one slot at a time requiring grad, which tells whose history
the result carries (``x.expand_as(y)`` carries x's only).  Results:

=========  ==============================================================================
carries    a float tensor with a grad_fn, from the slots listed in ``from``
fresh      a float tensor without history although its inputs require grad
int        an integer or boolean tensor (never on the graph)
leaf       a tensor that requires grad and is a leaf (``nn.Parameter(x)``)
same       the receiver (or first argument) itself, changed in place (``from``: what flowed in)
scalar     no tensor: a number, bool, None, string, ``torch.Size``, dtype, device
object     another object; ``holds``: whether it reaches a graph tensor (a Distribution of one)
tensors    a tuple or list of tensors: ``items`` per element (``values, indices = x.max(1)``)
=========  ==============================================================================

Names that no pattern could call are listed under ``unprobed``: the analysis knows they are
torch's, and that it does not know what they do.

``nn_modules``: each ``torch.nn`` layer class, built with its defaults and run in training mode
(see :func:`probe_nn_modules`): does it hold parameters, is its output on the graph, does it
carry its input's history -- what proves that a layer chained after it gets a graph tensor.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import sys
import warnings

TABLE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "analysis", "facts", "semantics.json")

# Namespaces probed as functions (their public callables).
FUNCTION_NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special", "torch.nn.init")

# Names never called: they change global state, touch files, devices or processes, or compile.
_SKIP_PREFIXES = ("set_", "use_", "compile", "save", "load", "manual_seed", "seed", "initial_seed", "export",
                  "from_file", "sym_", "cuda", "mps", "xpu", "mtia", "vmap", "cond", "while_loop",
                  "is_warn_always", "get_", "unravel", "frombuffer", "asarray", "pin_memory", "record_stream",
                  "share_memory", "register_", "apply_", "map_", "map2_", "storage",
                  "untyped_storage", "to_mkldnn", "ipu", "module_load", "dequantize", "int_repr", "q_",
                  "set_", "resize",
                  "fork_rng", "autocast", "random_", "enable_grad", "no_grad", "inference_mode",
                  "classproperty", "typename", "wait", "fork", "jit", "chain_matmul", "from_dlpack", "to_dlpack")
_SKIP_NAMES = frozenset({
    "typename", "is_tensor", "is_storage", "is_grad_enabled", "is_inference_mode_enabled", "are_deterministic_algorithms_enabled",
    "abs_", "align_tensors", "Generator", "Stream", "Event", "device", "dtype", "layout", "memory_format",
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "AggregationType", "AliasDb", "Argument", "Tag",
})

# Constant (non-slot) inputs, made fresh for each call.
def _inputs(torch):
    def randn(*shape):  # the same numbers for every call, whatever was probed before
        return torch.randn(*shape, generator=torch.Generator().manual_seed(0))

    def spd():
        a = randn(3, 3)
        return a @ a.T + 3 * torch.eye(3)

    return {
        "A": lambda: randn(3, 3),
        "V": lambda: randn(3),
        "S": spd,  # symmetric positive definite
        "X3": lambda: randn(1, 2, 4),
        "X4": lambda: randn(1, 2, 4, 4),
        "X5": lambda: randn(1, 2, 2, 4, 4),
        "W3": lambda: randn(2, 2, 3),
        "W4": lambda: randn(2, 2, 3, 3),
        "W5": lambda: randn(2, 2, 1, 3, 3),
        "P": lambda: randn(3, 3).softmax(-1),  # probabilities
        "U": lambda: randn(3, 3).sigmoid(),  # in (0, 1)
        "Q": lambda: randn(3, 3).abs() + 0.5,  # positive
        "E": lambda: randn(1),  # one element
        "B3": lambda: randn(2, 3, 3),  # a batch of matrices
        "G": lambda: randn(1, 4, 4, 2).tanh(),  # a sampling grid
    }


_CONSTANTS = {
    "I": lambda t: t.tensor([0, 1, 2]),
    "I33": lambda t: t.tensor([[0, 1, 2], [2, 1, 0], [1, 0, 2]]),
    "M": lambda t: t.tensor([[True, False, True], [False, True, False], [True, True, False]]),
    "B": lambda t: t.tensor([0.0, 1.0, 1.0]),
    "Z3": lambda t: t.zeros(3),
    "O3": lambda t: t.ones(3),
    "Uc": lambda t: t.full((3, 3), 0.25),
}

# Argument patterns: slot names (float inputs that may require grad), constant tensors, Python values.
PATTERNS = [
    ("A",), ("A", "A"), ("A", 1), ("A", 0), ("A", -1), ("A", "A", "A"), ("A", 0.5), ("A", 2), ("A", 1, 1), ("A", 0, 1),
    ("A", 0, 2), ("A", (3, 3)), ("A", (9,)), ((3, 3),), (3,), (3, 3), ("V",), ("V", "V"), ("V", "V", "V"),
    (["A", "A"],), (["A", "A"], 0), ("A", "I"), ("A", 0, "I"), ("A", 1, "I33"), ("A", 0, "I33", "A"), ("I", "A"), ("A", "M"),
    ("A", "M", 0.0), ("M", "A", "A"), ("A", "M", "A"), ("S",), ("S", "A"), ("A", "S"), ("P",), ("P", "I"), ("U",),
    ("U", "B"), ("Q",), ("Q", "Q"), ("A", "V"), ("V", "A"), ("A", "A", 0), ("A", "A", 0.5), ("A", 1, "A"),
    ("A", "A", "A", "A"), ("A", 0, 1, 2), ("A", [0, 1]), ("A", (0, 1)), ("A", "I", 0), ("A", 1, True), ("X3",), ("X4",), ("X5",),
    ("X3", "W3"), ("X4", "W4"), ("X5", "W5"), ("X3", 2), ("X4", 2), ("X5", 2), ("X4", (2, 2)), ("X3", (3,)), ("X4", (3, 3)),
    ("X4", 1), ("X4", (1, 2)), ("X4", (1, 2), "V"), ("X4", 2, "V"), ("X4", "W4", "V"), ("X4", "X4"), ("X4", 0.5),
    ("X4", (2, 2), (2, 2)), ("X4", 2, 2), ("X4", (2, 2), 1), ("A", "A", "V"), ("I",), ("I", 3), ("M",), (3, 4), ("A", "A", "A", "A", "A"),
    ("V", 3), ("A", 3), ("A", "A", 1), ("V", "I"), ("A", 2, "A", "A"), ("A", 3, "A"), ("A", 9), ("A", 1.0, 1.0), ("I", "A", "A"),
    ("E",), ("B3", "B3"), ("B3",), ("A", "B3", "B3"), ("B3", "B3", "B3"), ("I", "I"), ("A", 0, "I", "A"), ("A", 0, "I", 1.0),
    ("A", "A", "V", "V"), ("V", "A", "V"), ("A", "V", "V"), ("A", 1, (3, 1)), ("A", (3, 1)), ("A", 0, (3, 1)),
    ((3, 3), 1.0), (0.0, 1.0, 5), (0, 5, (3,)), ("P", 2), ((3, 3), (3, 1)), ("A", "I", "A"), ("A", ["I"], "V"),
    ("ij->ji", "A"), ("ij,jk->ik", "A", "A"), ("ij,jk,kl->il", "A", "A", "A"),
    ("A", "Z3", "O3"), ("A", "Z3", "O3", "V", "V"), ("U", "Uc"), ("X4", "G"), ("X3", (4, 4), (2, 2)),
]
# Patterns with keywords: (positional, keywords).
KW_PATTERNS = [
    (("X4",), {"scale_factor": 2}), (("X4",), {"size": (2, 2)}), (("A",), {"dim": 0}), (("A",), {"p": 2.0}),
    (("A",), {"n_fft": 4, "return_complex": True}), (("A", "A"), {"dim": 0}),
    (("X4", "W4"), {"padding": 1}), (("A", 1), {"dim": 0}), (("A",), {"num_classes": 3}),
]


# Field names of torch.return_types seen while probing -> the kinds of their elements.
RETURN_FIELDS: dict = {}


def _fields(torch) -> dict:
    """``values`` / ``indices`` / ``eigenvalues`` ...: what each field of torch's named results holds,
    where every result that has the field agrees."""
    seen: dict = {}
    for names, kinds in RETURN_FIELDS.items():
        for n, k in zip(names, kinds):
            seen.setdefault(n, set()).add(k)
    return {n: ks.pop() for n, ks in sorted(seen.items()) if len(ks) == 1}


def _plain(x) -> bool:
    """Python numbers, strings and None, also nested in lists and tuples (``x.tolist()``)."""
    if isinstance(x, (tuple, list)):
        return all(_plain(e) for e in x)
    return x is None or isinstance(x, (bool, int, float, complex, str, bytes))


def _dtype_kind(torch, t) -> str:
    if t.dtype == torch.bool or not (t.is_floating_point() or t.is_complex()):
        return "int"
    return "float"


def _classify(torch, res, receiver, slots, versions=None) -> dict | None:
    """The result kind of one call (without ``from``), or None where it is not to be recorded.
    ``versions``: the inputs' version counters before the call (an in-place change moves them)."""
    if isinstance(res, torch.Tensor):
        for i, s in enumerate(([receiver] if receiver is not None else []) + list(slots)):
            if res is s:
                moved = versions is not None and i < len(versions) and s._version != versions[i]
                return {"r": "same"} if moved else {"r": "alias"}
        if _dtype_kind(torch, res) == "int":
            return {"r": "int"}
        if res.grad_fn is not None:
            return {"r": "carries"}
        if res.requires_grad:
            return {"r": "leaf"}
        return {"r": "fresh"}
    if isinstance(res, (tuple, list)) and res and all(isinstance(x, torch.Tensor) for x in res):
        kinds = [_classify(torch, x, receiver, slots)["r"] for x in res]
        if type(res) not in (tuple, list):
            fields = getattr(type(res), "_fields", None) or getattr(type(res), "__match_args__", ())
            if len(fields) == len(kinds):
                RETURN_FIELDS.setdefault(tuple(fields), kinds)
            return {"r": "tensors", "items": kinds}  # torch.return_types: (values, indices)
        if len(set(kinds)) == 1:
            return {"r": "tensors", "each": kinds[0]}
        return {"r": "tensors", "items": kinds}
    if res is None or isinstance(res, (bool, int, float, complex, str, bytes, torch.Size, torch.dtype, torch.device)):
        return {"r": "scalar"}
    if _plain(res):
        return {"r": "scalar"}
    if type(res).__module__ == "numpy":
        return {"r": "scalar"}  # an array or a number of numpy: no autograd history
    if inspect.isgenerator(res) or inspect.isclass(res) or callable(res) and not hasattr(res, "__dict__"):
        return None
    return {"r": "object"}


class Prober:
    def __init__(self, torch):
        self.torch = torch
        self.make = _inputs(torch)

    def _materialise(self, pattern, grad_slots, nonleaf: bool):
        """Build the arguments: slots (float inputs) require grad when their index is in ``grad_slots``."""
        torch = self.torch
        slots: list = []

        def build(p):
            if isinstance(p, str) and p in self.make:
                t = self.make[p]()
                idx = len(slots)
                if idx in grad_slots:
                    t = t.requires_grad_()
                    if nonleaf:
                        t = t * 1.0
                slots.append(t)
                return t
            if isinstance(p, str) and p in _CONSTANTS:
                return _CONSTANTS[p](torch)
            if isinstance(p, list):
                return [build(x) for x in p]
            return p

        args = [build(p) for p in pattern]
        return args, slots

    def _call(self, fn, pattern, kw, grad_slots, method: bool, nonleaf: bool = True):
        torch = self.torch
        args, slots = self._materialise(pattern, grad_slots, nonleaf)
        kw = {k: self._materialise([v], set(), nonleaf)[0][0] if isinstance(v, str) and v in self.make else v
              for k, v in (kw or {}).items()}
        receiver = args[0] if method else None
        self.versions = [t._version for t in ([receiver] if receiver is not None else []) + slots]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            try:
                if method:
                    res = getattr(args[0], fn)(*args[1:], **kw)
                else:
                    res = fn(*args, **kw)
            finally:
                torch.set_grad_enabled(True)
                torch.set_default_dtype(torch.float32)
        return res, receiver, slots

    def _slot_count(self, pattern) -> int:
        n = 0
        for p in pattern:
            if isinstance(p, list):
                n += self._slot_count(p)
            elif isinstance(p, str) and p in self.make:
                n += 1
        return n

    def _signature(self, pattern, kw, method) -> str:
        """``"2:Tn"``: the number of arguments, and for each whether it is a tensor (or a list of
        them) or a Python value -- ``torch.max(x, 1)`` and ``torch.max(x, y)`` differ."""
        args = list(pattern[1:] if method else pattern) + list((kw or {}).values())
        sig = "".join("T" if (isinstance(a, str) and (a in self.make or a in _CONSTANTS)) or isinstance(a, list) and
                      any(isinstance(x, str) for x in a) else "n" for a in args)
        return f"{len(args)}:{sig}"

    def probe(self, fn, method: bool = False) -> dict:
        """{signature: entry} for each kind of argument list some pattern runs with."""
        by_sig: dict[str, dict] = {}
        for pattern, kw in [(p, None) for p in PATTERNS] + KW_PATTERNS:
            sig = self._signature(pattern, kw, method)
            if sig in by_sig or (method and not pattern or method and self._slot_count(pattern[:1]) == 0):
                continue
            n = self._slot_count(pattern)
            try:
                res, receiver, slots = self._call(fn, pattern, kw, set(range(n)), method)
                entry = _classify(self.torch, res, receiver, slots, self.versions)
            except Exception:  # noqa: BLE001 - a pattern that does not fit
                continue
            if entry is None:
                continue
            if entry["r"] == "alias":
                entry = {"r": "carries", "from": [("self" if method else 0)], "alias": True}
            elif entry["r"] in ("carries", "same", "tensors", "object"):
                entry.update(self._sources(fn, pattern, kw, n, method, entry))
            if entry["r"] in ("fresh", "int", "carries", "alias") or entry["r"] == "same" and not method:
                leaf = self._makes_leaf(fn, pattern, kw, method)
                if leaf:
                    entry["makes_leaf"] = leaf
            by_sig[sig] = entry
        if not by_sig and method:
            for pattern in PATTERNS:  # what refuses a tensor that requires grad: x.numpy()
                try:
                    res, receiver, slots = self._call(fn, pattern, None, set(), method)
                except Exception:  # noqa: BLE001
                    continue
                entry = _classify(self.torch, res, receiver, slots, self.versions)
                if entry is not None and entry["r"] in ("scalar", "int"):
                    by_sig[self._signature(pattern, None, method)] = {**entry, "refuses_grad": True}
                    break
        return by_sig

    def _makes_leaf(self, fn, pattern, kw, method) -> str | None:
        """'always': the result requires grad although no input does (``x.requires_grad_()``);
        'keyword': it does with ``requires_grad=True`` (``torch.zeros(3, requires_grad=True)``)."""
        torch = self.torch
        try:
            res, _, _ = self._call(fn, pattern, kw, set(), method)
            if isinstance(res, torch.Tensor) and res.requires_grad and res.is_leaf:
                return "always"
        except Exception:  # noqa: BLE001
            pass
        try:
            res, _, _ = self._call(fn, pattern, {**(kw or {}), "requires_grad": True}, set(), method)
            if isinstance(res, torch.Tensor) and res.requires_grad and res.is_leaf:
                return "keyword"
        except Exception:  # noqa: BLE001
            pass
        return None

    def _sources(self, fn, pattern, kw, n, method, entry) -> dict:
        """Which slots' history the result carries (one slot requiring grad at a time)."""
        torch = self.torch
        names = (["self"] if method else []) + list(range(len(pattern) - (1 if method else 0)))
        # map slot index -> argument position
        positions = []
        for i, p in enumerate(pattern):
            positions += [names[i]] * self._slot_count([p])
        carried = []
        for s in range(n):
            try:
                res, _, slots = self._call(fn, pattern, kw, {s}, method)
            except Exception:  # noqa: BLE001
                continue
            if _carries(torch, res):
                if positions[s] not in carried:
                    carried.append(positions[s])
        return {"holds": bool(carried)} if entry["r"] == "object" else {"from": carried}


def _deepcopy_fails(obj) -> bool:
    import copy

    try:
        copy.deepcopy(obj)
    except RuntimeError:
        return True
    return False


def _carries(torch, res) -> bool:
    if isinstance(res, torch.Tensor):
        return res.grad_fn is not None
    if isinstance(res, (tuple, list)):
        return any(_carries(torch, x) for x in res)
    d = getattr(res, "__dict__", None)
    if d:
        return any(isinstance(v, torch.Tensor) and v.grad_fn is not None for v in d.values())
    return False


def _compress(by_sig: dict) -> dict:
    """One entry when every argument list agrees, else {"sig": {"2:Tn": entry, ...}}."""
    if not by_sig:
        return {}
    entries = list(by_sig.values())
    if all(e == entries[0] for e in entries):
        return entries[0]
    return {"sig": dict(sorted(by_sig.items()))}


def _public_callables(module) -> list[str]:
    out = []
    for name in sorted(dir(module)):
        if name.startswith("_") or name in _SKIP_NAMES or name.startswith(_SKIP_PREFIXES):
            continue
        obj = getattr(module, name, None)
        if obj is None or inspect.ismodule(obj) or not callable(obj):
            continue
        if inspect.isclass(obj):
            continue  # classes: layers, dtypes, storages ... (the analysis knows nn layers build modules)
        out.append(name)
    return out


def _distribution_params(torch, cls):
    """Keyword arguments that build ``cls`` with every constrained parameter requiring grad:
    each parameter is an unconstrained tensor mapped into its constraint by torch's own
    bijection (``biject_to``), so it carries the history of something that requires grad."""
    from torch.distributions import biject_to, constraints

    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None
    params = [p for p in sig.parameters if p not in ("self", "validate_args", "batch_shape", "event_shape")]
    cons = getattr(cls, "arg_constraints", {})
    if isinstance(cons, property) or not isinstance(cons, dict):
        return None
    required = [p for p in params if sig.parameters[p].default is inspect.Parameter.empty]
    optional = [p for p in params if p not in required and p in cons]
    # probs / logits, covariance_matrix / scale_tril ...: the required ones plus at most one optional one
    for extra in [[]] + [[o] for o in optional]:
        kw = {}
        ok = True
        for p in required + extra:
            c = cons.get(p)
            if c is None:
                if p == "total_count":
                    kw[p] = 5
                    continue
                ok = False
                break
            if isinstance(c, constraints._IntegerGreaterThan) or c is constraints.nonnegative_integer:
                kw[p] = 5
                continue
            base = None
            for shape in ((3,), (3, 3)):
                try:
                    u = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).requires_grad_()
                    base = biject_to(c)(u)
                    break
                except Exception:  # noqa: BLE001
                    continue
            if base is None:
                ok = False
                break
            kw[p] = base
        if not ok:
            continue
        try:
            return cls(**kw), kw
        except Exception:  # noqa: BLE001
            continue
    return None


_DIST_ATTRIBUTES = ("mean", "mode", "stddev", "variance")
_DIST_METHODS = ("sample", "rsample", "entropy", "log_prob", "cdf", "icdf", "perplexity", "expand")


def probe_distributions(torch) -> dict:
    import torch.distributions as D

    out = {}
    for name in sorted(dir(D)):
        cls = getattr(D, name)
        if not (inspect.isclass(cls) and issubclass(cls, D.Distribution)) or cls is D.Distribution:
            continue
        qual = f"torch.distributions.{name}"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            built = _distribution_params(torch, cls)
            if built is None:
                out[qual] = {"r": "object", "holds": True, "unprobed": True}
                continue
            dist, _ = built
            entry = {"r": "object", "holds": _deepcopy_fails(dist), "methods": {}}
            for attr in _DIST_ATTRIBUTES:
                try:
                    got = _classify(torch, getattr(dist, attr), None, [])
                except Exception:  # noqa: BLE001
                    continue
                if got is not None:
                    entry["methods"][attr] = got["r"]
            for meth in _DIST_METHODS:
                try:
                    if meth in ("log_prob", "cdf"):
                        res = getattr(dist, meth)(dist.sample())
                    elif meth == "icdf":
                        res = dist.icdf(torch.full(dist.batch_shape, 0.5))
                    elif meth == "expand":
                        res = dist.expand(torch.Size((2, *dist.batch_shape)))
                    else:
                        res = getattr(dist, meth)()
                except Exception:  # noqa: BLE001
                    continue
                got = _classify(torch, res, None, [])
                if got is not None:
                    if got["r"] == "object":
                        got["r"] = "carries" if _deepcopy_fails(res) else "fresh"
                    entry["methods"][meth] = got["r"]
        out[qual] = entry
    return out


def probe_module_containers(torch) -> dict:
    """What torch's container modules do with a graph tensor put into them (``append``, ``extend``,
    ``insert``, item assignment, ``update``): ``raises`` (ModuleList takes modules only), ``leaf``
    (ParameterList wraps it in an nn.Parameter, a leaf), ``keeps`` (the graph tensor itself)."""
    import torch.nn.modules.container as containers

    out: dict = {}
    for cname in sorted(dir(containers)):
        cls = getattr(containers, cname)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == containers.__name__):
            continue
        if cls is torch.nn.Module or cname.startswith("_") or not hasattr(cls, "__setitem__"):
            continue
        entry = {}
        for meth in ("append", "extend", "insert", "__setitem__", "update"):
            if not hasattr(cls, meth):
                continue
            for shape in ((_ITEM,), ([_ITEM],), (0, _ITEM), ("0", _ITEM), ({"0": _ITEM},)):
                def call(item, shape=shape):
                    obj = cls()
                    if meth in ("insert", "__setitem__") and isinstance(shape[0], int) and hasattr(obj, "append"):
                        try:  # an index to write at
                            obj.append(torch.nn.Identity() if item_is_module else torch.nn.Parameter(torch.ones(2)))
                        except Exception:  # noqa: BLE001
                            pass
                    args = [_fill(a, item) for a in shape]
                    getattr(obj, meth)(*args)
                    return obj

                item_is_module = True
                try:
                    call(torch.nn.Identity())
                    takes_module = True
                except Exception:  # noqa: BLE001
                    takes_module = False
                item_is_module = False
                w = torch.nn.Parameter(torch.ones(2))
                try:
                    obj = call(w * 2)
                except Exception:  # noqa: BLE001
                    if takes_module:  # the call's shape is right: it is the tensor it refuses
                        entry[meth] = "raises"
                        break
                    continue
                held = list(obj.values()) if hasattr(obj, "values") else list(obj)
                tensors = [v for v in held if isinstance(v, torch.Tensor)]
                if not tensors:
                    continue
                entry[meth] = "leaf" if all(v.is_leaf for v in tensors) else "keeps"
                break
        if entry:
            out[cname] = entry
    return out


_ITEM = object()  # the item's slot in a probed container call


def _fill(slot, item):
    """One argument of a container call: ``_ITEM`` stands for the item, ``[_ITEM]`` / ``{"0": _ITEM}``
    for a list / dict of it; other values (an index, a key) are passed as they are."""
    if slot is _ITEM:
        return item
    if isinstance(slot, list):
        return [item]
    if isinstance(slot, dict):
        return {k: item for k in slot}
    return slot


def probe_module_api(torch) -> dict:
    """What the ``nn.Module`` API gives on a layer that has run forward with grad: modules, leaves
    (parameters), or values without history (state_dict's detached tensors, buffers, handles)."""
    nn = torch.nn
    out = {}
    for name in sorted(dir(nn.Module)):
        if name.startswith("_") or not callable(getattr(nn.Module, name)):
            continue
        if name in ("forward", "compile", "share_memory", "to_empty", "set_extra_state", "set_submodule", "ipu",
                    "xpu", "cuda", "mtia"):
            continue
        for args in ((), ("0.weight",), ("0",), ("",), (torch.float64,), ("extra", nn.Linear(3, 3)),
                     ("extra", nn.Parameter(torch.zeros(3))), ({"0.weight": torch.zeros(3, 3), "0.bias": torch.zeros(3), "stat": torch.zeros(3)},)):
            lin = nn.Sequential(nn.Linear(3, 3))
            lin.register_buffer("stat", torch.zeros(3))
            lin(torch.randn(2, 3)).sum().backward()
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    res = getattr(lin, name)(*args)
            except Exception:  # noqa: BLE001
                continue
            if res is lin:
                out[name] = "module"
                break
            if inspect.isgenerator(res) or isinstance(res, (list, tuple)) or type(res).__name__ == "dict_values":
                items = list(res)
                leaves = [x[1] if isinstance(x, tuple) else x for x in items]
                if leaves and all(isinstance(x, nn.Parameter) for x in leaves):
                    out[name] = "leaves"
                elif leaves and all(isinstance(x, nn.Module) for x in leaves):
                    out[name] = "modules"
                elif leaves and all(isinstance(x, torch.Tensor) and not x.requires_grad for x in leaves):
                    out[name] = "fresh"
                else:
                    continue
                break
            if isinstance(res, nn.Parameter):
                out[name] = "leaf"
            elif isinstance(res, nn.Module):
                out[name] = "module"
            elif isinstance(res, dict):
                out[name] = "fresh" if all(not getattr(v, "requires_grad", False) for v in res.values()) else "leaf"
            elif isinstance(res, torch.Tensor):
                out[name] = "fresh" if not res.requires_grad else "leaf"
            else:
                out[name] = "scalar"
            break
    return out

# Constructor arguments tried, in order, for each ``torch.nn`` layer class: its documented
# defaults for everything else (the first list that builds the layer is kept).
_LAYER_ARGS = ((), (3,), (3, 3), (3, 3, 3), (3, 3, 1), (3, 1), (3, 3, 3, 3))
# Inputs tried for a layer's forward: float tensors of growing rank, then integer indices (an
# embedding), each a plain one (no history) or one that carries history.
_LAYER_SHAPES = ((2, 3), (2, 3, 4), (2, 3, 4, 4), (2, 3, 4, 4, 4), (3,))


def probe_nn_modules(torch) -> dict:
    """Which ``torch.nn`` layers hold parameters, and what their ``forward`` gives, in training
    mode with grad on: each public ``nn.Module`` subclass of ``torch.nn`` built with its
    documented defaults (the first of a few short argument lists that builds it) and run on a
    small input.  Per class: ``params`` (it holds a parameter that requires grad), ``graph``
    (its output on a plain input has a grad_fn: it is on the graph whatever the layer is given),
    ``carries`` (its output on an input with history carries that history).  A class that no
    argument list builds, or whose forward runs on none of the inputs, is left out: the analysis
    proves nothing from a layer it has no fact for."""
    nn = torch.nn
    out = {}
    for name in sorted(dir(nn)):
        cls = getattr(nn, name, None)
        if name.startswith("_") or not inspect.isclass(cls) or not issubclass(cls, nn.Module) or cls is nn.Module:
            continue
        if inspect.isabstract(cls) or name in ("ModuleDict", "ParameterDict", "ParameterList"):
            continue
        layer = None
        for args in _LAYER_ARGS:
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    layer = cls(*args)
                break
            except Exception:  # noqa: BLE001 - another argument list
                continue
        if layer is None:
            continue
        layer.train()
        entry = {"params": any(p.requires_grad for p in layer.parameters())}
        for shape in _LAYER_SHAPES:
            gen = torch.Generator().manual_seed(0)
            results = []
            for history in (False, True):
                x = torch.rand(*shape, generator=gen)
                if history:
                    x = (x.requires_grad_() * 1.0)
                try:
                    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                        warnings.simplefilter("ignore")
                        res = layer(x)
                except Exception:  # noqa: BLE001 - another input
                    results = []
                    break
                if isinstance(res, (tuple, list)) and res:
                    res = res[0]
                if not isinstance(res, torch.Tensor):
                    results = []
                    break
                results.append(res.grad_fn is not None)
            if results:
                entry["graph"], entry["carries"] = results
                break
        else:  # indices (an embedding): a plain input only, nothing for it to carry
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    res = layer(torch.randint(0, 3, (2, 3), generator=torch.Generator().manual_seed(0)))
            except Exception:  # noqa: BLE001 - no input runs it
                res = None
            if isinstance(res, torch.Tensor):
                entry["graph"], entry["carries"] = res.grad_fn is not None, False
            elif not entry["params"]:
                continue
        out[f"torch.nn.{name}"] = entry
    return out


def probe_module_attributes(torch) -> dict:
    """The attributes every ``nn.Module`` instance has (``training``): none of them a tensor."""
    m = torch.nn.Module()
    return {n: "scalar" for n, v in sorted(vars(m).items())
            if not n.startswith("_") and isinstance(v, (bool, int, float, str, type(None)))}


def probe_dtypes(torch) -> dict:
    """``torch.float64``, ``torch.double`` ...: each dtype name torch has, as torch prints it, the
    default dtype (what a tensor made without one has), and those that can carry history."""
    dtypes = {n: getattr(torch, n) for n in sorted(dir(torch))
              if not n.startswith("_") and isinstance(getattr(torch, n, None), torch.dtype)}
    names = {n: str(d).rpartition(".")[2] for n, d in dtypes.items()}
    # the dtypes a tensor can require grad in (an integer or boolean result never has a grad_fn)
    differentiable = sorted({names[n] for n, d in dtypes.items() if d.is_floating_point or d.is_complex})
    return {"names": names, "default": str(torch.get_default_dtype()).rpartition(".")[2],
            "differentiable": differentiable}


def probe_dtype_copies(torch, methods: dict) -> dict:
    """The tensor methods the table has as an alias of their tensor (``x.to(x)``, ``x.float()`` of a
    float tensor: the same object) that make a new tensor carrying its history when given another
    dtype: how they take it ("positional": ``x.to(torch.float64)``, "keyword": ``x.to(dtype=...)``)."""
    out = {}
    for name, entry in sorted(methods.items()):
        entries = entry["sig"].values() if "sig" in entry else [entry]
        if not any(e.get("alias") for e in entries):
            continue
        ways = []
        for way, call in (("positional", lambda f: f(torch.float64)), ("keyword", lambda f: f(dtype=torch.float64))):
            x = torch.randn(3, generator=torch.Generator().manual_seed(0)).requires_grad_()
            try:
                res = call(getattr(x, name))
            except Exception:  # noqa: BLE001 - the method takes no dtype that way
                continue
            if isinstance(res, torch.Tensor) and res is not x and res.dtype == torch.float64 and res.grad_fn is not None:
                ways.append(way)
        if ways:
            out[name] = ways
    return out


def probe_tensor(torch, prober: Prober) -> tuple[dict, dict, list, list]:
    methods, attributes, unprobed, skipped = {}, {}, [], []
    for name in sorted(dir(torch.Tensor)):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(torch.Tensor, name)
        is_attr = not callable(getattr(torch.Tensor, name)) or isinstance(raw, property) or type(raw).__name__ == "getset_descriptor"
        if is_attr:
            for nonleaf in (True, False):
                x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
                if nonleaf:
                    x = x * 1.0
                try:
                    res = getattr(x, name)
                except Exception:  # noqa: BLE001
                    continue
                got = _classify(torch, res, x, [x])
                if got is not None:
                    attributes[name] = got["r"]
                    break
            else:
                unprobed.append(name)
            continue
        if name.startswith(_SKIP_PREFIXES) or name in _SKIP_NAMES:
            skipped.append(name)
            continue
        entry = _compress(prober.probe(name, method=True))
        if entry:
            methods[name] = entry
        else:
            unprobed.append(name)
    return methods, attributes, unprobed, skipped


def generate() -> dict:
    import importlib

    import torch

    warnings.simplefilter("ignore")
    prober = Prober(torch)
    functions, unprobed = {}, []
    for ns in FUNCTION_NAMESPACES:
        module = importlib.import_module(ns)
        for name in _public_callables(module):
            qual = f"{ns}.{name}"
            if ns == "torch.nn.init" and name.endswith("_"):
                entry = _compress(_probe_init(torch, getattr(module, name)))
            else:
                entry = _compress(prober.probe(getattr(module, name)))
            if entry:
                functions[qual] = entry
            else:
                unprobed.append(qual)
    functions["torch.nn.Parameter"] = _parameter_entry(torch)
    functions["torch.nn.parameter.Parameter"] = functions["torch.nn.Parameter"]
    functions["torch.autograd.grad"] = _grad_entry(torch)
    methods, attributes, tensor_unprobed, tensor_skipped = probe_tensor(torch, prober)
    return {
        "torch_version": torch.__version__.split("+")[0],
        "about": "generated by python -m flake8_graphleaf.runtime.torch_probe --write; do not edit",
        "functions": functions,
        "tensor_methods": methods,
        "tensor_attributes": attributes,
        "distributions": probe_distributions(torch),
        "module_api": probe_module_api(torch),
        "module_containers": probe_module_containers(torch),
        "module_attributes": probe_module_attributes(torch),
        "nn_modules": probe_nn_modules(torch),
        "return_fields": _fields(torch),
        "dtypes": probe_dtypes(torch),
        "dtype_copies": probe_dtype_copies(torch, methods),
        "unprobed": sorted(unprobed + [f"torch.Tensor.{n}" for n in tensor_unprobed]),
        "tensor_skipped": sorted(tensor_skipped),
    }


def _probe_init(torch, fn) -> dict:
    """``nn.init.*_`` fill a Parameter in place under no_grad and return it: a leaf stays one."""
    for extra in ((), (0.5,), (1.0, 2.0)):
        p = torch.nn.Parameter(torch.empty(3, 3))
        try:
            res = fn(p, *extra)
        except Exception:  # noqa: BLE001
            continue
        sig = f"{1 + len(extra)}:T" + "n" * len(extra)
        if res is p:
            return {sig: {"r": "same", "from": [], "leaf": p.is_leaf and p.requires_grad}}
        return {sig: _classify(torch, res, None, [p]) or {"r": "scalar"}}
    return {}


def _grad_entry(torch) -> dict:
    """``torch.autograd.grad``: gradients are fresh, unless made with ``create_graph=True``."""
    def kind(create_graph):
        x = torch.randn(3).requires_grad_()
        (g,) = torch.autograd.grad((x * x).sum(), x, create_graph=create_graph)
        return _classify(torch, g, None, [x])["r"]

    return {"r": "tensors", "each": kind(False), "create_graph": kind(True)}


def _parameter_entry(torch) -> dict:
    """``nn.Parameter(data, requires_grad=True)``: a leaf that requires grad; given a literal
    False for ``requires_grad`` (by keyword, or second), one that does not: ``off`` records
    where that flag goes when torch says so."""
    x = (torch.randn(3).requires_grad_() * 2.0)
    p = torch.nn.Parameter(x.detach())
    entry = {"r": "leaf" if p.is_leaf and p.requires_grad else "fresh"}
    off_kw = torch.nn.Parameter(x.detach(), requires_grad=False)
    off_pos = torch.nn.Parameter(x.detach(), False)
    if not off_kw.requires_grad and not off_pos.requires_grad and off_kw.grad_fn is None:
        entry["off"] = [1, "requires_grad"]
    return entry


def dumps(table: dict) -> str:
    return json.dumps(table, indent=0, sort_keys=True, separators=(",", ":")) + "\n"


def differences(old: dict, new: dict) -> list[str]:
    out = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    out.append(f"{section}.{k}: {a.get(k)!r} -> {b.get(k)!r}")
        elif a != b:
            out.append(f"{section}: {a!r} -> {b!r}" if not isinstance(a, list) else
                       f"{section}: -{sorted(set(a) - set(b or []))} +{sorted(set(b or []) - set(a))}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flake8_graphleaf.runtime.torch_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the table (default: print the differences)")
    parser.add_argument("--table", default=TABLE, help="the table's path (default: the package's)")
    args = parser.parse_args(argv)
    new = generate()
    text = dumps(new)
    if args.write:
        tmp = args.table + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, args.table)
        print(f"wrote {args.table}: {len(new['functions'])} functions, {len(new['tensor_methods'])} tensor methods, "
              f"{len(new['tensor_attributes'])} attributes, {len(new['distributions'])} distributions, "
              f"{len(new['unprobed'])} unprobed")
        return 0
    try:
        with open(args.table, encoding="utf-8") as fh:
            old = json.load(fh)
    except FileNotFoundError:
        old = {}
    diff = differences(old, new)
    for line in diff:
        print(line)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
