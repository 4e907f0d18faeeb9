"""What names mean where torch's table (:mod:`.torch_facts`) has nothing to say: builtins,
Python's containers, the naming conventions of parameters, submodules and non-tensor arguments,
and the sizes layers keep.  Tables and small predicates only; :mod:`..evaluator.graph_tensors` and
:mod:`..evaluator.calls` use them.
"""

from __future__ import annotations

import ast
import functools
import re

from ..values import ARG, NOTHING, Value

# What torch's own callables do comes from the generated table (:mod:`.torch_facts`); what is
# here is Python's, the program's naming conventions, and the sizes layers keep.

# Attributes that torch's layers keep as sizes and counts (``layer.out_features``, ``conv.in_channels``,
# ``attn.num_heads``, ``emb.embedding_dim``): ints on any object that has them.
SIZE_ATTR_RE = re.compile(
    r"^(in|out)_(features|channels)$|^(num|n)_[a-z_]+$|^[a-z_]*_(size|dim|dims|len|length)$|^(embedding_dim|padding_idx|kernel_size|stride|groups)$"
)


@functools.lru_cache(maxsize=4096)
def is_size_name(name: str) -> bool:
    """SIZE_ATTR_RE, memoised (it is asked of every attribute the analysis evaluates)."""
    return SIZE_ATTR_RE.match(name) is not None


# Python's containers: methods that read what they hold, that name or count it, that change it.
CONTAINER_READS = frozenset("get pop popitem popleft values items copy __getitem__ setdefault".split())
CONTAINER_NAMES = frozenset("keys __len__".split())
CONTAINER_UPDATES = frozenset("append extend insert update clear remove reverse appendleft extendleft".split())

# torch namespaces whose calls never return a graph tensor (devices, hooks, profilers ...).
NON_COMPUTING_NAMESPACES = (
    "torch.cuda.", "torch.distributed.", "torch.backends.", "torch.jit.", "torch.autograd.graph.",
    "torch.autograd.profiler.", "torch.profiler.", "torch.utils.hooks.", "torch.utils.data.",
    "torch.testing.", "torch.fx.", "torch.onnx.", "torch.compiler.", "torch._dynamo.", "torch.overrides.",
)
BUFFER_CTORS = frozenset({"torch.nn.parameter.Buffer", "torch.nn.Buffer"})
PARAMETER_NAMES = frozenset({"Parameter"})

# Builtins whose result carries no autograd history.
NON_DIFF_BUILTINS = frozenset(
    """len int float bool str repr isinstance issubclass hasattr callable id hash type
    print range format ord chr bin hex oct any all vars dir locals globals open
    super""".split()
)
# Builtins that pass on (or compute from) what they are given.
PASSING_BUILTINS = frozenset(
    "list tuple dict set frozenset sorted reversed enumerate zip iter next sum max min abs round map filter pow divmod".split()
)

_PARAM_NAME_RE = re.compile(
    r"^(weight|bias)(_(ih|hh|hr|orig|g|v|raw)\w*)?$|_(weight|bias)$|^in_proj_(weight|bias)$"
)


# Names of methods rather than submodules: verbs and accessors.
_METHOD_NAME_RE = re.compile(
    r"_?(get|set|init|prepare|compute|calc|make|build|create|reset|load|save|update|register|"
    r"num|is|has|to|from|extra|apply|zero|clear|enable|disable|freeze|unfreeze|tie|resize|"
    r"prune|fuse|convert|export|generate|sample|step|log|print|check|validate|setup|"
    r"flatten|named|state|parameters|buffers|modules|children)(_|$)"
)


# Methods of torch.nn classes that projects subclass, which an installation-free analysis cannot
# read (``self.scatter(inputs, kwargs, self.device_ids)`` in a DataParallel subclass).
_PARALLEL_METHODS = frozenset({"scatter", "gather", "replicate", "parallel_apply"})
TORCH_CLASS_METHODS = {
    "torch.nn.DataParallel": _PARALLEL_METHODS,
    "torch.nn.parallel.DataParallel": _PARALLEL_METHODS,
    "torch.nn.parallel.data_parallel.DataParallel": _PARALLEL_METHODS,
    "torch.nn.parallel.DistributedDataParallel": _PARALLEL_METHODS | {"no_sync", "join"},
    "torch.nn.parallel.distributed.DistributedDataParallel": _PARALLEL_METHODS | {"no_sync", "join"},
}


def torch_base_method(bases: list[str], name: str) -> bool:
    """Is ``name`` a method of one of these torch classes (TORCH_CLASS_METHODS)?"""
    return any(name in TORCH_CLASS_METHODS.get(b, ()) for b in bases)


def looks_like_parameter(name: str) -> bool:
    return bool(_PARAM_NAME_RE.search(name))


_MODEL_NAME_RE = re.compile(
    r"^(model|net|network|module|mod|encoder|decoder|backbone|layer|block|head|classifier|"
    r"generator|discriminator|student|teacher|policy|critic|actor|submodule|child|m)s?(_|\d|$)|"
    r"_(model|net|module|encoder|decoder|backbone|layer|block|head)s?$",
    re.IGNORECASE,
)


