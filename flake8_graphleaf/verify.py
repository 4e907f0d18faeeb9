"""``graphleaf verify``: run fixtures (or a user's model) and prove each fix dynamically.

Per fixture and device it checks:

1. ``crash``    the original reproduces the graph-leaves crash (``copy.deepcopy(model)`` after a
                training step, or inside the fixture's own ``training_step``), or, for a negative
                fixture (``EXPECT_CRASH = False``), does not;
2. ``fix``      the real fixer (:func:`flake8_graphleaf.fixer.fix_source`) is run on a temporary
                copy, which is imported fresh; a positive fixture whose findings have no fix fails;
3. ``same``     with the same seed, weights (the original's state_dict, legacy weight_norm /
                spectral_norm keys mapped) and inputs: forward outputs, the step's loss, every
                parameter gradient, input gradients, buffers and parameters after the step;
4. ``deepcopy`` ``copy.deepcopy`` of the fixed model works, and the copy gives the same outputs;
5. ``safety``   a SAFE fix must show no difference at all; for an UNSAFE fix every difference
                is listed (and must include the fixture's ``EXPECT_UNSAFE_DIFF``).

torch is imported lazily, inside the functions here: ``import flake8_graphleaf.verify`` works
without it, and ``run`` then says how to install it and returns 2.

Fixture contract (``fixtures/models/<name>.py``): ``make_model()``, ``make_inputs()`` (a tuple of
CPU tensors), optional ``training_step(model, inputs)`` returning the loss, ``EXPECT_CRASH``.
Optional constants read here: ``EXPECT_FIX`` ("safe" | "unsafe" | "none"), ``EXPECT_UNSAFE_DIFF``
(substrings that must appear among the listed differences), ``STEP_BACKWARD`` (default True:
the harness calls ``loss.backward()`` on what ``training_step`` returns; False when the step
does its own backward).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import importlib.util
import json
import os
import sys
import tempfile
import traceback
import types
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

PASS, FAIL, SKIP, DIFF, INFO = "PASS", "FAIL", "SKIP", "DIFF", "INFO"
CHECKS = ("crash", "fix", "same", "deepcopy", "safety")
GRAPH_LEAF_TEXT = "graph leaves"
SEED = 1234
# On CUDA, results that are not bitwise equal may still pass within this tolerance (printed).
CUDA_RTOL = 1e-5
CUDA_ATOL = 1e-6
INSTALL_HINT = "graphleaf verify needs torch: pip install 'flake8-graphleaf[verify]' (or pip install torch)"

# The fixer used on the temporary copy.  A module attribute so that the tests can put a
# deliberately wrong fixer here and see verify catch it.
_fix_source: Callable[..., Any] | None = None


def _fixer():
    if _fix_source is not None:
        return _fix_source
    from .fixer import fix_source

    return fix_source


class _Usage(Exception):
    """A usage problem: message printed as is, exit 2."""


# ---------------------------------------------------------------------------------------------
# results


@dataclass
class Check:
    status: str
    detail: str = ""


@dataclass
class Result:
    fixture: str
    path: str | None
    device: str
    checks: dict[str, Check] = field(default_factory=dict)
    applied: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    graph_tensors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        states = [c.status for c in self.checks.values()]
        if FAIL in states:
            return FAIL
        if DIFF in states:
            return DIFF
        if states and all(s == SKIP for s in states):
            return SKIP
        return PASS

    def to_json(self) -> dict:
        return {
            "fixture": self.fixture,
            "path": self.path,
            "device": self.device,
            "status": self.status,
            "checks": {k: {"status": c.status, "detail": c.detail} for k, c in self.checks.items()},
            "applied": self.applied,
            "skipped": self.skipped,
            "differences": self.differences,
            "notes": self.notes,
            "graph_tensors": self.graph_tensors,
        }


@dataclass
class Spec:
    """What to run: a fixture file, or a user's model (``--model``)."""

    name: str
    path: str | None  # source file the fixer runs on (None: a module without a file)
    model_attr: str = "make_model"
    inputs_attr: str | None = "make_inputs"
    inputs_module_path: str | None = None  # --inputs in another file: (path, attr) loaded as is
    inputs_callable: Callable | None = None
    step_attr: str | None = "training_step"
    expect_crash: bool | None = None
    expect_fix: str | None = None
    expect_unsafe_diff: tuple[str, ...] = ()
    step_backward: bool = True
    user: bool = False
    module: Any = None  # --model: the already imported module of the target


# ---------------------------------------------------------------------------------------------
# loading


