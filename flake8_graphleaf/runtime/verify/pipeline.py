"""One fixture on one device: reproduce the crash, run the real fixer on a copy, run both, judge.

Imports torch inside the functions."""

from __future__ import annotations

import copy
import os
import re
import sys
import traceback
from typing import Any, Callable

from .compare import Comparator, attribute_observations, compare_records, map_state_keys
from .harness import (
    tensors_in,
    CUDA_ATOL,
    CUDA_RTOL,
    SEED,
    build_model,
    clone_inputs,
    detach_args,
    deterministic,
    is_graph_leaf_error,
    make_inputs,
    run_step,
    seed_all,
    short_exc,
    snapshot,
)
from .loading import import_file
from .results import CHECKS, DIFF, FAIL, INFO, PASS, SKIP, Check, Result, Spec

# The fixer usedon the temporary copy.  A module attribute so that the tests can put a
# deliberately wrong fixer here and see verify catch it.
_fix_source: Callable[..., Any] | None = None


def _fixer():
    if _fix_source is not None:
        return _fix_source
    from ...fix.fixer import fix_source

    return fix_source


class _Combined:
    """The fix results of every file of a --model project, as one (for the judgement of the fix)."""

    def __init__(self, pf):
        self.applied = [f for p in pf.files for f in pf.results[p].applied]
        self.skipped = [s for p in pf.files for s in pf.results[p].skipped]
        self.source = pf.sources[pf.files[0]]


def graph_tensor_paths(obj, limit: int = 40) -> list[str]:
    """Attribute paths, as ``copy.deepcopy`` reaches them, that hold a tensor with a grad_fn."""
    from ..walk import find_graph_tensors

    return [item.path for item in find_graph_tensors(obj)][:limit]


def applied_dicts(findings) -> list[dict]:
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
        with deterministic(device):
            _verify_one(spec, device, unsafe, workdir, result)
    except Exception as exc:  # noqa: BLE001 - a broken fixture is a failed fixture, not a crashed run
        # the first check not yet decided fails: a harness error is never a pass
        failed = next((c for c in CHECKS if c not in result.checks), CHECKS[-1])
        result.checks[failed] = Check(FAIL, f"harness error: {short_exc(exc)}")
        result.notes.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
    for name in CHECKS:
        result.checks.setdefault(name, Check(SKIP, "not reached"))
    return result


def _verify_one(spec: Spec, device: str, unsafe: bool, workdir: str, result: Result) -> None:
    import torch

    modules = []
    projects: list = []  # a --model project fixed across files: its original modules come back at the end
    try:
        if spec.module is not None:
            orig = spec.module
        else:
            orig = import_file(spec.path, "orig")
            modules.append(orig)
        _run_pipeline(spec, device, unsafe, workdir, result, orig, modules, torch, projects)
    finally:
        for m in modules:
            sys.modules.pop(m.__name__, None)
        from .project_fix import restore

        for pf in projects:
            restore(pf)


