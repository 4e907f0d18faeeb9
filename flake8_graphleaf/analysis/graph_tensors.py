"""The one place that decides what a "graph tensor" is.

A value *may carry a grad_fn* when it is computed, with grad mode on, from a
submodule call, from a parameter, from a ``forward`` argument, or from torch
operations on any of those.  Every rule asks :class:`Evaluator` about an
expression and gets back a :class:`Value`:

========  ==================================================================
NONE      no autograd history: constants, shapes, ``.detach()``, integer and
          boolean results, fresh factories, anything computed under no_grad
MODULE    a module (calling it gives a graph tensor), or something fetched with
          ``getattr(module, name)`` that may be a module or a parameter
LEAF      a parameter: requires grad but is a leaf (storing it is fine,
          computing with it is not)
ARG       a ``forward`` argument or a value passed in: may be a graph tensor
GRAPH     computed, with grad on, from any of the above: carries a grad_fn
========  ==================================================================

Kinds are ordered; a container or a join of paths takes the largest kind.
"""

from __future__ import annotations

import ast
import re
from typing import Callable

from .imports import ImportMap

NONE, MODULE, LEAF, ARG, GRAPH = range(5)
KIND_NAMES = {NONE: "none", MODULE: "module", LEAF: "leaf", ARG: "arg", GRAPH: "graph"}


class Value:
    """``items``: for a tuple of known length (``return out, acc``), the value of each element,
    so that ``loss, acc = self.step(x)`` binds each name to what it really holds."""

    __slots__ = ("kind", "origin", "items")

    def __init__(self, kind: int, origin: str = "", items: "tuple[Value, ...] | None" = None):
        self.kind = kind
        self.origin = origin
        self.items = items

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Value({KIND_NAMES[self.kind]}, {self.origin!r})"

    @property
    def is_graph(self) -> bool:
        return self.kind == GRAPH

    @property
    def may_be_graph(self) -> bool:
        return self.kind >= ARG

    @property
    def tensorish(self) -> bool:
        """Computing with this value, with grad on, gives a graph tensor."""
        return self.kind >= MODULE


NOTHING = Value(NONE)


def join(*values: Value) -> Value:
    best = NOTHING
    for v in values:
        if v.kind > best.kind:
            best = v
    if best.items is not None:
        return Value(best.kind, best.origin)  # a join of paths forgets the tuple's shape
    return best


def join_tuples(a: Value, b: Value) -> Value:
    """The join of two paths' results that keeps a tuple's shape when both have the same one."""
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join_tuples(x, y) for x, y in zip(a.items, b.items))
        whole = join(*items)
        return Value(whole.kind, whole.origin, items)
    return join(a, b)


# --- tensor methods and attributes whose result has no autograd history -----------
NON_DIFF_METHODS = frozenset(
    """detach detach_ item tolist numpy size dim ndimension numel nelement element_size
    stride storage_offset data_ptr is_contiguous is_floating_point is_complex is_signed
    get_device long int short bool byte char argmax argmin argsort eq ne lt le gt ge
    greater less greater_equal less_equal not_equal equal allclose isclose isnan isinf
    isfinite isneginf isposinf isreal nonzero nonzero_static any all logical_and
    logical_or logical_not logical_xor count_nonzero new_zeros new_ones new_empty
    new_full new_tensor bincount histc register_hook
    retain_grad backward untyped_storage storage data_ptr tobytes __len__ keys
    """.split()
)
NON_DIFF_ATTRS = frozenset(
    """data shape dtype device ndim grad requires_grad is_leaf grad_fn is_cuda is_sparse
    is_quantized is_meta layout names indices output_nr _version itemsize nbytes training
    """.split()
)
# Methods that read a container without computing: they keep what it holds.
CONTAINER_READS = frozenset("get pop popitem popleft values items copy __getitem__ setdefault".split())
# Tensor methods whose tensor arguments give only a dtype, device or shape.
SHAPE_ONLY_ARGS = frozenset("type_as expand_as view_as reshape_as new_empty new_zeros new_ones".split())
INT_DTYPES = frozenset(
    """long int64 int int32 int16 short int8 uint8 uint16 uint32 uint64 bool""".split()
)

