"""``trace_stores(model)``: record, while code runs, which line stored a graph tensor on a module.

Wraps ``nn.Module.__setattr__`` and watches in-place updates of buffers (a TorchFunctionMode),
so the file:line of each store is known even where the static analysis has no finding.
Imports torch.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from .findings import GraphTensor, display_path
from .walk import TORCH_DIR, module_name

_THIS_FILE = os.path.abspath(__file__)


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
        return f"{display_path(self.file)}:{self.line}"


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
        if fname in skip_files or frame.f_code.co_name == "__setattr__" and fname.startswith(TORCH_DIR):
            frame = frame.f_back
            continue
        if fname.startswith(TORCH_DIR):
            if library is None:
                library = f"{_display_torch(fname)}:{frame.f_lineno}"
            frame = frame.f_back
            continue
        return fname, frame.f_lineno, library
    return "<unknown>", 0, library


def _display_torch(fname: str) -> str:
    return "torch/" + fname[len(TORCH_DIR):].replace(os.sep, "/")


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
    names = {id(m): module_name(name, n) for n, m in model.named_modules(remove_duplicate=False)}
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
