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
``steps``        ``[line, code]`` of each binding from the source to the store, then the store
``reached``      how the storing code runs: ``forward -> self._step()``, a hook, ``__init__``
``grad``         the grad mode there
``kept``         why the value is still there when the call returns
``copied``       what ``copy.deepcopy`` copies to reach it
``assumed``      (only where there is one) a step the analysis takes on trust: a callable whose
                 semantics it does not have, taken to carry its arguments' history

``graphleaf check --show-witness`` prints it under each finding; the JSON and SARIF outputs carry
it.  A finding whose chain has a guess in it (an argument nothing shows to be an activation) is
not reported under a default code (GLF010).
"""

from __future__ import annotations

import ast

_MAX_CODE = 80


def _code(target: str, node: ast.AST | None) -> str:
    if node is None:
        return target.rstrip()
    text = ast.unparse(node)
    text = " ".join(text.split())
    if len(text) > _MAX_CODE:
        text = text[: _MAX_CODE - 3] + "..."
    return f"{target}{text}"


def source_kind(origin: str) -> str:
    if origin.startswith("parameter "):
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


def steps(value, store_line: int, store_code: str) -> list[list]:
    """The value's bindings, then the store (``[line, code]`` each)."""
    out = [[line, _code(target, node)] for line, target, node in getattr(value, "trail", ())]
    out.append([store_line, store_code])
    return out


def make(value, store_node: ast.AST, store_stmt: ast.AST | None, reached: str, grad: bool, kept: str, copied: str,
         source: str | None = None, kind: str | None = None) -> dict:
    origin = value.origin or "a computation on the autograd graph"
    kind = kind or source_kind(origin)
    code = _code("", store_stmt if isinstance(store_stmt, ast.stmt) and not isinstance(
        store_stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)) else store_node)
    out = {
        "source": source or _SOURCE_TEXT.get(kind, "{o}").format(o=origin),
        "source_kind": kind,
        "steps": steps(value, store_node.lineno, code),
        "reached": reached,
        "grad": "enabled" if grad else "disabled here, but the value already has a grad_fn (passing it on keeps it)",
        "kept": kept,
        "copied": copied,
    }
    if getattr(value, "guess", None):
        out["assumed"] = f"{value.guess} is taken to carry its arguments' history"
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
