"""Which classes of a file are ``nn.Module``s, and what their attributes hold."""

from __future__ import annotations

import ast

from .given_models import given_in_init
from ..facts.torch_names import looks_like_module_name
from .imports import ImportMap
from .project_view import FOREIGN_FRAMEWORK, MODULE_CLASS, NON_TORCH_FRAMEWORKS, OTHER_CLASS, class_kind, resolve
from .summaries import factories_of
from .stmtwalk import statements, tree_statements
from ..facts.torch_names import is_torch_name

# Bases of other libraries that are nn.Module subclasses (matched on the last name).
DEFAULT_MODULE_BASES = frozenset(
    {"LightningModule", "PreTrainedModel", "ModelMixin", "HyperparametersMixin"}
)
_NOT_MODULE_BASES = frozenset(
    """object ABC Generic Protocol Enum IntEnum Exception BaseException NamedTuple TypedDict
    dict list tuple set str int float type Function InplaceFunction Dataset IterableDataset
    Sampler Optimizer LRScheduler _LRScheduler Callback Thread""".split()
)
_STDLIB = frozenset(
    """collections typing threading dataclasses weakref types enum queue contextlib functools itertools
    logging pathlib abc re os sys time datetime random math numpy np""".split()
)
_STDLIB_CLASSES = frozenset("OrderedDict defaultdict deque Counter ChainMap SimpleNamespace Lock RLock Event".split())
_AUTOGRAD_FUNCTION = ("torch.autograd.Function", "torch.autograd.function.Function")



class ClassFacts:
    """What a rule needs to know about the class a method belongs to."""

    def __init__(self) -> None:
        self.name = ""
        self.is_module = False
        self.params: set[str] = set()
        # parameters made with requires_grad=False (``nn.Parameter(k, requires_grad=False)``, or
        # ``self.k.requires_grad = False`` / ``requires_grad_(False)``) that no method of the class
        # turns on again: registered, but what is computed from them is not on the graph
        self.frozen: set[str] = set()
        # submodules whose parameters the class turns off (``self.backbone.requires_grad_(False)``,
        # ``for p in self.backbone.parameters(): p.requires_grad = False``) and no method turns on
        # again: calling one is not a grad source (what it computes carries its inputs' history only)
        self.frozen_modules: set[str] = set()
        self.buffers: set[str] = set()
        # the constant start of names registered by computed name (``register_buffer(f'biases_{i}', ...)``):
        # prefix -> 'buffer' or 'parameter' (both, when the class registers both under it)
        self.registered_prefixes: dict[str, str] = {}
        # the computed names themselves, as written (``name + "_raw"``): ast.dump -> the same kinds
        self.registered_names: dict[str, str] = {}
        self.submodules: set[str] = set()
        self.functional: set[str] = set()  # attributes holding plain callables
        self.plain: set[str] = set()  # attributes assigned other known non-tensor values
        self.sets: set[str] = set()  # attributes assigned a set (``set()``, ``{a, b}``): what ``.add`` fills
        self.methods: dict[str, ast.FunctionDef] = {}
        self.submodule_classes: dict[str, tuple[str, int]] = {}  # attr -> (class name, line)
        self.submodule_ctors: dict[str, str] = {}  # attr -> torch.nn class it was built from
        self.assigned: set[str] = set()  # every self.X this class assigns somewhere
        self.bases: list[str] = []  # qualified names of the ancestors defined in other files (through this file's bases too)
        # attr -> qualified names of the program's non-module classes whose objects it may hold
        # (``self.action_dist = make_proba_distribution(...)``): helper state objects, which
        # deepcopy of the module copies with it
        self.helpers: dict[str, tuple[str, ...]] = {}
        # attr -> qualified names of the program's module classes it holds (its forward's
        # results, element by element: forward_results)
        self.submodule_quals: dict[str, tuple[str, ...]] = {}
        self.injected: set[str] = set()  # attributes set in __init__ from an argument (self.model = model)
        self.given_models: set[str] = set()  # those of them that hold models (given_models)
        # attr -> the self attributes a wrapper built in __init__ was given, set by a base in
        # another file (helper_objects.settle_given settles them)
        self.wraps: dict[str, set[str]] = {}
        self.binds_own_copy: bool | None = None  # helper_objects.binds_own_copy, once asked
        # attributes some method binds to a function of the program (``self._build_nn =
        # build_mlp``, a def of the method or of the file): callables, whatever else is assigned
        self.callables: set[str] = set()
        # attributes bound to the object's own methods (``self.state_function = self._base_sub``,
        # one per branch): calling ``self.state_function(x)`` runs those methods
        self.bound_methods: dict[str, set[str]] = {}
        self.given_settled = False
        # attr -> the literal it holds whenever training runs forward (flags.settled), once settled
        self.flags = None  # a flags.Settled


