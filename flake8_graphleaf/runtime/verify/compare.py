"""Comparing two runs bitwise: outputs, losses, gradients, buffers, state_dict keys (legacy norm names mapped),
and what a fix did to the attribute it is about.  Imports torch inside the functions."""

from __future__ import annotations

from .harness import CUDA_ATOL, CUDA_RTOL, StepRecord, is_graph_leaf_error, short_exc, tensors_in
from .results import Result, Spec


# legacy -> parametrizations state_dict names (weight_norm: g, v; spectral_norm: orig, u, v)
def key_candidates(key: str) -> list[str]:
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
        for cand in key_candidates(k):
            if cand in b_set and cand not in used:
                mapping[k] = cand
                used.add(cand)
                break
    missing = [k for k in a_keys if k not in mapping]
    extra = [k for k in b_keys if k not in used]
    return mapping, missing, extra


class Comparator:
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


def compare_records(spec: Spec, a: StepRecord, b: StepRecord, mapping: dict, cmp: Comparator) -> tuple[list[str], list[str]]:
    """(differences, notes) between the original's step and the fixed model's step."""
    diffs: list[str] = []
    notes: list[str] = []
    if a.exception is not None and b.exception is None:
        if is_graph_leaf_error(a.exception):
            notes.append(f"the original raised the graph-leaves error in {a.where}; the fixed model does not")
        else:
            diffs.append(f"step: the original raised {short_exc(a.exception)} in {a.where}; the fixed model does not")
    elif b.exception is not None and (a.exception is None or short_exc(a.exception) != short_exc(b.exception)):
        diffs.append(f"step: the fixed model raises {short_exc(b.exception)} in {b.where}"
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
    if (a.loss is not None or b.loss is not None) and not is_graph_leaf_error(a.exception):
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


def attribute_observations(result: Result, findings_applied, model_a, model_b) -> None:
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
            ta = [t for _, t in tensors_in(va)] if va is not None else []
            tb = [t for _, t in tensors_in(vb)] if vb is not None else []
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
