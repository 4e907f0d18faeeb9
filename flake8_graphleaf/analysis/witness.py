"""A finding's proof: the chain from a grad source to what ``copy.deepcopy`` copies.

Every finding under a default code carries a witness (``Finding.witness``, a JSON-able dict):

``source``       what puts the value on the graph: a submodule call, a parameter, a tensor made
                 with ``requires_grad=True``, ``create_graph=True`` gradients, the output a
                 forward hook is given, or a ``forward`` argument with the evidence that it is an
                 activation (fed to a learnable computation, passed a graph tensor by a caller,
                 chained after other layers)
``source_kind``  one word for it: ``submodule``, ``parameter``, ``requires_grad``,
                 ``create_graph``, ``hook-output``, ``argument``, ``model-output``, ``legacy-norm``,
                 ``computation``
``steps``        ``[line, code]`` of each binding from the source to the store, then the store:
                 the line as the file has it (:func:`quote`), a step in another file prefixed
                 with that file (``train.py: x = model(b)``)
``reached``      how the storing code runs: ``forward -> self._step()``, a hook, ``__init__``
``grad``         the grad mode there
``kept``         why the value is still there when the call returns
``copied``       what ``copy.deepcopy`` copies to reach it
``assumed``      (only where there is one) the steps the analysis takes on trust: a callable whose
                 semantics it does not have, taken to carry its arguments' history; an argument
                 taken for an activation; an eval-only store taken to run with grad on; ...

``graphleaf check --show-witness`` prints it under each finding; the JSON and SARIF outputs carry
it.  A finding whose chain takes a step on trust (``Finding.trust``) is reported at a lower
confidence level (analysis/confidence.py), not in the default selection.
"""

from __future__ import annotations

import ast
import os

from .values import guess_step

_MAX_CODE = 80
_MAX_QUOTE = 100


def _code(target: str, node: ast.AST | None) -> str:
    if node is None:
        return target.rstrip()
    text = ast.unparse(node)
    text = " ".join(text.split())
    if len(text) > _MAX_CODE:
        text = text[: _MAX_CODE - 3] + "..."
    return f"{target}{text}"


def display_path(path: str, here: str) -> str:
    """Another file of the program as a message names it: from the checked file's folder when it
    is there or below (``train.py``, ``utils/ema.py``), else from the working directory, else whole."""
    try:
        rel = os.path.relpath(path, os.path.dirname(os.path.abspath(here)))
        if not rel.startswith(".."):
            return rel
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


def source_kind(origin: str) -> str:
    if origin.startswith(("parameter ", "nn.Parameter(")):
        return "parameter"
    if "requires_grad=True" in origin:
        return "requires_grad"
    if "create_graph=True" in origin:
        return "create_graph"
    if origin.startswith("output of the hooked module") or origin.startswith("input of the hooked module"):
        return "hook-output"
    if "a model output given to the metric" in origin:
        return "model-output"
    if origin.startswith("argument "):
        return "argument"
    if origin.endswith("(...)") or origin.startswith("self."):
        return "submodule"
    return "computation"


_SOURCE_TEXT = {
    "parameter": "{o}: a parameter; what is computed from it has a grad_fn",
    "requires_grad": "{o}: a tensor that requires grad; what is computed from it has a grad_fn",
    "create_graph": "{o}: gradients that are themselves on the graph",
    "hook-output": "the {o}, on the graph whenever the model runs with grad",
    "model-output": "{o}",
    "argument": "{o}",
    "submodule": "{o}: a module's output, computed with grad enabled",
    "computation": "{o}",
}


def steps(value, store_line: int, store_code: str, here: str | None = None,
          store_path: str | None = None) -> tuple[list[list], list]:
    """The value's bindings, then the store (``[line, code]`` each), and the file of each step
    (None: ``here``, the reported file). A step in another file is prefixed with it
    (``train.py: x = model(b)``)."""
    out, paths = [], []
    for line, target, node, *path in [*getattr(value, "trail", ()), (store_line, "", None, store_path)]:
        code = _code(target, node) if node is not None else store_code
        path = path[0] if path else None
        elsewhere = here is not None and path is not None and path != here
        out.append([line, f"{display_path(path, here)}: {code}" if elsewhere else code])
        paths.append(path if elsewhere else None)
    return out, paths


def rebase(proof: dict, old_here: str, new_here: str) -> dict:
    """A witness made for the file ``old_here``, for a finding in ``new_here`` (a copy site
    reporting a store of another file): each step names its file as seen from there."""
    steps, paths = proof.get("steps", []), proof.get("step_paths") or [None] * len(proof.get("steps", []))
    out, new_paths = [], []
    for (line, code), path in zip(steps, paths):
        if path is not None:
            code = code[len(display_path(path, old_here)) + 2:]  # the prefix steps() gave it
        real = path or old_here
        elsewhere = real != new_here
        out.append([line, f"{display_path(real, new_here)}: {code}" if elsewhere else code])
        new_paths.append(real if elsewhere else None)
    rebased = {**proof, "steps": out}
    rebased.pop("step_paths", None)
    if any(new_paths):
        rebased["step_paths"] = new_paths
    return rebased