class ClassInfo:
    def __init__(self, node: ast.ClassDef):
        self.node = node
        self.facts = ClassFacts()
        self.facts.name = node.name
        self.bases: list[str] = []  # qualified or plain names
        self.local_bases: list[str] = []  # bases defined in this file
        self.base_infos: list["ClassInfo"] = []  # their ClassInfo, for super().method(...)
        self.is_lightning = False
        # A torchmetrics Metric: an nn.Module whose forward calls update(preds, target) with
        # what the model produced (its arguments are the model's outputs).
        self.is_metric = False


def _base_name(base: ast.AST, imports: ImportMap) -> str:
    if isinstance(base, ast.Subscript):  # Generic[T], nn.Module[...]
        base = base.value
    qual = imports.qualname(base)
    if qual:
        return qual
    try:
        return ast.unparse(base)
    except Exception:  # pragma: no cover - ast.unparse handles every expression
        return ""


def collect_classes(tree: ast.AST, imports: ImportMap, extra_bases: frozenset[str] = frozenset()) -> dict[str, ClassInfo]:
    classes: dict[str, ClassInfo] = {}
    for node in tree_statements(tree):
        if isinstance(node, ast.ClassDef):
            info = ClassInfo(node)
            info.bases = [_base_name(b, imports) for b in node.bases]
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.facts.methods[stmt.name] = stmt
            classes.setdefault(node.name, info)
    names = set(classes)
    for info in classes.values():
        info.local_bases = [b for b in info.bases if b in names]
        info.base_infos = [classes[b] for b in info.local_bases if classes[b] is not info]
        info.facts.bases = [b for b in info.bases if b not in names and "." in b]

    wanted = DEFAULT_MODULE_BASES | extra_bases

    def direct_module(info: ClassInfo) -> bool:
        for b in info.bases:
            last = b.rsplit(".", 1)[-1]
            if b in _AUTOGRAD_FUNCTION or b.startswith("torch.jit."):
                # autograd Functions are not modules; ScriptModules define their own __deepcopy__
                return False
            if b in wanted or last in wanted:
                if last == "LightningModule":
                    info.is_lightning = True
                return True
            if b.startswith("torch.nn.") and last[:1].isupper() and not b.startswith("torch.nn.utils"):
                return True
            if b.startswith(("lightning", "pytorch_lightning")) and last.endswith("Module"):
                info.is_lightning = True
                return True
        return False

    resolved_not_module: set[str] = set()
    for info in classes.values():
        info.facts.is_module = direct_module(info)
        if any(_is_metric_base(b) for b in info.bases) or (
            (imports.module or "").startswith("torchmetrics") and info.node.name == "Metric"
        ):
            info.is_metric = info.facts.is_module = True
        if info.facts.is_module or imports.project is None:
            continue
        # Bases from other files of the program: follow them (nn.Module lineage only).
        kinds = [class_kind(imports.project, b) for b in info.bases if b not in names]
        if MODULE_CLASS in kinds:
            info.facts.is_module = True
            info.is_lightning = info.is_lightning or any(
                "lightning" in b.split(".")[0] for b in info.bases
            )
        elif kinds and all(k in (OTHER_CLASS, FOREIGN_FRAMEWORK) for k in kinds):
            resolved_not_module.add(info.node.name)
    changed = True
    while changed:  # modules through bases defined in this file
        changed = False
        for info in classes.values():
            if info.facts.is_module:
                continue
            for b in info.local_bases:
                base = classes[b]
                if base.facts.is_module:
                    info.facts.is_module = True
                    info.is_lightning = info.is_lightning or base.is_lightning
                    info.is_metric = info.is_metric or base.is_metric
                    changed = True
    for info in classes.values():
        if info.facts.is_module or not info.bases or info.node.name in resolved_not_module:
            continue
        if any(b.split(".")[0] in NON_TORCH_FRAMEWORKS for b in info.bases):
            continue  # chainer's Chain has a forward too
        # A class with an instance ``forward`` whose bases come from elsewhere (say
        # transformers' GradientCheckpointingLayer) is a module in practice.
        fwd = info.facts.methods.get("forward")
        if fwd is None or any(_decorator_name(d) == "staticmethod" for d in fwd.decorator_list):
            continue
        foreign = [b for b in info.bases if b not in names]
        if any(b.startswith("torch.jit.") for b in info.bases):
            continue  # ScriptModules define their own __deepcopy__
        if foreign and all(b.rsplit(".", 1)[-1] not in _NOT_MODULE_BASES for b in info.bases):
            if not any(b.endswith(("Function", "Dataset")) for b in info.bases):
                info.facts.is_module = True

    module_classes = {n for n, c in classes.items() if c.facts.is_module}
    for info in _base_first(classes):
        _collect_attributes(info, classes, imports, module_classes)
        if info.facts.callables:  # a builder function the class calls, not a submodule
            info.facts.submodules -= info.facts.callables
            info.facts.functional |= info.facts.callables
    return classes