def _run_pipeline(spec, device, unsafe, workdir, result, orig, modules, torch, projects) -> None:
    # --- 1. the original: step, then deepcopy ------------------------------------------------
    model_a = build_model(orig, spec, device)
    state0 = {k: v.detach().clone() for k, v in model_a.state_dict().items()}
    inputs = make_inputs(orig, spec, device)
    seed_all(SEED)
    rec_a = run_step(orig, spec, model_a, clone_inputs(inputs))
    crashed, where = False, ""
    if rec_a.exception is not None:
        if is_graph_leaf_error(rec_a.exception):
            crashed, where = True, f"in {rec_a.where}"
        else:
            result.checks["crash"] = Check(FAIL, f"the original's step raised {short_exc(rec_a.exception)}")
            return
    else:
        try:
            copy.deepcopy(model_a)
        except RuntimeError as exc:
            if not is_graph_leaf_error(exc):
                raise
            crashed, where = True, "in copy.deepcopy(model)"
    if crashed:
        result.graph_tensors = graph_tensor_paths(model_a)
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
    pf = None
    if source is not None and spec.user and spec.module is not None:
        from .project_fix import fix_project

        # The model's classes may come from other files of the project: each of them is fixed.
        pf = fix_project(spec.module, model_a, unsafe, _fixer(), workdir)
    if source is None:
        result.checks["fix"] = Check(SKIP, "no source file to fix")
        fixed_path = None
        fixed_source = None
        fixres = None
    elif pf is not None:
        fixres = _Combined(pf)
        for path in pf.files:
            shown = os.path.relpath(path, os.path.dirname(pf.root)) if pf.root != pf.path_entry else os.path.relpath(path, pf.root)
            res = pf.results[path]
            result.applied += [dict(d, file=shown) for d in applied_dicts(res.applied)]
            result.skipped += [
                {"code": f.code, "line": f.line, "attribute": f.attribute, "reason": why, "file": shown,
                 "applicability": f.fix.applicability if f.fix else None}
                for f, why in res.skipped
            ]
        fixed_path = None
        fixed_source = fixres.source
    else:
        from ...fix.readers import project_index

        # The fixture's own file is the project: a private attribute nothing reads may become a local.
        # every confidence level: the run before and after is the proof (a store the analysis
        # took a step on trust for is fixed here when the run shows it breaks the copy)
        from ...analysis import Options
        fixres = _fixer()(source, spec.path, unsafe=unsafe, project=project_index([spec.path]),
                          options=Options(confidence="low"))
        fixed_source = fixres.source
        result.applied = applied_dicts(fixres.applied)
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

    from .project_fix import changed

    if pf is not None and changed(pf):
        try:
            from .project_fix import import_fixed

            projects.append(pf)
            fixed = import_fixed(pf, spec.module)
        except Exception as exc:  # noqa: BLE001 - the fixed project must import as the original did
            result.checks["same"] = Check(FAIL, f"the fixed project does not import: {short_exc(exc)}")
            return
    elif fixed_path and fixed_source != source:
        try:
            if spec.module is not None and getattr(spec.module, "__package__", None):
                # --model in a package: the fixed copy is imported as a sibling, so its
                # relative imports resolve (the loader is runtime.targets, as for explain).
                from ..targets import import_beside

                fixed = import_beside(fixed_path, spec.module, "fixed")
            else:
                fixed = import_file(fixed_path, "fixed", sibling_dir=os.path.dirname(spec.path))
        except Exception as exc:  # noqa: BLE001 - e.g. relative imports outside its package
            result.checks["same"] = Check(FAIL, f"the fixed copy does not import: {short_exc(exc)}")
            return
        modules.append(fixed)
    else:
        fixed = orig

    # --- 3. same seed, weights, inputs: compare everything ------------------------------------
    cmp = Comparator(device)
    model_b = build_model(fixed, spec, device)
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
    seed_all(SEED)
    rec_b = run_step(fixed, spec, model_b, clone_inputs(inputs))
    diffs, notes = compare_records(spec, rec_a, rec_b, mapping, cmp)
    result.differences += diffs
    result.notes += notes
    attribute_observations(result, result.applied, model_a, model_b)
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
    if rec_b.exception is not None and is_graph_leaf_error(rec_b.exception):
        result.checks["deepcopy"] = Check(FAIL, f"the fixed model still raises the graph-leaves error in {rec_b.where}")
        result.graph_tensors = graph_tensor_paths(model_b)
    else:
        held = copysafe_holders(model_b, result.applied)
        before = {k: [(id(t), t.grad_fn is not None) for _, t in tensors_in(v)] for k, (_, v) in held.items()}
        try:
            clone = copy.deepcopy(model_b)
        except RuntimeError as exc:
            if not is_graph_leaf_error(exc):
                raise
            result.graph_tensors = graph_tensor_paths(model_b)
            result.checks["deepcopy"] = Check(FAIL, "copy.deepcopy(fixed model) still raises the graph-leaves error")
        else:
            # before any further forward call: the copy's values against the original's, untouched
            copy_bad = copysafe_problems(held, before, copysafe_holders(clone, result.applied, like=held), torch)
            if rec_b.first_call is not None:
                args, kwargs = rec_b.first_call
            else:
                args, kwargs = detach_args(inputs), {}
            with torch.no_grad():
                seed_all(SEED + 1)
                out_copy = snapshot(clone(*detach_args(args), **detach_args(kwargs)))
                seed_all(SEED + 1)
                out_model = snapshot(model_b(*detach_args(args), **detach_args(kwargs)))
            bad = [d for (k, ta), (_, tb) in zip(out_model, out_copy) if (d := cmp.same(f"copy's output {k}", ta, tb))]
            if len(out_copy) != len(out_model):
                bad.append("copy's output structure differs")
            bad = copy_bad + bad
            if bad:
                result.checks["deepcopy"] = Check(FAIL, "copy.deepcopy works but the copy disagrees: " + "; ".join(bad))
            else:
                extra = (f"; copy-safe: {len(held)} attribute(s) detached in the copy, the original untouched"
                         if held else "")
                result.checks["deepcopy"] = Check(PASS, "copy.deepcopy(model) works; the copy gives the same outputs" + extra)

    # --- 5. safety -----------------------------------------------------------------------------
    _judge_safety(spec, result, all_safe)


