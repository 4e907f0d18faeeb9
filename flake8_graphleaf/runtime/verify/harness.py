"""Running one training step reproducibly: seeds, deterministic algorithms, inputs, the model, the step.

Every function imports torch itself, so importing this module does not."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from .loading import resolve_attr
from .results import Spec

SEED = 1234
# On CUDA, results that are not bitwise equal may still pass within this tolerance (printed).
CUDA_RTOL = 1e-5
CUDA_ATOL = 1e-6
GRAPH_LEAF_TEXT = "graph leaves"


def is_graph_leaf_error(exc: BaseException | None) -> bool:
    return isinstance(exc, RuntimeError) and GRAPH_LEAF_TEXT in str(exc)


def short_exc(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}"


def tensors_in(obj, prefix="") -> list[tuple[str, Any]]:
    """Flatten a nested output into (path, tensor) pairs."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [(prefix or "output", obj)]
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += tensors_in(v, f"{prefix}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += tensors_in(v, f"{prefix}[{i}]")
    elif hasattr(obj, "__dict__") and not isinstance(obj, torch.nn.Module):
        for k, v in vars(obj).items():
            out += tensors_in(v, f"{prefix}.{k}")
    return out


def snapshot(obj):
    return [(k, t.detach().clone()) for k, t in tensors_in(obj)]


def move_to(obj, device):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(move_to(x, device) for x in obj)
    if isinstance(obj, list):
        return [move_to(x, device) for x in obj]
    if isinstance(obj, dict):
        return {k: move_to(v, device) for k, v in obj.items()}
    return obj


@contextlib.contextmanager
def deterministic(device: str):
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


def seed_all(seed: int) -> None:
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


def detach_args(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple):
        return tuple(detach_args(x) for x in obj)
    if isinstance(obj, list):
        return [detach_args(x) for x in obj]
    if isinstance(obj, dict):
        return {k: detach_args(v) for k, v in obj.items()}
    return obj


def run_step(module, spec: Spec, model, inputs) -> StepRecord:
    """One training step as the fixture does it; never raises (the exception is recorded)."""
    import torch

    rec = StepRecord()
    def hook(module, args, kwargs, output):
        rec.outputs.append(snapshot(output))
        if rec.first_call is None:  # replayed on the deepcopy in check 4
            rec.first_call = (detach_args(args), detach_args(kwargs))

    handle = model.register_forward_hook(hook, with_kwargs=True)
    step = getattr(module, spec.step_attr, None) if (module is not None and spec.step_attr) else None
    try:
        if step is not None:
            rec.where = f"{spec.step_attr}()"
            loss = step(model, inputs)
        else:
            rec.where = "forward"
            out = model(*inputs)
            parts = [t.float().sum() for _, t in tensors_in(out) if t.is_floating_point()]
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


def make_inputs(module, spec: Spec, device: str):
    import torch

    seed_all(SEED)
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


def clone_inputs(inputs):
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


def build_model(module, spec: Spec, device: str):
    import torch

    seed_all(SEED)
    model = resolve_attr(module, spec.model_attr)
    if not isinstance(model, torch.nn.Module):
        model = model()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{spec.model_attr} returned {type(model).__name__}, not a torch.nn.Module")
    return model.to(device).train()