def _is_metric_base(qualname: str) -> bool:
    return qualname.startswith("torchmetrics.") and qualname.rsplit(".", 1)[-1][:1].isupper()


def _base_first(classes: dict[str, ClassInfo]) -> list[ClassInfo]:
    order: list[ClassInfo] = []
    seen: set[str] = set()

    for name in classes:
        _visit(classes, name, seen, order, 0)
    return order


def _visit(classes: dict, name: str, seen: set, order: list, depth: int) -> None:
    # a module-level function: a recursive closure is a reference cycle that holds the classes
    if name in seen or depth > 50:
        return
    seen.add(name)
    for b in classes[name].local_bases:
        _visit(classes, b, seen, order, depth + 1)
    order.append(classes[name])


def _decorator_name(dec: ast.AST) -> str:
    if isinstance(dec, ast.Call):
        dec = dec.func
    if isinstance(dec, ast.Attribute):
        return dec.attr
    if isinstance(dec, ast.Name):
        return dec.id
    return ""


def _callee_last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _collect_attributes(info: ClassInfo, classes: dict[str, ClassInfo], imports: ImportMap,
                        module_classes: set[str] | None = None) -> None:
    f = info.facts
    for b in info.local_bases:
        base = classes[b].facts
        f.params |= base.params
        f.frozen |= base.frozen
        for k, v in base.registered_prefixes.items():
            f.registered_prefixes.setdefault(k, v)
        for k, v in base.registered_names.items():
            f.registered_names.setdefault(k, v)
        f.buffers |= base.buffers
        f.submodules |= base.submodules
        f.functional |= base.functional
        f.plain |= base.plain
        f.sets |= base.sets
        f.assigned |= base.assigned
        for k, v in base.methods.items():
            f.methods.setdefault(k, v)
        for k, v in base.submodule_classes.items():
            f.submodule_classes.setdefault(k, v)
        for k, q in base.submodule_ctors.items():
            f.submodule_ctors.setdefault(k, q)
        for k, q in base.helpers.items():
            f.helpers.setdefault(k, q)
        for k, q in base.submodule_quals.items():
            f.submodule_quals.setdefault(k, q)
        f.injected |= base.injected
        f.given_models |= base.given_models
        f.callables |= base.callables
        for k, q in base.bound_methods.items():
            f.bound_methods.setdefault(k, set()).update(q)
        f.bases += [q for q in base.bases if q not in f.bases]  # ancestors in other files, through this file's bases
        for k, q in base.wraps.items():
            f.wraps.setdefault(k, set()).update(q)
    if module_classes is None:
        module_classes = {n for n, c in classes.items() if c.facts.is_module}
    frozen_off: set[str] = set()  # self.k.requires_grad = False / requires_grad_(False) somewhere
    frozen_on: set[str] = set()  # ... = True, requires_grad_(), or a flag not known
    modules_off: set[str] = set()  # submodules __init__ always freezes (its own statements)
    for method in info.node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        self_name = method.args.args[0].arg
        init_args = {a.arg for a in method.args.args[1:] + method.args.kwonlyargs}
        made_here: dict[str, set[str]] | None = None  # __init__'s locals bound to new modules, when asked
        nested: set[str] | None = None  # the functions the method defines, when asked
        if method.name == "__init__":
            models, wraps = given_in_init(method, self_name, init_args, f.given_models, info.bases, imports.qualname)
            f.given_models |= models
            f.injected |= models
            for k, q in wraps.items():
                f.wraps.setdefault(k, set()).update(q)
        for stmt in statements(method):
            node = stmt.value if isinstance(stmt, ast.Expr) else stmt
            # a submodule is frozen only by what __init__ always runs (a statement of its own
            # body, not under an `if not learn_recurrent:`); turned on anywhere, it is not
            always = method.name == "__init__" and stmt in method.body
            looped = _parameters_loop_flag(node, self_name)
            if looped is not None:
                (modules_off if looped[1] and always else frozen_on if not looped[1] else set()).add(looped[0])
            flag = _requires_grad_set(node, self_name)
            if flag is not None:
                (frozen_off if flag[1] else frozen_on).add(flag[0])
                if flag[1] and always:
                    modules_off.add(flag[0])
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                recv = node.func.value
                if isinstance(recv, ast.Name) and recv.id == self_name and node.args:
                    first = node.args[0]
                    prefix = _constant_prefix(first)
                    if prefix and node.func.attr in ("register_buffer", "register_parameter"):
                        kind = "buffer" if node.func.attr == "register_buffer" else "parameter"
                        if f.registered_prefixes.setdefault(prefix, kind) != kind:
                            f.registered_prefixes[prefix] = "both"
                    if not isinstance(first, ast.Constant) and node.func.attr in ("register_buffer", "register_parameter"):
                        kind = "buffer" if node.func.attr == "register_buffer" else "parameter"
                        written = ast.dump(first)
                        if f.registered_names.setdefault(written, kind) != kind:
                            f.registered_names[written] = "both"
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        if node.func.attr == "register_buffer":
                            f.buffers.add(first.value)
                        elif node.func.attr == "register_parameter":
                            value = node.args[1] if len(node.args) > 1 else None
                            if not (isinstance(value, ast.Constant) and value.value is None):
                                f.params.add(first.value)  # register_parameter(name, None) makes none
                        elif node.func.attr in ("add_module", "register_module"):
                            f.submodules.add(first.value)
                continue
            targets: list[ast.AST] = []
            value = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == self_name:
                    f.assigned.add(t.attr)
                    _classify(f, t.attr, value, imports, module_classes, init_args, node.lineno)
                    if isinstance(value, ast.Name) and nested is None:
                        nested = _nested_defs(method)
                    if isinstance(value, ast.Name) and _names_function(value.id, nested, imports):
                        f.callables.add(t.attr)  # self._build_nn = build_mlp: a def of the program
                    bound = _own_methods(value, self_name, f.methods)  # self.build_mlp, self._a if c else self._b
                    if bound:
                        f.callables.add(t.attr)
                        f.bound_methods.setdefault(t.attr, set()).update(bound)
                    if isinstance(value, ast.Name) and method.name == "__init__":
                        if made_here is None:
                            made_here = _local_instances(method, imports, module_classes)
                            made_here.update(_default_instances(method, imports, module_classes))
                        if value.id in made_here:
                            # norm = GlobalNorm(...) (if none was given); self.norm = norm
                            f.submodules.add(t.attr)
                            f.submodule_quals[t.attr] = tuple(sorted(set(f.submodule_quals.get(t.attr, ())) | made_here[value.id]))
                    given = value.values if isinstance(value, ast.BoolOp) else [value]  # self.m = m or Default()
                    if method.name == "__init__" and any(isinstance(v, ast.Name) and v.id in init_args for v in given):
                        f.injected.add(t.attr)
    # a parameter made or set with requires_grad=False that no method of the class turns on again
    f.frozen = (f.frozen | (frozen_off & f.params)) - frozen_on
    f.frozen_modules = (f.frozen_modules | (modules_off & f.submodules)) - frozen_on