def _copysafe_names(applied) -> dict[str, set[str]]:
    """{class name: attribute names} that the applied copy-safe fixes name; "_buffers" for a buffer
    finding (the buffer lives in ``_buffers``), "*" when the fix covers every attribute."""
    wanted: dict[str, set[str]] = {}
    for a in applied:
        desc = a.get("description") or ""
        if "__getstate__" not in desc or not a.get("class_name") or not a.get("attribute"):
            continue
        m = re.search(r"(?:add|extend) (\w+)\.__getstate__", desc)
        cls = m.group(1) if m else a["class_name"]
        names = wanted.setdefault(cls, set())
        if "every attribute" in desc:
            names.add("*")
            continue
        name = a["attribute"].split(".", 1)[-1].split("[", 1)[0]
        if cls != a["class_name"]:  # a helper object's class: self.action_dist.distribution -> distribution
            name = name.rsplit(".", 1)[-1]
        if a.get("code") == "GLF004":
            names.add("_buffers:" + name)
        elif name != "__dict__" and "." not in name:
            names.add(name)
    return wanted


def held_value(obj, name: str):
    """The value a copy-safe fix hands copies in another form: ``obj.__dict__[name]``, or the buffer
    ``obj._buffers[name]`` for "_buffers:name"; a missing one is ``KeyError``."""
    if name.startswith("_buffers:"):
        return obj.__dict__["_buffers"][name.split(":", 1)[1]]
    return obj.__dict__[name]


def copysafe_holders(model, applied, like: dict | None = None) -> dict:
    """{(path, attribute): (holder, value)} for each attribute a copy-safe fix names (a buffer as
    "_buffers:name"; every attribute holding a graph tensor for a fix that covers them all), in every
    module of its class and every hook object (a bound method's ``__self__``, a callable) of that
    class, in hook order.  ``like``: the holders of the original, whose names the copy's are looked up by."""
    import torch

    wanted = _copysafe_names(applied)
    out: dict = {}
    if not wanted:
        return out
    for mpath, m in model.named_modules():
        holders = [(mpath or "model", m)]
        for hooks_name in ("_forward_hooks", "_forward_pre_hooks"):
            for i, h in enumerate(getattr(m, hooks_name, {}).values()):
                holders.append((f"{mpath or 'model'}.{hooks_name}[{i}]", getattr(h, "__self__", h)))
        for key, value in vars(m).items():  # helper objects held on the module
            if not isinstance(value, (torch.nn.Module, torch.Tensor, type)) and hasattr(value, "__dict__") \
                    and type(value).__name__ in wanted:
                holders.append((f"{mpath or 'model'}.{key}", value))
        for where, obj in holders:
            names = set(wanted.get(type(obj).__name__, ()))
            if "*" in names and like is not None:
                names.discard("*")
                names |= {name for (w, name) in like if w == where}
            elif "*" in names:
                state = getattr(obj, "__dict__", {})
                names.discard("*")
                names |= {k for k, v in state.items() if k != "_buffers"
                          and any(t.grad_fn is not None for _, t in tensors_in(v))}
                names |= {"_buffers:" + k for k, v in (state.get("_buffers") or {}).items()
                          if isinstance(v, torch.Tensor) and v.grad_fn is not None}
            for name in sorted(names):
                try:
                    out[(where, name)] = (obj, held_value(obj, name))
                except (KeyError, TypeError, AttributeError):
                    continue
    return out


def copysafe_problems(held: dict, before: dict, copied: dict, torch) -> list[str]:
    """The copy holds detached values (same data, no grad_fn); the original keeps its graph tensors."""
    bad = []
    for key, (obj, value) in held.items():
        where = f"{key[0]}.{key[1]}"
        try:
            current = held_value(obj, key[1])
        except KeyError:
            current = None
        now = [(id(t), t.grad_fn is not None) for _, t in tensors_in(current)]
        if now != before[key]:
            bad.append(f"{where}: the original's value changed in copy.deepcopy")
        if key not in copied:
            bad.append(f"{where}: missing in the copy")
            continue
        ta, tb = tensors_in(value), tensors_in(copied[key][1])
        if len(ta) != len(tb):
            bad.append(f"{where}: the copy holds {len(tb)} tensors, the original {len(ta)}")
            continue
        for (p, a), (_, b) in zip(ta, tb):
            if b.grad_fn is not None:
                bad.append(f"{where}{p}: still on the graph in the copy")
            elif not torch.equal(a.detach(), b):
                bad.append(f"{where}{p}: the copy's value differs")
    return bad


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
    missing = [e for e in spec.expect_fixes if not any(e in (a["description"] or "") for a in applied)]
    if missing:
        result.checks["fix"] = Check(FAIL, f"expected fix kind not applied: {missing} (applied: {fmt(applied)})")
        return "go"
    desc = ", ".join(f"{a['code']} {a['file'] + ' ' if a.get('file') else ''}line {a['line']} ({a['applicability']})"
                     for a in applied)
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
