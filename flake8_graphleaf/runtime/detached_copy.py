"""``deepcopy_detached(obj)``: a deep copy in which every tensor on the autograd graph is a detached copy.

``copy.deepcopy`` refuses every tensor with a ``grad_fn``.  This does the copy anyway, the way the
seeds' hand-made ``SafeDeepCopy`` tries to, but without touching the original: the deepcopy walk
(:func:`flake8_graphleaf.runtime.walk.find_graph_tensors`, which walks exactly what deepcopy walks)
lists the graph tensors first, and a fresh ``memo`` for ``copy.deepcopy`` is pre-seeded with a
detached copy of each (``memo[id(t)] = <copy of t.detach()>``).  deepcopy looks the memo up before
it calls ``Tensor.__deepcopy__``, so it takes the detached copy wherever it meets ``t``; everything
else is copied by deepcopy itself.  Nothing is set, swapped or restored on ``obj``: two threads may
copy the same object at once.  Imports torch.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import torch

from .walk import find_graph_tensors

T = TypeVar("T")

__all__ = ["deepcopy_detached"]


def _detached(t: torch.Tensor, memo: dict) -> torch.Tensor:
    """A copy of ``t``'s value with no autograd history (requires_grad False).

    ``t.detach()`` shares ``t``'s storage, so deep-copying it through the same memo keeps the
    copy's storage shared with the copies of other tensors that view the same storage
    (a graph tensor that is a view of a buffer stays a view of the copied buffer)."""
    d = t.detach()
    if type(d) is not type(t) or getattr(t, "__dict__", None):
        # A subclass whose detach() changes the type, or a tensor with Python attributes:
        # deepcopy(d) would lose them; copy the attributes over explicitly.
        out = copy.deepcopy(d, memo)
        if getattr(t, "__dict__", None):
            out.__dict__.update(copy.deepcopy(t.__dict__, memo))
        return out
    return copy.deepcopy(d, memo)


def deepcopy_detached(obj: T, memo: dict | None = None) -> T:
    """``copy.deepcopy(obj)``, except that each tensor with a ``grad_fn`` becomes a detached copy.

    - A tensor on the autograd graph (``grad_fn is not None``) is copied as ``t.detach()`` would be
      deep-copied: same values, dtype, device, shape, strides and storage sharing, and
      ``requires_grad=False``.  A non-leaf ``.grad`` (``backward(create_graph=True)``) is detached too.
    - Everything else is exactly what ``copy.deepcopy`` makes: leaves that require grad still
      require grad, parameters stay parameters, shared objects stay shared (one memo).
    - ``obj`` is never changed, not even for a moment (no attribute is swapped and restored).

    Limits: an object with its own ``__deepcopy__`` that copies its tensors without passing the memo
    to ``copy.deepcopy`` (e.g. ``t.__deepcopy__(memo)`` called directly) still raises; objects
    deepcopy cannot copy at all (locks, open files, generators) still raise as they would.
    """
    memo = {} if memo is None else memo
    items = find_graph_tensors(obj)
    keep = []  # the detached views must outlive the copy (their ids are memo keys)
    for item in items:
        t = item.tensor
        if t is None or id(t) in memo:
            continue
        memo[id(t)] = _detached(t, memo)
    # Tensor.__deepcopy__ copies .grad with grad.__deepcopy__(memo), past the memo lookup: a leaf
    # whose .grad is on the graph is copied here, with a detached .grad.
    for item in items:
        leaf = item.grad_of
        if leaf is None or id(leaf) in memo or isinstance(leaf, torch.nn.Parameter):
            continue
        holder = leaf.detach()
        keep.append(holder)
        new = copy.deepcopy(holder, memo)
        if leaf.requires_grad:
            new.requires_grad_(True)
        new.grad = memo[id(item.tensor)]
        if getattr(leaf, "__dict__", None):
            new.__dict__.update(copy.deepcopy(leaf.__dict__, memo))
        memo[id(leaf)] = new
    result = copy.deepcopy(obj, memo)
    del keep
    return result