def _parameters_loop_flag(node: ast.AST, self_name: str) -> tuple[str, bool] | None:
    """``for p in self.k.parameters(): p.requires_grad = <flag>`` (or ``p.requires_grad_(<flag>)``,
    or over ``named_parameters()``): (k, whether every such flag in the loop is a literal False)."""
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return None
    func = node.iter.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("parameters", "named_parameters")
            and isinstance(func.value, ast.Attribute) and isinstance(func.value.value, ast.Name)
            and func.value.value.id == self_name):
        return None
    target = node.target.elts[-1] if isinstance(node.target, ast.Tuple) and node.target.elts else node.target
    if not isinstance(target, ast.Name):
        return None
    flags = []
    for stmt in statements(node):
        inner = stmt.value if isinstance(stmt, ast.Expr) else stmt
        if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Attribute) \
                and inner.targets[0].attr == "requires_grad" and isinstance(inner.targets[0].value, ast.Name) \
                and inner.targets[0].value.id == target.id:
            flags.append(_literal_false(inner.value))
        elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "requires_grad_" \
                and isinstance(inner.func.value, ast.Name) and inner.func.value.id == target.id:
            flags.append(_literal_false(inner.args[0] if inner.args else None))
    if not flags:
        return None
    return func.value.attr, all(flags) and isinstance(node.body[0], (ast.Assign, ast.Expr)) and len(node.body) == 1