_NOT_MODEL_SUFFIX_RE = re.compile(
    r"(cls|class|classes|fn|func|factory|type|types|builder|name|names|kwargs|args|cfg|config|path|dir|"
    r"file|id|ids|idx|list|dict|map|info|kw|str|key|keys|output|outputs|input|inputs|state|states|dim|size)$",
    re.IGNORECASE,
)


def looks_like_module_name(name: str) -> bool:
    if name.startswith(("num_", "n_", "use_", "is_", "has_", "max_", "min_")):
        return False
    return bool(_MODEL_NAME_RE.search(name)) and not _NOT_MODEL_SUFFIX_RE.search(name)


# Forward arguments that are not differentiable tensors by convention.
# The data side of a metric's ``update(preds, target)``: what a metric is given besides the
# model's outputs (the batch it was computed on, the reference values), which has no history.
METRIC_DATA_ARG_RE = re.compile(
    r"(^|_)(batch|batches|ref|refs|reference|references|gt|ground_truth|truth|true|"
    r"labels?|targets?|expected)($|_)"
)

_NON_TENSOR_ARG_RE = re.compile(
    r"(^|_)(mask|masks|ids|idx|index|indices|labels?|targets?|lengths?|lens?|len|shape|size|"
    r"sizes|step|steps|epoch|training|mode|kwargs|config|cfg|dim|axis|num|n|grid|thw|ts|"
    r"positions?|pos|cache|caches|past|seqlens?|token_type|bits|min|max|eps|"
    r"timesteps?|count|counts|width|height|offset|offsets)($|_)|"
    r"^(return|output|use|is|has|do|need|with|train)_"
)

_NON_TENSOR_ANNOTATIONS = frozenset("int float bool str bytes dict type".split())
# Annotations naming tensors that cannot require grad, or no tensor at all.
_NON_DIFF_TENSOR_TYPES = frozenset("BoolTensor LongTensor IntTensor ByteTensor ShortTensor CharTensor device dtype Size".split())


def argument_value(arg: ast.arg, default: ast.AST | None) -> Value:
    """What a ``forward`` argument may hold, judged from its name, annotation and default."""
    if _NON_TENSOR_ARG_RE.search(arg.arg):
        return NOTHING
    ann = arg.annotation
    if ann is not None:
        text = ast.unparse(ann) if not isinstance(ann, ast.Name) else ann.id
        words = set(re.findall(r"[A-Za-z_]+", text))
        if words & _NON_DIFF_TENSOR_TYPES and not words & {"Tensor", "FloatTensor", "Module"}:
            return NOTHING  # mask: torch.BoolTensor, ids: LongTensor, device: torch.device
        if non_tensor_annotation(ann):
            return NOTHING
    if isinstance(default, ast.Constant) and default.value is not None:
        return NOTHING
    if isinstance(default, (ast.Tuple, ast.List, ast.Dict, ast.Lambda)):
        return NOTHING
    return Value(ARG, f"argument '{arg.arg}'")


_ANNOTATION_WRAPPERS = frozenset("Optional None Union typing List list Tuple tuple Sequence Dict".split())


_SCALAR_ANNOTATIONS = frozenset("int float bool str bytes complex None Optional Union typing".split())


def non_tensor_annotation(ann: ast.AST, scalars: bool = False) -> bool:
    """An annotation naming only non-tensor types (``int``, ``str | None``, ``list[int]``);
    ``scalars``: only scalars and None (a function's result: ``-> dict`` may hold losses)."""
    text = ast.unparse(ann) if not isinstance(ann, ast.Name) else ann.id
    words = set(re.findall(r"[A-Za-z_]+", text))
    allowed = _SCALAR_ANNOTATIONS if scalars else _NON_TENSOR_ANNOTATIONS | _ANNOTATION_WRAPPERS
    return bool(words) and words <= allowed and "Tensor" not in text


def tensor_annotation(annotation: ast.AST | None) -> bool:
    """No annotation, or one that names tensors (``Tensor``, ``Optional[Tensor]``,
    ``Sequence[Tensor]``, ``Any``): a metric's input may be a model output.  ``generator:
    GeneratorType`` (a module) is not."""
    if annotation is None:
        return True
    words = set(re.findall(r"\w+", ast.unparse(annotation)))
    return "Any" in words or any("Tensor" in w for w in words)


def int_dtype(node: ast.AST) -> bool:
    """``torch.long`` / ``torch.bool`` (the table's integral dtypes), or a legacy type string
    (``"torch.LongTensor"``): a result of that dtype has no grad_fn."""
    from .torch_facts import integral_dtype

    if isinstance(node, ast.Attribute):
        return integral_dtype(f"torch.{node.attr}")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return integral_dtype(f"torch.{node.value.split('.')[-1]}") or "Long" in node.value or "Int" in node.value
    return False


def is_torch_name(qualname: str) -> bool:
    """``torch`` or ``torch.<...>``, not ``torch_geometric`` nor ``torchmetrics``."""
    return qualname == "torch" or qualname.startswith("torch.")


# Standard-library namespaces whose calls never return autograd history (weak references,
# floats, strings, logging, the OS); ``operator`` and ``functools.reduce`` may compute, so they
# are not here.
STDLIB_NO_HISTORY = ("weakref.", "math.", "logging.", "warnings.", "os.", "sys.", "time.", "json.", "re.",
                     "inspect.", "typing.", "string.", "random.", "datetime.", "pathlib.", "socket.")
