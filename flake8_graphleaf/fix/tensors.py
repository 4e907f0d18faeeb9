"""Is an expression certainly one tensor?  Unsafe fixes add ``.detach()``; on a tuple, a dict or a
model output that would crash, so they are only offered where the value is certainly one tensor."""

from __future__ import annotations

import ast

from .context import Context, method_self_name

# -- is an expression certainly a single tensor? ---------------------------------------
# Unsafe fixes add `.detach()`; on a tuple, a dict or a model output that would crash,
# so they are only offered where the value is certainly one tensor.
_TUPLE_RESULTS = frozenset(
    """split chunk unbind sort topk max min median mode kthvalue aminmax std_mean var_mean
    frexp histogram meshgrid broadcast_tensors tensor_split hsplit vsplit dsplit unique
    unique_consecutive svd qr eig eigh slogdet lstsq nonzero where tolist item
    multi_head_attention_forward""".split()
)
_TENSOR_METHODS = frozenset(
    """clone mean sum prod view reshape permute transpose contiguous float half double bfloat16 to
    flatten squeeze unsqueeze softmax log_softmax sigmoid tanh relu exp log abs pow matmul mm bmm
    norm std var masked_fill clamp clip expand expand_as repeat type_as cumsum cumprod flip roll
    narrow select gather index_select masked_select mul add sub div neg sqrt rsqrt square
    logsumexp amax amin diagonal tril triu t sin cos erf gelu silu cpu cuda detach_""".split()
)
_TENSOR_MODULES = frozenset(
    """Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm1d
    BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d RMSNorm
    Embedding EmbeddingBag Dropout Dropout1d Dropout2d Dropout3d ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh
    Softmax LogSoftmax LeakyReLU ELU PReLU Hardswish Hardsigmoid Identity Flatten Unflatten Upsample
    AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d PixelShuffle
    MSELoss L1Loss CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss SmoothL1Loss HuberLoss KLDivLoss""".split()
)


def certainly_tensor(node: ast.AST, ctx: "Context", method, depth: int = 0) -> bool:
    if depth > 6 or node is None:
        return False
    function = isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    self_name = method_self_name(method) if function else None
    facts = None
    if function:
        parent = ctx.parents.get(method)
        info = ctx.classes.get(parent.name) if isinstance(parent, ast.ClassDef) else None
        facts = info.facts if info is not None else None
    if isinstance(node, (ast.BinOp,)):
        if isinstance(node.op, ast.MatMult):
            return True
        return certainly_tensor(node.left, ctx, method, depth + 1) or certainly_tensor(node.right, ctx, method, depth + 1)
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
        return certainly_tensor(node.operand, ctx, method, depth + 1)
    if isinstance(node, ast.Subscript):
        return certainly_tensor(node.value, ctx, method, depth + 1)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == self_name and facts is not None:
            if node.attr in facts.params or node.attr in facts.buffers:
                return True
            value = _last_attr_assignment(method, node)  # self.pos_emb = <tensor>; ...; self.buf = self.pos_emb
            return value is not None and certainly_tensor(value, ctx, method, depth + 1)
        return node.attr in ("T", "mT", "H", "real", "imag") and certainly_tensor(node.value, ctx, method, depth + 1)
    if isinstance(node, ast.Call):
        func = node.func
        if _tensor_layer(func, ctx, method):  # nn.Linear(3, 1)(x), or layer(x) with layer = nn.Linear(...)
            return True
        qual = ctx.imports.qualname(func) or ""
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if qual in ("torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.Tensor", "torch.tensor"):
            return True
        if qual.startswith("torch."):
            if last in _TUPLE_RESULTS or last[:1].isupper():
                return False
            if "pool" in last and any(k.arg == "return_indices" for k in node.keywords):
                return False
            return qual.count(".") == 1 or qual.startswith("torch.nn.functional.")
        if isinstance(func, ast.Attribute):
            recv = func.value
            if isinstance(recv, ast.Name) and recv.id == self_name and facts is not None:
                ctor = facts.submodule_ctors.get(func.attr, "")
                return ctor.rsplit(".", 1)[-1] in _TENSOR_MODULES
            if last in _TENSOR_METHODS:
                return certainly_tensor(recv, ctx, method, depth + 1) or last in ("clone", "contiguous", "view", "reshape")
        return False
    if isinstance(node, ast.Name) and method is not None:
        value = _last_assignment(method, node)
        return value is not None and certainly_tensor(value, ctx, method, depth + 1)
    return False


def _tensor_layer(func: ast.AST, ctx: "Context", scope) -> bool:
    """Is ``func`` a torch layer that returns one tensor: ``nn.Linear(...)`` itself, or a name
    assigned once (in the function or at module level) to one?"""
    if isinstance(func, ast.Name) and scope is not None:
        func = _last_assignment(scope, func)
    if not isinstance(func, ast.Call):
        return False
    qual = ctx.imports.qualname(func.func) or ""
    return qual.startswith("torch.nn.") and qual.rsplit(".", 1)[-1] in _TENSOR_MODULES


def _last_attr_assignment(method, use: ast.Attribute) -> ast.AST | None:
    """The value of the single plain assignment to ``self.<attr>`` in ``method`` (at its top level,
    before ``use``), when nothing else in the method assigns it."""
    found = []
    for n in ast.walk(method):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            if (isinstance(t, ast.Attribute) and t.attr == use.attr and isinstance(t.value, ast.Name)
                    and isinstance(use.value, ast.Name) and t.value.id == use.value.id):
                found.append(n)
    if len(found) != 1 or not isinstance(found[0], (ast.Assign, ast.AnnAssign)) or found[0] not in method.body:
        return None
    if (found[0].lineno, found[0].col_offset) >= (use.lineno, use.col_offset) or found[0].value is None:
        return None
    return found[0].value


def _last_assignment(method, use: ast.Name) -> ast.AST | None:
    """The value of the single plain assignment to ``use.id`` before ``use`` in ``method``."""
    found = []
    for n in ast.walk(method):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and (n.lineno, n.col_offset) < (use.lineno, use.col_offset):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == use.id for t in targets):
                found.append(n)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            names = {x.id for x in ast.walk(n.target if not isinstance(n, ast.With) else n) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
            if use.id in names:
                return None
    if len(found) != 1 or found[0].value is None:
        return None
    return found[0].value