def _own_methods(value: ast.AST, self_name: str, methods: dict) -> set[str]:
    """The methods of the object that ``value`` binds (``self._base_sub``, or each side of
    ``self._a if c else self._b``), or the empty set when it is anything else."""
    sides = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    names = {s.attr for s in sides if isinstance(s, ast.Attribute) and isinstance(s.value, ast.Name)
             and s.value.id == self_name and s.attr in methods}
    return names if len(names) == len({id(s) for s in sides}) else set()


def _names_function(name: str, nested: set[str], imports: ImportMap) -> bool:
    """Is ``name`` a function defined in the method (``nested``: the names of its defs) or at the
    top of its file?"""
    if name in nested:
        return True
    current = getattr(imports, "current", None)
    return isinstance(getattr(current, "defs", {}).get(name), (ast.FunctionDef, ast.AsyncFunctionDef))


def _nested_defs(method: ast.FunctionDef) -> set[str]:
    return {n.name for n in statements(method) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}  # defs are statements


def _module_like(node: ast.AST, imports: ImportMap, module_classes: set[str], init_args: set[str]) -> bool:
    """A module given to ``__init__`` (``backbone``) or built there (``nn.Linear(...)``, a module class)."""
    if isinstance(node, ast.Name):
        return node.id in init_args and looks_like_module_name(node.id)
    if isinstance(node, ast.Call):
        qual = imports.qualname(node.func) or ""
        last = _callee_last(node.func)
        return (qual.startswith("torch.nn.") and last[:1].isupper() and "functional" not in qual) or last in module_classes
    return False


def _constant_prefix(node: ast.AST) -> str:
    """The constant start of an f-string name (``f'biases_{i}'`` -> ``'biases_'``), or ''."""
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
            and isinstance(node.values[0].value, str) and len(node.values) > 1:
        return node.values[0].value
    return ""


def registered_kind(facts: ClassFacts, name: ast.AST) -> str | None:
    """'buffer' / 'parameter' / 'both' when ``name`` (a computed attribute name) starts like the
    names the class registers by computed name, else None."""
    written = facts.registered_names.get(ast.dump(name))
    if written is not None:
        return written  # getattr(self, name + "_raw") after register_parameter(name + "_raw", ...)
    prefix = _constant_prefix(name)
    if not prefix:
        return None
    best = max((p for p in facts.registered_prefixes if prefix.startswith(p)), key=len, default=None)
    return facts.registered_prefixes[best] if best is not None else None