# torch.<name> functions that never return a graph tensor.
NON_DIFF_TORCH = frozenset(
    """argmax argmin argsort randint randint_like randperm multinomial bucketize
    searchsorted nonzero isnan isinf isfinite isneginf isposinf eq ne lt le gt ge greater
    less equal allclose isclose logical_and logical_or logical_not logical_xor
    count_nonzero zeros ones empty full rand randn arange range linspace logspace eye
    tensor zeros_like ones_like empty_like full_like rand_like randn_like is_tensor
    is_grad_enabled numel bincount histc tril_indices
    triu_indices get_default_dtype manual_seed no_grad inference_mode enable_grad
    set_grad_enabled device Size Generator finfo iinfo from_numpy empty_strided
    is_floating_point is_complex result_type promote_types can_cast get_rng_state
    is_inference_mode_enabled""".split()
)
NON_DIFF_QUALNAMES = frozenset(
    {
        "torch.nn.functional.one_hot",
        "torch.autograd.grad",
    }
)
# torch namespaces whose calls never return a graph tensor (devices, hooks, profilers ...).
NON_COMPUTING_NAMESPACES = (
    "torch.cuda.", "torch.distributed.", "torch.backends.", "torch.jit.", "torch.autograd.graph.",
    "torch.autograd.profiler.", "torch.profiler.", "torch.utils.hooks.", "torch.utils.data.",
    "torch.testing.", "torch.fx.", "torch.onnx.", "torch.compiler.", "torch._dynamo.", "torch.overrides.",
)
PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
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