def make(value, store_node: ast.AST, store_stmt: ast.AST | None, reached: str, grad: bool, kept: str, copied: str,
         source: str | None = None, kind: str | None = None, here: str | None = None,
         store_path: str | None = None) -> dict:
    """A finding's witness. ``here``: the reported file, where the chain crosses files (the
    copy graph's); ``store_path``: the file of the store."""
    origin = value.origin or "a computation on the autograd graph"
    kind = kind or source_kind(origin)
    code = _code("", store_stmt if isinstance(store_stmt, ast.stmt) and not isinstance(
        store_stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)) else store_node)
    chain_steps, paths = steps(value, store_node.lineno, code, here, store_path)
    out = {
        "source": source or _SOURCE_TEXT.get(kind, "{o}").format(o=origin),
        "source_kind": kind,
        "steps": chain_steps,
        "reached": reached,
        "grad": "enabled" if grad else "disabled here, but the value already has a grad_fn (passing it on keeps it)",
        "kept": kept,
        "copied": copied,
    }
    if any(paths):
        out["step_paths"] = paths  # the file of each step in another file than the finding's (SARIF's locations)
    if getattr(value, "guess", None):
        kind, out["assumed"] = guess_step(value.guess)
        if kind != "unknown-callable":
            out["assumed_kind"] = kind  # read (and dropped) by confidence.note_assumed / settle
    return out


def simple(source: str, kind: str, node: ast.AST, reached: str, kept: str, copied: str, grad: bool = True) -> dict:
    """A witness whose chain is one call (legacy weight norm, pruning, a process boundary)."""
    return {"source": source, "source_kind": kind, "steps": [[node.lineno, _code("", node)]], "reached": reached,
            "grad": "enabled" if grad else "disabled", "kept": kept, "copied": copied}


def chain(source: str, kind: str, steps: list[tuple[int, str, ast.AST]], reached: str, kept: str, copied: str) -> dict:
    """A witness whose steps are statements of several files (a tensor made in one function and
    copied in another): ``steps`` are (line, file prefix or "", node)."""
    return {"source": source, "source_kind": kind,
            "steps": [[line, prefix + _code("", node)] for line, prefix, node in steps],
            "reached": reached, "grad": "enabled", "kept": kept, "copied": copied}


def copied_text(target: str, buffer: bool = False, container: bool = False, helper: str | None = None) -> str:
    root, _, rest = target.partition(".")
    name = rest.split(".", 1)[0].split("[", 1)[0] if rest else target
    if helper is not None:
        return (f"copy.deepcopy(model) copies the helper object in {root}.__dict__['{helper}'] with the module, "
                f"and with it {target}")
    if buffer:
        return f"copy.deepcopy(model) copies the buffer {root}._buffers['{name}']"
    if container:
        return f"copy.deepcopy(model) copies {root}.__dict__['{name}'] and every item in it"
    return f"copy.deepcopy(model) copies {root}.__dict__['{name}']"


def quote(proof: dict, here: str | None, text: str | None, text_of) -> dict:
    """``proof`` with each step's code as its file has it: the line, stripped, as the user wrote
    it (a long line cut at 100 characters), in place of the code the analysis read. ``text``:
    the reported file's text (``here``); ``text_of(path)``: another file's text, or None. A
    step whose line cannot be read keeps the code it has."""
    paths = proof.get("step_paths") or [None] * len(proof.get("steps", ()))
    cache: dict = {}

    def line_of(path: str | None, number: int) -> str | None:
        if path not in cache:
            body = text if path is None else text_of(path)
            cache[path] = body.splitlines() if body is not None else None
        found = cache[path]
        if not found or not 1 <= number <= len(found):
            return None
        written = found[number - 1].strip()
        if not written:
            return None
        return written if len(written) <= _MAX_QUOTE else written[: _MAX_QUOTE - 3] + "..."

    out = []
    for (number, code), path in zip(proof.get("steps", ()), paths):
        written = line_of(path, number)
        if written is not None:
            code = f"{display_path(path, here)}: {written}" if path is not None and here is not None else written
        out.append([number, code])
    return {**proof, "steps": out}


def lines(witness: dict) -> list[str]:
    """The witness as text, for ``--show-witness``."""
    out = [f"source:  {witness['source']}"]
    for line, code in witness.get("steps", ()):
        out.append(f"  {line:>5}: {code}")
    out.append(f"reached: {witness['reached']}; grad {witness['grad']}")
    out.append(f"kept:    {witness['kept']}")
    out.append(f"copied:  {witness['copied']}")
    if witness.get("assumed"):
        out.append(f"assumed: {witness['assumed']}")
    return out


KEPT_AFTER_RETURN = "nothing after the store in the call clears, resets or overwrites it"