def _literal_false(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _requires_grad_set(node: ast.AST, self_name: str) -> tuple[str, bool] | None:
    """``self.k.requires_grad = <flag>`` or ``self.k.requires_grad_(<flag>)``: (k, whether the
    flag is a literal False), else None."""
    target = flag = None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
            and node.targets[0].attr == "requires_grad":
        target, flag = node.targets[0].value, node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
        target = node.func.value
        flag = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "requires_grad"), None)
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == self_name:
        return target.attr, _literal_false(flag)
    return None


def _classify(f: ClassFacts, attr: str, value: ast.AST, imports: ImportMap, module_classes: set[str], init_args: set[str], line: int) -> None:
    if isinstance(value, (ast.Set, ast.SetComp)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "set"):
        f.sets.add(attr)
    if isinstance(value, (ast.List, ast.Tuple)) and value.elts and all(
            _module_like(e, imports, module_classes, init_args) for e in value.elts):
        # self._backbone = [backbone]: a plain list that keeps a module out of the registered
        # submodules (its state_dict); calling an element is a module call, and deepcopy copies it
        f.submodules.add(attr)
        return
    if isinstance(value, ast.IfExp):
        # self.model = Wrapper(model) if not hasattr(model, "scale") else model: what the built
        # branch makes (the other is the given object, or another build)
        for branch in (value.body, value.orelse):
            if isinstance(branch, ast.Call):
                _classify(f, attr, branch, imports, module_classes, init_args, line)
        return
    if isinstance(value, ast.Call):
        func = value.func
        qual = imports.qualname(func) or ""
        last = _callee_last(func)
        if qual in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") or last == "Parameter":
            f.params.add(attr)
            if _literal_false(value.args[1] if len(value.args) > 1 else next(
                    (k.value for k in value.keywords if k.arg == "requires_grad"), None)):
                f.frozen.add(attr)
            return
        if qual in ("torch.nn.Buffer", "torch.nn.parameter.Buffer") or last == "Buffer":
            f.buffers.add(attr)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id not in init_args and not qual:
            return  # self.helper(...), obj.method(...): says nothing about what it returns
        current = getattr(imports, "current", None)
        if isinstance(func, ast.Name) and func.id in module_classes:
            f.submodules.add(attr)
            f.submodule_classes.setdefault(attr, (func.id, line))
            built = _built_module(func, qual, imports, module_classes)
            if built is not None:
                f.submodule_quals[attr] = (built,)
            return
        if isinstance(func, ast.Name) and current is not None and _plain_local_class(func.id, current, imports):
            # a class of this file that is not a module: a helper object
            f.plain.add(attr)
            f.helpers[attr] = (f"{current.name}.{func.id}",)
            return
        if qual and imports.project is not None and not is_torch_name(qual):
            kind = class_kind(imports.project, qual)
            if kind == MODULE_CLASS:
                f.submodules.add(attr)
                f.submodule_quals[attr] = (qual,)
                return
            if kind in (OTHER_CLASS, FOREIGN_FRAMEWORK):
                f.plain.add(attr)  # an object of a class the program defines: not a module
                if kind == OTHER_CLASS:
                    f.helpers[attr] = (qual,)
                return
            made = factory_classes(imports.project, qual)
            if made:  # a function of the program that returns new objects of these classes
                kinds = {class_kind(imports.project, q) for q in made}
                if kinds == {MODULE_CLASS}:
                    f.submodules.add(attr)
                    f.submodule_quals[attr] = tuple(made)
                    return
                if kinds == {OTHER_CLASS}:
                    f.plain.add(attr)
                    f.helpers[attr] = tuple(made)
                    return
        if qual.startswith(("torch.optim", "torch.utils.data", "torch.distributions")):
            f.plain.add(attr)
            return
        if qual.startswith("torch.nn.") and last[:1].isupper() and not qual.startswith("torch.nn.functional"):
            f.submodules.add(attr)
            if last == "Sequential" and value.args and isinstance(value.args[-1], ast.Call):
                # a Sequential returns what its last module returns
                inner = imports.qualname(value.args[-1].func) or ""
                qual = inner if inner.startswith("torch.nn.") else qual
            f.submodule_ctors.setdefault(attr, qual)
            return
        if is_torch_name(qual) or last == "partial" or qual.split(".")[0] in _STDLIB or last in _STDLIB_CLASSES:
            f.plain.add(attr)
            return
        if last[:1].isupper() or (isinstance(func, ast.Name) and func.id in init_args) or last.startswith(
            ("build", "make", "create", "get_", "_build", "_make", "_create", "_get")
        ):
            f.submodules.add(attr)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in init_args:
            f.submodules.add(attr)  # e.g. norm_layer.build(...) / cfg.model(...)
            return
        return
    if isinstance(value, ast.Lambda):
        f.functional.add(attr)
        return
    if isinstance(value, (ast.Attribute, ast.Name)):
        qual = imports.qualname(value) or ""
        if is_torch_name(qual):
            f.functional.add(attr)
            return
        if isinstance(value, ast.Name) and value.id in init_args and looks_like_module_name(value.id):
            f.submodules.add(attr)
            return
        return
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Dict, ast.Set)):
        if not (isinstance(value, ast.Constant) and value.value is None):
            f.plain.add(attr)