def _import_file(path: str, tag: str, sibling_dir: str | None = None) -> types.ModuleType:
    """Import ``path`` fresh, under a unique name (registered in sys.modules while in use)."""
    full = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(full))[0]
    name = f"_graphleaf_verify_{tag}_{stem}_{zlib.crc32(full.encode()):08x}"
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = sibling_dir or os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _fixture_spec(path: str) -> Spec:
    """Read the fixture's expectation constants (without importing torch twice: a fresh import)."""
    mod = _import_file(path, "meta")
    try:
        expect_crash = getattr(mod, "EXPECT_CRASH", True)
        expect_fix = getattr(mod, "EXPECT_FIX", None)
        diff = tuple(getattr(mod, "EXPECT_UNSAFE_DIFF", ()) or ())
        backward = bool(getattr(mod, "STEP_BACKWARD", True))
    finally:
        sys.modules.pop(mod.__name__, None)
    return Spec(
        name=os.path.splitext(os.path.basename(path))[0],
        path=os.path.abspath(path),
        expect_crash=bool(expect_crash),
        expect_fix=expect_fix,
        expect_unsafe_diff=diff,
        step_backward=backward,
    )


def _resolve_attr(module, dotted: str):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def default_fixture_dir() -> str | None:
    here = os.path.join(os.getcwd(), "fixtures", "models")
    if os.path.isdir(here):
        return here
    repo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "models")
    return repo if os.path.isdir(repo) else None


def collect_fixtures(paths: list[str]) -> list[str]:
    if not paths:
        d = default_fixture_dir()
        if d is None:
            raise _Usage("graphleaf verify: no FIXTURES given and no fixtures/models/ folder found")
        paths = [d]
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(
                os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py") and not f.startswith("_")
            )
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise _Usage(f"graphleaf verify: {p}: no such file or folder")
    return out


# ---------------------------------------------------------------------------------------------
# torch helpers (every function below imports torch itself)


def _is_graph_leaf_error(exc: BaseException | None) -> bool:
    return isinstance(exc, RuntimeError) and GRAPH_LEAF_TEXT in str(exc)


def _short_exc(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}"