# nn.Module API reached through a module value.
MODULE_API_LEAVES = frozenset("parameters named_parameters get_parameter".split())
MODULE_API_MODULES = frozenset(
    """children named_children modules named_modules get_submodule to cuda cpu eval train
    float half double bfloat16 requires_grad_ apply type share_memory to_empty""".split()
)
MODULE_API_NONE = frozenset(
    """state_dict buffers named_buffers get_buffer register_buffer register_parameter
    register_module add_module register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_backward_hook register_full_backward_pre_hook
    zero_grad extra_repr load_state_dict""".split()
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
        if words and words <= (_NON_TENSOR_ANNOTATIONS | {"Optional", "None", "Union", "typing", "List", "list", "Tuple", "tuple", "Sequence", "Dict"}) and "Tensor" not in text:
            return NOTHING
    if isinstance(default, ast.Constant) and default.value is not None:
        return NOTHING
    if isinstance(default, (ast.Tuple, ast.List, ast.Dict, ast.Lambda)):
        return NOTHING
    return Value(ARG, f"argument '{arg.arg}'")


def short(node: ast.AST) -> str:
    """A short source-like description of an expression, for messages."""
    if isinstance(node, ast.Call):
        return f"{short(node.func)}(...)"
    if isinstance(node, ast.Attribute):
        return f"{short(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        return f"{short(node.value)}[...]"
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def int_dtype(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in INT_DTYPES
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1] in INT_DTYPES or "Long" in node.value or "Int" in node.value
    return False


class ClassFacts:
    """What a rule needs to know about the class a method belongs to."""

    def __init__(self) -> None:
        self.name = ""
        self.is_module = False
        self.params: set[str] = set()
        self.buffers: set[str] = set()
        self.submodules: set[str] = set()
        self.functional: set[str] = set()  # attributes holding plain callables
        self.plain: set[str] = set()  # attributes assigned other known non-tensor values
        self.methods: dict[str, ast.FunctionDef] = {}
        self.submodule_classes: dict[str, tuple[str, int]] = {}  # attr -> (class name, line)
        self.submodule_ctors: dict[str, str] = {}  # attr -> torch.nn class it was built from
        self.assigned: set[str] = set()  # every self.X this class assigns somewhere
        self.bases: list[str] = []  # qualified names of the bases defined in other files


# A call back for ``self.method(...)``: given the method name, the argument values and
# grad mode, return the value the method returns (or None if unknown).
MethodCallback = Callable[[str, list, dict, bool], "Value | None"]


class Evaluator:
    """Evaluates expressions of one function body against an environment of names."""

    def __init__(
        self,
        imports: ImportMap,
        facts: ClassFacts | None,
        self_name: str | None,
        module_classes: set[str],
        on_method: MethodCallback | None = None,
    ):
        self.imports = imports
        self.facts = facts
        self.self_name = self_name
        self.module_classes = module_classes
        self.on_method = on_method
        # Observer of calls with a known qualified name (deepcopy, AveragedModel ...).
        self.on_call: Callable | None = None
        self.env: dict[str, Value] = {}
        self.self_attrs: dict[str, Value] = {}  # self.X assigned earlier in this body
        self.containers: set[str] = set()  # local names bound to list / dict / tuple displays
        self.grad = True
        self.building = False  # construction: calling a module-like name builds a module
        self.depth = 0  # how deep in other functions' bodies (project_view.function_effect) we are
        # Origins of argument values that reach a learnable computation (a submodule call, an op
        # with a parameter): such an argument is an activation, on the graph whenever the caller's
        # is.  Shared by the runs of one class (ClassRunner); None: not recorded.
        self.fed: set[str] | None = None
        # Observer of module calls: (callee origin, positional values, keyword values, grad).
        self.on_module_call: Callable | None = None

    # -- helpers ------------------------------------------------------------------
    def feed(self, *values: Value) -> None:
        """``values`` go into a learnable computation: remember the arguments among them."""
        if self.fed is not None:
            for v in values:
                if v.kind == ARG:
                    self.fed.add(v.origin)

    def module_call(self, origin: str, pos: list[Value], kw: dict[str, Value]) -> Value:
        """The result of calling a module (``origin``: ``self.norm``, ``self.blocks[...]``) or
        something computed from parameters with these arguments."""
        if self.on_module_call is not None:
            self.on_module_call(origin, pos, kw, self.grad)
        if not self.grad:
            return NOTHING
        self.feed(*pos, *kw.values())
        return Value(GRAPH, origin)

    def computed(self, origin: Value, *operands: Value) -> Value:
        """Result of a differentiable computation on ``operands``."""
        if not self.grad:
            return NOTHING
        # An operation on a parameter or on a graph tensor carries a grad_fn; one on
        # arguments only does when the caller passes a graph tensor.
        certain = [v for v in (origin, *operands) if v.kind in (GRAPH, LEAF)]
        if self.fed is not None and any(v.kind == LEAF for v in certain):
            self.feed(origin, *operands)
        if certain:
            first = next((v for v in certain if v.kind == GRAPH), certain[0])
            return Value(GRAPH, first.origin)
        maybe = next((v for v in (origin, *operands) if v.kind == ARG), None)
        return Value(ARG, maybe.origin) if maybe is not None else NOTHING

    def is_self(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and self.self_name is not None and node.id == self.self_name

    def self_attr(self, attr: str) -> Value:
        if attr in self.self_attrs:
            return self.self_attrs[attr]
        f = self.facts
        if f is None:
            return NOTHING
        if attr in f.params:
            return Value(LEAF, f"parameter self.{attr}")
        if attr in f.submodules:
            return Value(MODULE, f"self.{attr}")
        if attr in f.buffers or attr in f.functional or attr in f.plain or attr in f.methods:
            return NOTHING
        if looks_like_parameter(attr) and f.is_module and attr not in f.assigned:
            return Value(LEAF, f"parameter self.{attr}")  # inherited, e.g. from nn.Linear
        return NOTHING

    # -- expressions --------------------------------------------------------------
    def eval(self, node: ast.AST | None) -> Value:
        if node is None:
            return NOTHING
        method = getattr(self, "eval_" + node.__class__.__name__, None)
        if method is None:
            return NOTHING
        return method(node)

    def eval_Constant(self, node: ast.Constant) -> Value:
        return NOTHING

    def eval_JoinedStr(self, node: ast.AST) -> Value:
        return NOTHING

    def eval_Lambda(self, node: ast.AST) -> Value:
        return NOTHING

    def eval_Compare(self, node: ast.Compare) -> Value:
        self.eval(node.left)
        for c in node.comparators:
            self.eval(c)
        return NOTHING

    def eval_Name(self, node: ast.Name) -> Value:
        v = self.env.get(node.id)
        if v is not None:
            return v
        if node.id == self.self_name:
            return Value(MODULE, "self") if self.facts is not None and self.facts.is_module else NOTHING
        return NOTHING

    def eval_Starred(self, node: ast.Starred) -> Value:
        return self.eval(node.value)

    def eval_NamedExpr(self, node: ast.NamedExpr) -> Value:
        v = self.eval(node.value)
        if isinstance(node.target, ast.Name):
            self.env[node.target.id] = v
        return v

    def eval_Await(self, node: ast.Await) -> Value:
        return self.eval(node.value)

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        self.eval(node.test)
        return join(self.eval(node.body), self.eval(node.orelse))

    def eval_BoolOp(self, node: ast.BoolOp) -> Value:
        return join(*[self.eval(v) for v in node.values])

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return NOTHING
        return self.computed(NOTHING, v)

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Add) and (
            isinstance(node.left, (ast.List, ast.Tuple)) or isinstance(node.right, (ast.List, ast.Tuple))
        ):
            return join(left, right)  # list concatenation keeps what the lists hold
        if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
            return NOTHING  # string formatting
        return self.computed(NOTHING, left, right)

    def _elements(self, elts) -> Value:
        return join(*[self.eval(e) for e in elts]) if elts else NOTHING

    def eval_List(self, node: ast.List) -> Value:
        return self._elements(node.elts)

    def eval_Tuple(self, node: ast.Tuple) -> Value:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return self._elements(node.elts)
        items = tuple(self.eval(e) for e in node.elts)
        whole = join(*items)
        return Value(whole.kind, whole.origin, items)

    eval_Set = eval_List

    def eval_Dict(self, node: ast.Dict) -> Value:
        for k in node.keys:
            self.eval(k)
        return self._elements(node.values)

    def _comprehension(self, node, elts) -> Value:
        saved = dict(self.env)
        for gen in node.generators:
            it = self.eval(gen.iter)
            self.bind_target(gen.target, it)
            for cond in gen.ifs:
                self.eval(cond)
        result = join(*[self.eval(e) for e in elts])
        self.env = saved
        return result

    def eval_ListComp(self, node: ast.ListComp) -> Value:
        return self._comprehension(node, [node.elt])

    eval_SetComp = eval_ListComp
    eval_GeneratorExp = eval_ListComp

    def eval_DictComp(self, node: ast.DictComp) -> Value:
        return self._comprehension(node, [node.key, node.value])

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        self.eval(node.slice)
        if base.items is not None and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            if -len(base.items) <= node.slice.value < len(base.items):
                return base.items[node.slice.value]
        if base.kind == MODULE:
            return base  # ModuleList / ModuleDict / Sequential indexing
        if base.kind == LEAF:
            return self.computed(base)  # a view of a parameter is not a leaf
        if not self.grad and base.kind == GRAPH:
            # A view taken under no_grad has no grad_fn; an element of a container would.
            return base if isinstance(node.value, ast.Name) and self._is_container_name(node.value.id) else NOTHING
        return base

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        attr = node.attr
        if self.is_self(node.value):
            return self.self_attr(attr)
        base = self.eval(node.value)
        if attr in NON_DIFF_ATTRS:
            return NOTHING
        if base.kind == MODULE:
            if looks_like_parameter(attr):
                return Value(LEAF, f"parameter {short(node)}")
            return Value(MODULE, short(node))
        if base.kind == LEAF:
            return self.computed(base)  # .T, .mT, .real ... of a parameter
        return base

    def _is_container_name(self, name: str) -> bool:
        return name in self.containers

    # -- calls --------------------------------------------------------------------
    def _args(self, node: ast.Call) -> tuple[list[Value], dict[str, Value]]:
        pos = [self._arg(a) for a in node.args]
        kw = {k.arg or "**": self._arg(k.value) for k in node.keywords}
        return pos, kw

    def _arg(self, node: ast.AST) -> Value:
        v = self.eval(node)
        # ``Adam(model.parameters())``, ``EMA(self.parameters())``: handing over the parameters
        # themselves is no computation; what is built from them holds leaves.
        if v.kind == LEAF and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MODULE_API_LEAVES and node.func.attr != "get_parameter":
                return NOTHING
        return v

    def eval_Call(self, node: ast.Call) -> Value:
        func = node.func
        pos, kw = self._args(node)
        if any(k.arg == "dtype" and int_dtype(k.value) for k in node.keywords):
            return NOTHING  # an integer or boolean result has no grad_fn
        if isinstance(func, ast.Attribute) and func.attr.startswith("register_"):
            return NOTHING  # hook handles, registrations
        everything = join(*pos, *kw.values())
        qual = self.imports.qualname(func)
        if qual is not None and self.on_call is not None:
            self.on_call(node, qual, pos, kw, self.grad)
        if qual is not None and (qual.startswith("torch") or qual.startswith("copy.")):
            return self._torch_call(node, qual, pos, kw, everything)
        if isinstance(func, ast.Name) and func.id not in self.env:
            known = self._project_call(node, func, qual, pos, kw)
            if known is not None:
                return known
            return self._name_call(node, func.id, pos, kw, everything)
        if isinstance(func, ast.Name):
            return self._name_call(node, func.id, pos, kw, everything)
        if isinstance(func, ast.Attribute):
            if qual is not None:
                known = self._project_call(node, func, qual, pos, kw)
                if known is not None:
                    return known
            return self._method_call(node, func, pos, kw, everything)
        callee = self.eval(func)
        if callee.kind == MODULE and self.building:
            return callee
        if callee.kind in (MODULE, LEAF):
            return self.module_call(f"{short(func)}(...)", pos, kw)
        return everything if self.grad else _containers_only(everything)

    def _project_call(self, node: ast.Call, func: ast.AST, qual: str | None, pos, kw) -> Value | None:
        """A call of a class or function the program defines (this file or another): a module
        class builds a module, another class an object holding its arguments, a function gives
        what its body gives (:func:`project_view.function_effect`).  None: not known."""
        from . import project_view as pv

        definition = None
        current = getattr(self.imports, "current", None)
        if isinstance(func, ast.Name) and current is not None and func.id in current.defs:
            definition = pv.Definition(current, current.defs[func.id])
        elif qual is not None:
            definition = pv.resolve(self.imports.project, qual)
        if definition is None:
            return None
        name = short(func)
        if isinstance(definition.node, ast.ClassDef):
            kind = pv.class_kind(self.imports.project, definition.qualname) if current is None or definition.module is not current else None
            if kind is None and definition.module is current and func.id in self.module_classes:
                kind = pv.MODULE_CLASS
            if kind == pv.MODULE_CLASS:
                return Value(MODULE, f"{name}(...)")
            if kind in (pv.OTHER_CLASS, pv.FOREIGN_FRAMEWORK):
                # an object: it holds what it was given (parameters it holds stay leaves), it computes nothing
                held = join(*pos, *kw.values())
                return held if held.kind in (GRAPH, ARG) else NOTHING
            return None
        if self.depth > 2:
            return None
        effect_of = getattr(self.imports, "effect_of", None)
        effect = effect_of(definition, self.depth) if effect_of is not None else None
        if effect is None:
            return None
        if effect.graph:
            return self.module_call(f"{name}(...)", pos, kw)
        if effect.leaf:
            return Value(LEAF, f"{name}(...)")
        def passed_by(names: tuple[str, ...]) -> Value:
            passed = [v for p, v in zip(effect.params, pos) if p in names] + [v for k, v in kw.items() if k in names]
            if len(pos) > len(effect.params) and any(p not in effect.params + effect.keyword_only for p in names):
                passed += pos[len(effect.params):]  # *args
            if any(v.kind == LEAF for v in passed):
                self.feed(*passed)  # complex_bn(x, self.weight, ...): the argument meets a parameter
            result = join(*passed) if passed else NOTHING
            if result.kind == GRAPH or result.kind == LEAF:
                result = Value(GRAPH, result.origin) if self.grad else _containers_only(result)
            return result

        if effect.items is not None:
            items = tuple(passed_by(names) for names in effect.items)
            whole = join(*items)
            return Value(whole.kind, whole.origin, items)
        return passed_by(effect.passes)

    def _torch_call(self, node, qual, pos, kw, everything) -> Value:
        name = qual.rsplit(".", 1)[-1]
        if qual in PARAMETER_CTORS:
            return Value(LEAF, "nn.Parameter(...)")
        if qual in BUFFER_CTORS:
            return NOTHING
        if qual == "torch.autograd.grad" and _is_true(node, "create_graph"):
            # gradients built with create_graph=True are on the graph (a gradient penalty)
            return self.module_call("torch.autograd.grad(..., create_graph=True)", pos, kw)
        if qual in NON_DIFF_QUALNAMES or qual.startswith("copy."):
            return NOTHING
        if qual.startswith(NON_COMPUTING_NAMESPACES):
            return NOTHING
        if qual.count(".") == 1 and name in NON_DIFF_TORCH:
            rg = kw.get("requires_grad")
            if rg is not None and _is_true(node, "requires_grad"):
                return Value(LEAF, f"{qual}(..., requires_grad=True)")
            return NOTHING
        if name == "where" and len(node.args) == 1 and not node.keywords:
            return NOTHING
        if qual.startswith("torch.nn.") and name[:1].isupper():
            if qual.startswith("torch.nn.functional."):
                return self.computed(NOTHING, everything)
            return Value(MODULE, f"{name}(...)")
        if name == "checkpoint" or qual.startswith("torch.utils.checkpoint"):
            return self.module_call(f"{qual}(...)", pos, kw) if everything.kind >= MODULE else NOTHING
        if qual.startswith(("torch.optim.", "torch.distributions.constraints")):
            return NOTHING  # optimizers and schedulers hold parameters, they compute nothing
        if qual in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
            return NOTHING
        return self.computed(NOTHING, everything)

    def _name_call(self, node, name, pos, kw, everything) -> Value:
        if name == self.self_name and self.facts is not None and self.facts.is_module:
            return self._self_call(node, "forward", pos, kw, everything)
        local = self.env.get(name)
        if local is not None:
            if local.kind == MODULE and self.building:
                return local  # a module class or factory called while building
            if local.kind in (MODULE, LEAF, GRAPH):
                return self.module_call(f"{name}(...)", pos, kw)
            return everything if self.grad else _containers_only(everything)
        if name in NON_DIFF_BUILTINS:
            return NOTHING
        if name in PARAMETER_NAMES:
            return Value(LEAF, "nn.Parameter(...)")
        if name == "getattr" and node.args:
            target = pos[0]
            if self.is_self(node.args[0]) and len(node.args) > 1:
                lit = node.args[1]
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str):
                    return self.self_attr(lit.value)
                return Value(LEAF, short(node)) if self.facts and self.facts.is_module else NOTHING
            if target.kind == MODULE:
                lit = node.args[1] if len(node.args) > 1 else None
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str) and not looks_like_parameter(lit.value):
                    return Value(MODULE, short(node))
                # a submodule or a parameter: calling it or computing with it both give a graph tensor
                return Value(LEAF, short(node))
            return target
        if name in PASSING_BUILTINS:
            if name in ("list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "enumerate", "zip", "iter", "next", "map", "filter"):
                return everything
            return self.computed(NOTHING, everything) if everything.kind > MODULE else NOTHING
        if name in self.module_classes:
            return Value(MODULE, f"{name}(...)")
        return everything if self.grad else _containers_only(everything)

    def _method_call(self, node, func: ast.Attribute, pos, kw, everything) -> Value:
        meth = func.attr
        recv_node = func.value
        # super().forward(...)
        if isinstance(recv_node, ast.Call) and isinstance(recv_node.func, ast.Name) and recv_node.func.id == "super":
            if meth in ("forward", "__call__"):
                return self.module_call("super().forward(...)", pos, kw)
            if meth == "__init__":
                return NOTHING
            return everything if self.grad else _containers_only(everything)
        if self.is_self(recv_node):
            return self._self_call(node, meth, pos, kw, everything)
        recv = self.eval(recv_node)
        if meth in NON_DIFF_METHODS and meth not in MODULE_API_MODULES:
            return NOTHING
        if recv.kind == MODULE:
            if meth in MODULE_API_LEAVES:
                return Value(LEAF, f"{short(func)}()")
            if meth in MODULE_API_MODULES:
                return recv
            if meth in MODULE_API_NONE:
                return NOTHING
            if looks_like_parameter(meth):
                return NOTHING
            if meth in ("forward", "__call__") or not _METHOD_NAME_RE.match(meth):
                # `self.encoder.layer1(x)`: a submodule (modules are named as nouns)
                if everything.kind >= LEAF or (recv.origin.startswith("self.") and not self.building and node.args):
                    return self.module_call(f"{short(func)}(...)", pos, kw)
                return recv  # model.module, model.backbone: another module
            # `model.init_hidden(n)`, `self.sub.prepare(x)`: a method of a class we cannot see;
            # what it returns is unknown, and unknown is not reported.
            if not node.args and not node.keywords and meth.startswith(("get_", "_get_")):
                return recv
            return NOTHING
        if isinstance(recv_node, (ast.Constant, ast.JoinedStr)):
            return NOTHING
        if meth in CONTAINER_READS and recv.kind != LEAF:
            return recv
        if meth in NON_DIFF_METHODS:
            return NOTHING
        if meth in SHAPE_ONLY_ARGS:
            return self.computed(recv)  # the argument gives only a dtype, device or shape
        if meth in ("to", "type") and (
            any(int_dtype(a) for a in node.args) or any(k.arg == "dtype" and int_dtype(k.value) for k in node.keywords)
        ):
            return NOTHING
        if meth == "type" and not node.args and not node.keywords:
            return NOTHING
        if meth == "requires_grad_":
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is False:
                return NOTHING if recv.kind < GRAPH else recv
            return Value(LEAF, short(node)) if recv.kind < GRAPH else recv
        if meth in ("append", "extend", "insert", "update", "add", "clear", "remove", "reverse"):
            return NOTHING  # returns None; the statement walker records the mutation
        if recv.kind >= MODULE or everything.kind >= MODULE:
            return self.computed(recv, everything)
        return NOTHING

    def _self_call(self, node, meth, pos, kw, everything) -> Value:
        facts = self.facts
        if facts is not None and meth in facts.methods:
            if meth in ("forward", "__call__"):
                result = self.on_method(meth, pos, kw, self.grad) if self.on_method else None
                return result if result is not None else (Value(GRAPH, "self(...)") if self.grad else NOTHING)
            if self.on_method is not None:
                result = self.on_method(meth, pos, kw, self.grad)
                if result is not None:
                    return result
            return everything if self.grad else _containers_only(everything)
        if meth in MODULE_API_LEAVES:
            return Value(LEAF, f"self.{meth}()")
        if meth in MODULE_API_MODULES or meth in MODULE_API_NONE:
            return NOTHING
        if facts is not None and (meth in facts.functional or meth in facts.plain):
            return self.computed(NOTHING, everything)
        if facts is not None and (meth in facts.submodules or self.self_attrs.get(meth, NOTHING).kind == MODULE):
            return self.module_call(f"self.{meth}(...)", pos, kw)
        if meth in ("forward", "__call__") and facts is not None and facts.is_module:
            return Value(GRAPH, "self(...)") if self.grad else NOTHING
        # Unknown (inherited) attribute: a submodule or a helper method; judge by the args.
        if facts is not None and facts.is_module and not _METHOD_NAME_RE.match(meth):
            from .project_view import defines_method

            if not defines_method(self.imports.project, facts.bases, meth):
                self.feed(*pos, *kw.values())  # named as a noun, and no base defines it: a submodule
        return self.computed(NOTHING, everything) if everything.kind >= MODULE else NOTHING

    # -- binding ------------------------------------------------------------------
    def bind_target(self, target: ast.AST, value: Value) -> None:
        """Bind local names in an assignment target (stores on objects are the walker's)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind_target(elt, value)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, value)


def _containers_only(value: Value) -> Value:
    """Under no_grad nothing new gets a grad_fn, but passing a graph tensor along keeps it."""
    return value if value.kind == GRAPH else NOTHING


def _is_true(node: ast.Call, keyword: str) -> bool:
    for k in node.keywords:
        if k.arg == keyword:
            return not (isinstance(k.value, ast.Constant) and not k.value.value)
    return False