def factory_classes(project, qualname: str) -> list[str]:
    """The classes a function of the program returns new objects of (``make_dist(...)`` returns
    ``CategoricalDistribution(...)``), read from its file; [] when it is no such function."""
    found = resolve(project, qualname)
    if found is None or not isinstance(found.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    memo = found.module.memo
    if "factories" not in memo:
        memo["factories"] = factories_of(found.module.tree, found.module.imports)
    return list(memo["factories"].get(found.node.name, ()))


_PLAIN_BASES = frozenset({"object", "abc.ABC", "typing.Generic", "typing.NamedTuple", "typing.Protocol", "ABC", "Generic"})


def _plain_local_class(name: str, current, imports: ImportMap, depth: int = 0) -> bool:
    """Is ``name`` a class of this file whose bases are all plain (object, ABC, Generic, or such
    classes of this file): certainly not a module?"""
    node = current.defs.get(name)
    if not isinstance(node, ast.ClassDef) or depth > 5:
        return False
    for b in node.bases:
        if isinstance(b, ast.Subscript):
            b = b.value  # Generic[T]
        if isinstance(b, ast.Name) and isinstance(current.defs.get(b.id), ast.ClassDef):
            if not _plain_local_class(b.id, current, imports, depth + 1):
                return False
            continue
        text = imports.qualname(b) or (b.id if isinstance(b, ast.Name) else "")
        if text not in _PLAIN_BASES:
            return False
    return True


def _built_module(func: ast.AST, qual: str | None, imports: ImportMap, module_classes: set[str]) -> str | None:
    """The qualified name of the program's module class a call of ``func`` builds (a module
    class of this file, or one of another file), or None."""
    current = getattr(imports, "current", None)
    if isinstance(func, ast.Name) and func.id in module_classes:
        return f"{current.name}.{func.id}" if current is not None else None
    if qual and imports.project is not None and not is_torch_name(qual) and class_kind(imports.project, qual) == MODULE_CLASS:
        return qual
    return None


def _default_instances(method: ast.FunctionDef, imports: ImportMap, module_classes: set[str]) -> dict[str, set[str]]:
    """Parameters of ``__init__`` whose default builds a module (``expfunc=Fourier(5)``,
    ``act=nn.ReLU()``): name -> qualified class names (a torch class by its own name). What
    the class keeps of such a parameter is that module wherever no caller gives another."""
    args = method.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    out: dict[str, set[str]] = {}
    for arg, default in pairs:
        if not isinstance(default, ast.Call):
            continue
        qual = imports.qualname(default.func)
        built = _built_module(default.func, qual, imports, module_classes)
        if built is None and qual and qual.startswith("torch.nn.") and "functional" not in qual \
                and qual.rsplit(".", 1)[-1][:1].isupper():
            built = qual
        if built:
            out.setdefault(arg.arg, set()).add(built)
    return out


def _local_instances(method: ast.FunctionDef, imports: ImportMap, module_classes: set[str]) -> dict[str, set[str]]:
    """Local names of ``__init__`` bound to new instances of module classes of the program
    (``norm = GlobalNorm(length_dim=2)``): name -> qualified class names."""
    out: dict[str, set[str]] = {}
    for stmt in statements(method):
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        func = stmt.value.func
        qual = _built_module(func, imports.qualname(func), imports, module_classes)
        if qual:
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, set()).add(qual)
    return out