def _tensors(obj, prefix="") -> list[tuple[str, Any]]:
    """Flatten a nested output into (path, tensor) pairs."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [(prefix or "output", obj)]
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _tensors(v, f"{prefix}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += _tensors(v, f"{prefix}[{i}]")
    elif hasattr(obj, "__dict__") and not isinstance(obj, torch.nn.Module):
        for k, v in vars(obj).items():
            out += _tensors(v, f"{prefix}.{k}")
    return out


def _snapshot(obj):
    return [(k, t.detach().clone()) for k, t in _tensors(obj)]


def _move(obj, device):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(_move(x, device) for x in obj)
    if isinstance(obj, list):
        return [_move(x, device) for x in obj]
    if isinstance(obj, dict):
        return {k: _move(v, device) for k, v in obj.items()}
    return obj


def find_graph_tensors(obj, root: str = "model", limit: int = 40) -> list[str]:
    """Attribute paths (as ``copy.deepcopy`` reaches them) that hold a tensor with a grad_fn.

    Uses ``flake8_graphleaf.runtime.find_graph_tensors`` when that module exists; this walk
    is the fallback (it follows module dicts, containers, hook dicts, bound methods'
    ``__self__`` and ``functools.partial`` arguments, as deepcopy does)."""
    try:
        from . import runtime  # type: ignore[attr-defined]

        found = runtime.find_graph_tensors(obj)
        out = []
        for item in found:
            if isinstance(item, tuple):
                out.append(" ".join(str(x) for x in item))
            else:
                out.append(str(getattr(item, "path", item)))
        return out[:limit]
    except Exception:  # noqa: BLE001 - no runtime locator (yet), or another shape: use ours
        pass
    import torch

    seen: set[int] = set()
    out: list[str] = []

    def walk(o, path: str, depth: int) -> None:
        if len(out) >= limit or depth > 40:
            return
        if isinstance(o, torch.Tensor):
            if o.grad_fn is not None:
                out.append(f"{path} (grad_fn={type(o.grad_fn).__name__})")
            elif not isinstance(o, torch.nn.Parameter) and o.grad is not None and o.grad.grad_fn is not None:
                out.append(f"{path}.grad (grad_fn={type(o.grad.grad_fn).__name__})")
            return
        if id(o) in seen or isinstance(o, (str, bytes, int, float, bool, type(None), type, types.ModuleType,
                                           types.FunctionType, types.BuiltinFunctionType)):
            return
        seen.add(id(o))
        if isinstance(o, torch.nn.Module):
            for k, v in vars(o).items():
                if k in ("_parameters", "_buffers", "_modules") and isinstance(v, dict):
                    for name, sub in v.items():
                        walk(sub, f"{path}.{name}", depth + 1)
                elif k.endswith("hooks") and isinstance(v, dict):
                    for hid, hook in v.items():
                        walk(hook, f"{path}.{k}[{hid}]", depth + 1)
                else:
                    walk(v, f"{path}.{k}", depth + 1)
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(v, f"{path}[{k!r}]", depth + 1)
        elif isinstance(o, (list, tuple, set, frozenset)):
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]", depth + 1)
        elif isinstance(o, types.MethodType):
            walk(o.__self__, f"{path}.__self__", depth + 1)
        elif isinstance(o, functools.partial):
            for i, v in enumerate(o.args):
                walk(v, f"{path}.args[{i}]", depth + 1)
            for k, v in (o.keywords or {}).items():
                walk(v, f"{path}.keywords[{k!r}]", depth + 1)
        elif hasattr(o, "__dict__"):
            for k, v in vars(o).items():
                walk(v, f"{path}.{k}", depth + 1)

    walk(obj, root, 0)
    return out


@contextlib.contextmanager
def _deterministic(device: str):
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    warn_before = torch.is_deterministic_algorithms_warn_only_enabled()
    saved = {}
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        saved = {
            "det": torch.backends.cudnn.deterministic,
            "bench": torch.backends.cudnn.benchmark,
            "tf32_mm": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        }
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_before)
        if saved:
            torch.backends.cudnn.deterministic = saved["det"]
            torch.backends.cudnn.benchmark = saved["bench"]
            torch.backends.cuda.matmul.allow_tf32 = saved["tf32_mm"]
            torch.backends.cudnn.allow_tf32 = saved["tf32_cudnn"]


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@dataclass
class StepRecord:
    outputs: list = field(default_factory=list)  # per forward call of the top model: [(path, tensor)]
    loss: Any = None
    loss_requires_grad: bool | None = None
    exception: BaseException | None = None
    where: str = ""
    input_grads: list = field(default_factory=list)
    param_grads: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    first_call: Any = None  # (args, kwargs) of the first forward call of the top model


def _detach_args(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple):
        return tuple(_detach_args(x) for x in obj)
    if isinstance(obj, list):
        return [_detach_args(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _detach_args(v) for k, v in obj.items()}
    return obj


def _run_step(module, spec: Spec, model, inputs) -> StepRecord:
    """One training step as the fixture does it; never raises (the exception is recorded)."""
    import torch

    rec = StepRecord()
    def hook(module, args, kwargs, output):
        rec.outputs.append(_snapshot(output))
        if rec.first_call is None:  # replayed on the deepcopy in check 4
            rec.first_call = (_detach_args(args), _detach_args(kwargs))

    handle = model.register_forward_hook(hook, with_kwargs=True)
    step = getattr(module, spec.step_attr, None) if (module is not None and spec.step_attr) else None
    try:
        if step is not None:
            rec.where = f"{spec.step_attr}()"
            loss = step(model, inputs)
        else:
            rec.where = "forward"
            out = model(*inputs)
            parts = [t.float().sum() for _, t in _tensors(out) if t.is_floating_point()]
            loss = torch.stack(parts).sum() if parts else None
        if isinstance(loss, torch.Tensor):
            rec.loss = loss.detach().clone()
            rec.loss_requires_grad = loss.requires_grad
            if step is None or spec.step_backward:
                rec.where = "loss.backward()"
                loss.backward()
    except Exception as exc:  # noqa: BLE001 - recorded and reported
        rec.exception = exc
    finally:
        handle.remove()
    rec.input_grads = [
        (None if not isinstance(t, torch.Tensor) or t.grad is None else t.grad.detach().clone()) for t in inputs
    ]
    rec.param_grads = {n: (None if p.grad is None else p.grad.detach().clone()) for n, p in model.named_parameters()}
    rec.buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    rec.params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return rec


def _make_inputs(module, spec: Spec, device: str):
    import torch

    _seed(SEED)
    if spec.inputs_callable is not None:
        raw = spec.inputs_callable()
    else:
        raw = getattr(module, spec.inputs_attr)()
    if not isinstance(raw, (tuple, list)):
        raw = (raw,)
    out = []
    for t in raw:
        if isinstance(t, torch.Tensor):
            t = t.detach().clone().to(device)
            if t.is_floating_point():
                t.requires_grad_(True)
        out.append(t)
    return tuple(out)


def _clone_inputs(inputs):
    import torch

    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor):
            c = t.detach().clone()
            c.requires_grad_(t.requires_grad)
            out.append(c)
        else:
            out.append(t)
    return tuple(out)


def _build_model(module, spec: Spec, device: str):
    import torch

    _seed(SEED)
    model = _resolve_attr(module, spec.model_attr)
    if not isinstance(model, torch.nn.Module):
        model = model()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{spec.model_attr} returned {type(model).__name__}, not a torch.nn.Module")
    return model.to(device).train()


# legacy -> parametrizations state_dict names (weight_norm: g, v; spectral_norm: orig, u, v)
def _key_candidates(key: str) -> list[str]:
    prefix, _, leaf = key.rpartition(".")
    pre = prefix + "." if prefix else ""
    out = []
    for suffix, targets in (
        ("_g", ["original0"]),
        ("_v", ["original1", "0._v"]),
        ("_orig", ["original"]),
        ("_u", ["0._u"]),
    ):
        if leaf.endswith(suffix) and len(leaf) > len(suffix):
            name = leaf[: -len(suffix)]
            out += [f"{pre}parametrizations.{name}.{t}" for t in targets]
    return out


def map_state_keys(a_keys, b_keys) -> tuple[dict[str, str], list[str], list[str]]:
    """(mapping a->b, a keys with no counterpart, b keys with no counterpart)."""
    b_set = set(b_keys)
    used: set[str] = set()
    mapping: dict[str, str] = {}
    for k in a_keys:
        if k in b_set and k not in used:
            mapping[k] = k
            used.add(k)
    for k in a_keys:
        if k in mapping:
            continue
        for cand in _key_candidates(k):
            if cand in b_set and cand not in used:
                mapping[k] = cand
                used.add(cand)
                break
    missing = [k for k in a_keys if k not in mapping]
    extra = [k for k in b_keys if k not in used]
    return mapping, missing, extra


class _Cmp:
    """Bitwise comparison (CPU); on CUDA, bitwise or within the stated tolerance."""

    def __init__(self, device: str):
        self.device = device
        self.tolerance_used: list[str] = []

    def same(self, what: str, a, b) -> str | None:
        """None if equal, else a description of the difference."""
        import torch

        if a is None and b is None:
            return None
        if a is None:
            return f"{what}: none in the original, present in the fixed model"
        if b is None:
            return f"{what}: lost (None in the fixed model)"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}: shape/dtype {tuple(a.shape)}/{a.dtype} -> {tuple(b.shape)}/{b.dtype}"
        if torch.equal(a, b):
            return None
        if a.is_floating_point():
            diff = (a.double() - b.double()).abs().max().item()
            if self.device.startswith("cuda") and torch.allclose(a, b, rtol=CUDA_RTOL, atol=CUDA_ATOL):
                self.tolerance_used.append(f"{what}: max abs diff {diff:.3g}")
                return None
            return f"{what}: differs (max abs diff {diff:.3g})"
        return f"{what}: differs"


def _compare(spec: Spec, a: StepRecord, b: StepRecord, mapping: dict, cmp: _Cmp) -> tuple[list[str], list[str]]:
    """(differences, notes) between the original's step and the fixed model's step."""
    diffs: list[str] = []
    notes: list[str] = []
    if a.exception is not None and b.exception is None:
        if _is_graph_leaf_error(a.exception):
            notes.append(f"the original raised the graph-leaves error in {a.where}; the fixed model does not")
        else:
            diffs.append(f"step: the original raised {_short_exc(a.exception)} in {a.where}; the fixed model does not")
    elif b.exception is not None and (a.exception is None or _short_exc(a.exception) != _short_exc(b.exception)):
        diffs.append(f"step: the fixed model raises {_short_exc(b.exception)} in {b.where}"
                     + (" (the original did not)" if a.exception is None else ""))
    # forward outputs, call by call (a step that raised part-way is compared as far as it got)
    n = min(len(a.outputs), len(b.outputs))
    if len(a.outputs) != len(b.outputs) and a.exception is None and b.exception is None:
        diffs.append(f"forward calls: {len(a.outputs)} in the original, {len(b.outputs)} in the fixed model")
    for i in range(n):
        oa, ob = dict(a.outputs[i]), dict(b.outputs[i])
        if set(oa) != set(ob):
            diffs.append(f"forward output #{i}: structure differs ({sorted(oa)} -> {sorted(ob)})")
            continue
        for k in oa:
            d = cmp.same(f"forward output #{i}{'' if k == 'output' else ' ' + k}", oa[k], ob[k])
            if d:
                diffs.append(d)
    if (a.loss is not None or b.loss is not None) and not _is_graph_leaf_error(a.exception):
        d = cmp.same("loss", a.loss, b.loss)
        if d:
            diffs.append(d)
        if a.loss_requires_grad and b.loss_requires_grad is False:
            diffs.append("loss: no longer on the autograd graph (gradient through it lost)")
    for i, (ga, gb) in enumerate(zip(a.input_grads, b.input_grads)):
        d = cmp.same(f"gradient of input {i}", ga, gb)
        if d:
            diffs.append(d)
    for what, da, db in (("gradient of parameter", a.param_grads, b.param_grads),
                         ("parameter after the step", a.params, b.params),
                         ("buffer after the step", a.buffers, b.buffers)):
        for name, ta in da.items():
            bname = mapping.get(name, name)
            if bname not in db:
                continue  # reported with the state_dict keys
            d = cmp.same(f"{what} {name}", ta, db[bname])
            if d:
                diffs.append(d)
    return diffs, notes


def _attribute_observations(result: Result, findings_applied, model_a, model_b) -> None:
    """What an applied fix did to the attribute it is about, in every instance of its class."""
    import torch

    subs_b = dict(model_b.named_modules())
    for f in findings_applied:
        if f["code"] not in ("GLF001", "GLF002", "GLF004") or not f.get("attribute") or not f.get("class_name"):
            continue
        attr = f["attribute"].split(".", 1)[1] if "." in f["attribute"] else f["attribute"]
        attr = attr.split("[", 1)[0].split(".", 1)[0]
        for name, ma in model_a.named_modules():
            if type(ma).__name__ != f["class_name"]:
                continue
            mb = subs_b.get(name)
            where = f"{f['class_name']}.{attr} (model{'.' + name if name else ''}.{attr})"
            va = getattr(ma, attr, None)
            vb = getattr(mb, attr, None) if mb is not None else None
            ta = [t for _, t in _tensors(va)] if va is not None else []
            tb = [t for _, t in _tensors(vb)] if vb is not None else []
            graph_a = [t for t in ta if isinstance(t, torch.Tensor) and t.grad_fn is not None]
            graph_b = [t for t in tb if isinstance(t, torch.Tensor) and t.grad_fn is not None]
            if not tb and ta:
                line = f"{where}: no longer stored on the module after forward"
                (result.differences if f["applicability"] != "safe" else result.notes).append(line)
            elif graph_a and not graph_b:
                kinds = sorted({type(t.grad_fn).__name__ for t in graph_a})
                line = (f"gradient through {where}: lost (the original keeps it on the graph, "
                        f"grad_fn {', '.join(kinds)}; the fixed model keeps a detached copy)")
                (result.differences if f["applicability"] != "safe" else result.notes).append(line)


# ---------------------------------------------------------------------------------------------
# one fixture on one device


def _applied_dicts(findings) -> list[dict]:
    out = []
    for f in findings:
        out.append({
            "code": f.code, "line": f.line, "attribute": f.attribute, "class_name": f.class_name,
            "applicability": f.fix.applicability if f.fix else None,
            "description": f.fix.description if f.fix else "",
        })
    return out


def verify_one(spec: Spec, device: str, unsafe: bool, workdir: str) -> Result:
    result = Result(spec.name, spec.path, device)
    try:
        with _deterministic(device):
            _verify_one(spec, device, unsafe, workdir, result)
    except Exception as exc:  # noqa: BLE001 - a broken fixture is a failed fixture, not a crashed run
        result.checks.setdefault("crash", Check(FAIL, f"harness error: {_short_exc(exc)}"))
        result.notes.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
    for name in CHECKS:
        result.checks.setdefault(name, Check(SKIP, "not reached"))
    return result


def _verify_one(spec: Spec, device: str, unsafe: bool, workdir: str, result: Result) -> None:
    import torch

    modules = []
    try:
        if spec.module is not None:
            orig = spec.module
        else:
            orig = _import_file(spec.path, "orig")
            modules.append(orig)
        _run_pipeline(spec, device, unsafe, workdir, result, orig, modules, torch)
    finally:
        for m in modules:
            sys.modules.pop(m.__name__, None)


def _run_pipeline(spec, device, unsafe, workdir, result, orig, modules, torch) -> None:
    # --- 1. the original: step, then deepcopy ------------------------------------------------
    model_a = _build_model(orig, spec, device)
    state0 = {k: v.detach().clone() for k, v in model_a.state_dict().items()}
    inputs = _make_inputs(orig, spec, device)
    _seed(SEED)
    rec_a = _run_step(orig, spec, model_a, _clone_inputs(inputs))
    crashed, where = False, ""
    if rec_a.exception is not None:
        if _is_graph_leaf_error(rec_a.exception):
            crashed, where = True, f"in {rec_a.where}"
        else:
            result.checks["crash"] = Check(FAIL, f"the original's step raised {_short_exc(rec_a.exception)}")
            return
    else:
        try:
            copy.deepcopy(model_a)
        except RuntimeError as exc:
            if not _is_graph_leaf_error(exc):
                raise
            crashed, where = True, "in copy.deepcopy(model)"
    if crashed:
        result.graph_tensors = find_graph_tensors(model_a)
    crash_text = f"graph-leaves RuntimeError {where}" if crashed else "copy.deepcopy(model) works"
    if spec.expect_crash is None:
        result.checks["crash"] = Check(INFO, crash_text)
    elif crashed == spec.expect_crash:
        result.checks["crash"] = Check(PASS, ("reproduced: " if crashed else "negative: ") + crash_text)
    else:
        result.checks["crash"] = Check(
            FAIL, f"expected {'a crash' if spec.expect_crash else 'no crash'}, got: {crash_text}")
        return

    # --- 2. the real fixer on a temporary copy, imported fresh --------------------------------
    source = None
    if spec.path is not None:
        with open(spec.path, encoding="utf-8") as fh:
            source = fh.read()
    if source is None:
        result.checks["fix"] = Check(SKIP, "no source file to fix")
        fixed_path = None
        fixed_source = None
        fixres = None
    else:
        fixres = _fixer()(source, spec.path, unsafe=unsafe)
        fixed_source = fixres.source
        result.applied = _applied_dicts(fixres.applied)
        result.skipped = [
            {"code": f.code, "line": f.line, "attribute": f.attribute, "reason": why,
             "applicability": f.fix.applicability if f.fix else None}
            for f, why in fixres.skipped
        ]
        # A --model name is a TARGET (a path, maybe absolute): keep only safe characters.
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{spec.name}-{device}")
        sub = os.path.join(workdir, safe.lstrip("."))
        os.makedirs(sub, exist_ok=True)
        fixed_path = os.path.join(sub, os.path.basename(spec.path))
        with open(fixed_path, "w", encoding="utf-8") as fh:
            fh.write(fixed_source)
    fix_state = _judge_fix(spec, result, fixres, crashed, unsafe)
    if fix_state == "stop":
        if spec.user:  # check 4 on the user's model as it is
            if crashed:
                result.checks["deepcopy"] = Check(
                    FAIL, "copy.deepcopy(model) raises the graph-leaves error; graph tensors at: "
                    + (", ".join(result.graph_tensors) or "(none found by the walk)"))
            else:
                result.checks["deepcopy"] = Check(PASS, "copy.deepcopy(model) works")
        return

    if fixed_path and fixed_source != source:
        try:
            fixed = _import_file(fixed_path, "fixed", sibling_dir=os.path.dirname(spec.path))
        except Exception as exc:  # noqa: BLE001 - e.g. relative imports outside its package
            result.checks["same"] = Check(FAIL, f"the fixed copy does not import: {_short_exc(exc)}")
            return
        modules.append(fixed)
    else:
        fixed = orig

    # --- 3. same seed, weights, inputs: compare everything ------------------------------------
    cmp = _Cmp(device)
    model_b = _build_model(fixed, spec, device)
    b_keys = list(model_b.state_dict().keys())
    mapping, missing, extra = map_state_keys(list(state0), b_keys)
    if missing:
        result.checks["same"] = Check(FAIL, f"the fixed model has no counterpart for state_dict keys {missing}")
        return
    model_b.load_state_dict({mapping[k]: v for k, v in state0.items()}, strict=not extra)
    renamed = [f"{k} -> {v}" for k, v in mapping.items() if k != v]
    if renamed:
        result.differences.append(f"state_dict keys renamed ({len(renamed)}): " + ", ".join(renamed))
    if extra:
        result.differences.append(f"state_dict keys new in the fixed model (not loaded): {extra}")
    _seed(SEED)
    rec_b = _run_step(fixed, spec, model_b, _clone_inputs(inputs))
    diffs, notes = _compare(spec, rec_a, rec_b, mapping, cmp)
    result.differences += diffs
    result.notes += notes
    _attribute_observations(result, result.applied, model_a, model_b)
    if cmp.tolerance_used:
        result.notes.append(f"not bitwise, within rtol={CUDA_RTOL} atol={CUDA_ATOL}: " + "; ".join(cmp.tolerance_used))
    all_safe = all(f["applicability"] == "safe" for f in result.applied)
    if not result.differences:
        how = "bitwise" if not cmp.tolerance_used else f"within rtol={CUDA_RTOL} atol={CUDA_ATOL}"
        what = "outputs, loss, parameter and input gradients, parameters and buffers after the step"
        result.checks["same"] = Check(PASS, f"{what}: identical ({how})")
    elif all_safe:
        result.checks["same"] = Check(FAIL, f"{len(result.differences)} difference(s) after a SAFE fix")
    else:
        result.checks["same"] = Check(DIFF, f"{len(result.differences)} difference(s), listed (unsafe fix)")

    # --- 4. deepcopy of the fixed model works and agrees --------------------------------------
    if rec_b.exception is not None and _is_graph_leaf_error(rec_b.exception):
        result.checks["deepcopy"] = Check(FAIL, f"the fixed model still raises the graph-leaves error in {rec_b.where}")
        result.graph_tensors = find_graph_tensors(model_b)
    else:
        try:
            clone = copy.deepcopy(model_b)
        except RuntimeError as exc:
            if not _is_graph_leaf_error(exc):
                raise
            result.graph_tensors = find_graph_tensors(model_b)
            result.checks["deepcopy"] = Check(FAIL, "copy.deepcopy(fixed model) still raises the graph-leaves error")
        else:
            if rec_b.first_call is not None:
                args, kwargs = rec_b.first_call
            else:
                args, kwargs = _detach_args(inputs), {}
            with torch.no_grad():
                _seed(SEED + 1)
                out_copy = _snapshot(clone(*_detach_args(args), **_detach_args(kwargs)))
                _seed(SEED + 1)
                out_model = _snapshot(model_b(*_detach_args(args), **_detach_args(kwargs)))
            bad = [d for (k, ta), (_, tb) in zip(out_model, out_copy) if (d := cmp.same(f"copy's output {k}", ta, tb))]
            if len(out_copy) != len(out_model):
                bad.append("copy's output structure differs")
            if bad:
                result.checks["deepcopy"] = Check(FAIL, "copy.deepcopy works but the copy disagrees: " + "; ".join(bad))
            else:
                result.checks["deepcopy"] = Check(PASS, "copy.deepcopy(model) works; the copy gives the same outputs")

    # --- 5. safety -----------------------------------------------------------------------------
    _judge_safety(spec, result, all_safe)


def _judge_fix(spec: Spec, result: Result, fixres, crashed: bool, unsafe: bool) -> str:
    """Sets the 'fix' check; returns 'go' or 'stop' (later checks stay SKIP with a reason)."""
    if fixres is None:
        if crashed and not spec.user:
            result.checks["fix"] = Check(FAIL, "no source to fix")
            return "stop"
        return "go"
    applied = result.applied
    no_fix = [s for s in result.skipped if s["reason"].startswith("no automatic fix")]
    unsafe_left = [s for s in result.skipped if s["reason"].startswith("unsafe fix not applied")]
    other_left = [s for s in result.skipped if s not in no_fix and s not in unsafe_left]
    labels = sorted({a["applicability"] for a in applied} | {"unsafe" for _ in unsafe_left})

    def fmt(items):
        return ", ".join(f"{s['code']} line {s['line']}" for s in items)

    if spec.expect_fix in ("safe", "unsafe") and labels and spec.expect_fix == "safe" and "unsafe" in labels:
        result.checks["fix"] = Check(FAIL, f"expected a safe fix; the fixer offers an unsafe one ({fmt(unsafe_left) or fmt(applied)})")
        return "stop" if not applied else "go"
    if spec.expect_fix == "unsafe" and applied and all(a["applicability"] == "safe" for a in applied) and not unsafe_left:
        result.checks["fix"] = Check(FAIL, f"expected an unsafe fix; the fixer labels it safe ({fmt(applied)})")
        return "go"  # run the comparison anyway: it shows what the 'safe' fix changes
    if no_fix and (crashed or spec.user):
        result.checks["fix"] = Check(FAIL, f"no fix available: {fmt(no_fix)}"
                                     + (f" (applied: {fmt(applied)})" if applied else ""))
        return "stop" if not applied else "go"
    if unsafe_left and not unsafe:
        result.checks["fix"] = Check(SKIP, f"unsafe fix not applied: {fmt(unsafe_left)} (run with --unsafe-fixes)")
        for name in ("same", "deepcopy", "safety"):
            result.checks[name] = Check(SKIP, "needs --unsafe-fixes")
        return "stop"
    if other_left:
        result.checks["fix"] = Check(FAIL, f"fix not applied: {fmt(other_left)} ({other_left[0]['reason']})")
        return "stop" if not applied else "go"
    if spec.expect_fix == "none" and applied:
        result.checks["fix"] = Check(FAIL, f"expected no fix, the fixer applied {fmt(applied)}")
        return "go"
    if not applied:
        if crashed:
            result.checks["fix"] = Check(FAIL, "the original crashes but the fixer changes nothing (no finding)")
            return "stop"
        result.checks["fix"] = Check(PASS, "nothing to fix")
        return "go"
    desc = ", ".join(f"{a['code']} line {a['line']} ({a['applicability']})" for a in applied)
    result.checks["fix"] = Check(PASS, f"applied {desc}")
    return "go"


def _judge_safety(spec: Spec, result: Result, all_safe: bool) -> None:
    if not result.applied:
        result.checks["safety"] = Check(PASS if not result.differences else FAIL,
                                        "no fix applied" + (": but runs differ" if result.differences else ""))
        return
    if all_safe:
        if result.differences:
            result.checks["safety"] = Check(FAIL, "a SAFE fix changed what the model computes: " + result.differences[0])
        else:
            result.checks["safety"] = Check(PASS, "safe fix: no difference")
        return
    missing = [e for e in spec.expect_unsafe_diff if not any(e in d for d in result.differences)]
    if missing:
        result.checks["safety"] = Check(FAIL, f"unsafe fix: expected difference not shown: {missing}")
    elif result.differences:
        result.checks["safety"] = Check(DIFF, f"unsafe fix: {len(result.differences)} difference(s) listed")
    else:
        result.checks["safety"] = Check(PASS, "unsafe fix: no difference in this program")


# ---------------------------------------------------------------------------------------------
# reports


def format_table(results: list[Result], header: list[str]) -> str:
    rows = [["fixture", "device", *CHECKS, "result"]]
    for r in results:
        rows.append([r.fixture, r.device, *(r.checks[c].status for c in CHECKS), r.status])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = list(header)
    for j, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    for r in results:
        lines.append(f"{r.fixture} [{r.device}]: {r.status}")
        for c in CHECKS:
            ck = r.checks[c]
            if ck.detail:
                lines.append(f"  {c:<8} {ck.status:<4} {ck.detail}")
        for a in r.applied:
            lines.append(f"  applied  {a['code']} line {a['line']} ({a['applicability']}): {a['description']}")
        for s in r.skipped:
            lines.append(f"  left     {s['code']} line {s['line']}: {s['reason']}")
        for d in r.differences:
            lines.append(f"  differs  {d}")
        for n in r.notes:
            lines.append(f"  note     {n}")
        if r.graph_tensors and (r.checks["deepcopy"].status == FAIL or r.checks["crash"].status in (INFO, PASS)):
            label = "graph tensors (fixed model)" if r.checks["deepcopy"].status == FAIL else "graph tensors (original)"
            lines.append(f"  {label}: " + ", ".join(r.graph_tensors))
    failed = [r for r in results if r.status == FAIL]
    lines.append("")
    lines.append(f"{len(results)} run(s): {len(results) - len(failed)} ok, {len(failed)} failed")
    return "\n".join(lines)


def write_junit(results: list[Result], path: str) -> None:
    import xml.etree.ElementTree as ET

    suite = ET.Element("testsuite", name="graphleaf-verify")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in results:
        for c in CHECKS:
            ck = r.checks[c]
            counts["tests"] += 1
            case = ET.SubElement(suite, "testcase", classname=f"graphleaf.verify.{r.fixture}", name=f"{r.device}.{c}")
            if ck.status == FAIL:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=ck.detail).text = "\n".join(r.differences + r.graph_tensors)
            elif ck.status == SKIP:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=ck.detail)
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join([f"{ck.status}: {ck.detail}"] + [f"differs: {d}" for d in r.differences])
    for k, v in counts.items():
        suite.set(k, str(v))
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


# ---------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("fixtures", nargs="*", metavar="FIXTURES",
                        help="fixture files or folders (default: fixtures/models/)")
    parser.add_argument("--device", default=None,
                        help="comma-separated devices, e.g. cpu,cuda (default: cpu, and cuda when available)")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply and verify unsafe fixes")
    parser.add_argument("--model", metavar="TARGET",
                        help="verify a model of yours: package.module:callable or path/to/file.py:callable")
    parser.add_argument("--inputs", metavar="TARGET",
                        help="callable returning the model's inputs (default: make_inputs next to --model)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--junit-xml", metavar="FILE", help="write the results as JUnit XML")


def _devices(arg: str | None, out) -> list[str]:
    import torch

    if arg is None:
        if torch.cuda.is_available():
            return ["cpu", "cuda"]
        print("cuda: not available, skipped", file=out)
        return ["cpu"]
    devices = [d.strip() for d in arg.split(",") if d.strip()]
    for d in devices:
        if d.startswith("cuda"):
            if not torch.cuda.is_available():
                raise _Usage(f"graphleaf verify: --device {d}: CUDA is not available here (torch.cuda.is_available() is False)")
        elif d != "cpu":
            raise _Usage(f"graphleaf verify: unknown device {d!r} (use cpu, cuda or cuda:N)")
    return devices


def _user_spec(args) -> Spec:
    from .targets import TargetError, resolve_target

    try:
        target = resolve_target(args.model)
    except TargetError as exc:
        raise _Usage(str(exc)) from None
    path = target.file if target.file and target.file.endswith(".py") else None
    spec = Spec(name=args.model, path=path, model_attr=target.attr, user=True, expect_crash=None,
                step_attr="training_step")
    if args.inputs:
        try:
            spec.inputs_callable = resolve_target(args.inputs).obj
        except TargetError as exc:
            raise _Usage(str(exc)) from None
    elif target.sibling("make_inputs") is None:
        raise _Usage(f"graphleaf verify: --inputs TARGET is needed ({args.model}'s module has no make_inputs)")
    spec.module = target.module
    return spec


def run(args) -> int:
    out = sys.stdout
    try:
        import torch
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    try:
        devices = _devices(args.device, out)
        if args.model:
            specs = [_user_spec(args)]
        else:
            if args.inputs:
                raise _Usage("graphleaf verify: --inputs only goes with --model")
            specs = [_fixture_spec(p) for p in collect_fixtures(args.fixtures)]
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    header = [f"graphleaf verify: torch {torch.__version__}, seed {SEED}, devices {', '.join(devices)}"
              + (", unsafe fixes on" if args.unsafe_fixes else "")]
    if "cpu" in devices:
        header.append("cpu: bitwise comparison, torch.use_deterministic_algorithms(True)")
    if any(d.startswith("cuda") for d in devices):
        header.append(f"cuda: bitwise where deterministic, else within rtol={CUDA_RTOL} atol={CUDA_ATOL} (reported per run)")
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="graphleaf-verify-") as work:
        for spec in specs:
            for device in devices:
                results.append(verify_one(spec, device, args.unsafe_fixes, work))
    print(format_table(results, header), file=out)
    payload = {
        "version": 1,
        "torch": torch.__version__,
        "devices": devices,
        "cuda_available": torch.cuda.is_available(),
        "unsafe_fixes": bool(args.unsafe_fixes),
        "ok": all(r.status != FAIL for r in results),
        "results": [r.to_json() for r in results],
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
    if args.junit_xml:
        write_junit(results, args.junit_xml)
    return 0 if payload["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphleaf verify", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
