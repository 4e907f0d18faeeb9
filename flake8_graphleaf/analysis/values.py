"""The value lattice of the analysis: what an expression may hold, for autograd.

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

Kinds are ordered; a container or a join of paths takes the largest kind.  Pure data and small
helpers on it; the semantics that produce values live in :mod:`.evaluator.graph_tensors` and :mod:`.evaluator.calls`.
"""

from __future__ import annotations

import ast

NONE, MODULE, LEAF, ARG, GRAPH = range(5)

# The origin of a MODULE value that is a class, not an object (a parameter whose default is one:
# ``def train(actor_critic=MLPActorCritic)``): calling it builds a module, it runs no forward.
CLASS_PREFIX = "the class "

KIND_NAMES = {NONE: "none", MODULE: "module", LEAF: "leaf", ARG: "arg", GRAPH: "graph"}


class Value:
    """``items``: for a tuple of known length (``return out, acc``), the value of each element,
    so that ``loss, acc = self.step(x)`` binds each name to what it really holds.  ``keys``: for a
    dict whose keys are string constants (``{"positions": pos, "cell": cell}``), the value under
    each key, so that ``data["cell"]`` is what was put there, not the join of every entry."""

    __slots__ = ("kind", "origin", "items", "cls", "trail", "guess", "keys")

    def __init__(self, kind: int, origin: str = "", items: "tuple[Value, ...] | None" = None, cls: str | None = None,
                 trail: tuple = (), guess: str | None = None, keys: "dict[str, Value] | None" = None):
        self.kind = kind
        self.origin = origin
        self.items = items
        # the torch class of an object whose methods the table knows (a Distribution)
        self.cls = cls
        # the witness's steps: (line, "name = ", expression node) of each binding the value went
        # through from its source (rendered only for a finding: witness.steps)
        self.trail = trail
        # a step of the chain that is assumed, not known: a callable whose semantics the analysis
        # does not have (its result is taken to carry its arguments' history)
        self.guess = guess
        self.keys = keys

    def assumed(self, what: str) -> "Value":
        """This value, as the result of a callable the analysis does not know (``what``)."""
        if self.kind < ARG or self.guess is not None:
            return self
        return Value(self.kind, self.origin, self.items, self.cls, self.trail, what, self.keys)

    def then(self, line: int, target: str, node: ast.AST, path: str | None = None) -> "Value":
        """This value, bound at ``line`` (of the file at ``path``, where the run knows it) to
        ``target`` from ``node`` (a step of its witness)."""
        if len(self.trail) >= MAX_STEPS:
            return self
        return Value(self.kind, self.origin, self.items, self.cls, self.trail + ((line, target, node, path),),
                     self.guess, self.keys)

    def with_keys(self, keys: "dict[str, Value] | None") -> "Value":
        """This dict with these entries (None: entries not known one by one)."""
        if keys is None:
            return Value(self.kind, self.origin, self.items, self.cls, self.trail, self.guess)
        whole = join(*keys.values()) if keys else NOTHING  # the dict is what its entries are
        return Value(whole.kind, whole.origin, None, None, whole.trail, whole.guess, keys)

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
MAX_STEPS = 12  # a witness lists at most this many steps
_NAME_MARK = "\x00name:"  # the origin of a string constant that is an identifier


def name_constant(name: str) -> Value:
    """A string constant: no history, but the name it holds travels with it (a helper's
    ``getattr(self.network, attr_name)``, called with ``"spatial_dims"``, reads that attribute)."""
    return Value(NONE, _NAME_MARK + name)


def constant_name(value: Value) -> str | None:
    """The identifier a string constant carried here holds, or None (a loop over several
    names carries them joined by ``|``: see constant_names)."""
    return value.origin[len(_NAME_MARK):] if value.kind == NONE and value.origin.startswith(_NAME_MARK) else None


def constant_names(value: Value) -> list[str] | None:
    """The names a string constant, or the target of ``for attr in ["a", "b"]``, may hold."""
    name = constant_name(value)
    return name.split("|") if name else None


_KIND_MARK = "\x00trust:"  # a guess that is not a callable's: "<mark><kind>\x00<clause>"


def trusted(kind: str, clause: str) -> str:
    """A guess (``Value.guess``) of another kind than a callable taken to carry its arguments'
    history: a step of ``kind`` (analysis/confidence.py's KINDS) that ``clause`` says in words."""
    return f"{_KIND_MARK}{kind}\x00{clause}"


def guess_step(guess: str) -> tuple[str, str]:
    """The kind of step a guess takes on trust, and the clause that says it."""
    if guess.startswith(_KIND_MARK):
        kind, _, clause = guess[len(_KIND_MARK):].partition("\x00")
        return kind, clause
    return "unknown-callable", f"{guess} is taken to carry its arguments' history"


def _guess(items) -> str | None:
    """The first guess among a tuple's elements (a step on trust in any element is one in the whole)."""
    return next((v.guess for v in items or () if v.guess and v.kind >= ARG), None)


def _constants(values) -> Value:
    """Paths that each hold no history: the string constants they may hold (``"a"`` on one path,
    ``"b"`` on another: ``"a|b"``), or NOTHING where one path holds something else."""
    names: list[str] = []
    for v in values:
        held = constant_names(v)
        if held is None:
            return NOTHING
        names += [n for n in held if n not in names]
    return name_constant("|".join(names))


def join(*values: Value) -> Value:
    if len(values) == 1:
        return values[0]  # one path: nothing to forget (a call's one result keeps its tuple's items)
    best = NOTHING
    for v in values:
        if v.kind > best.kind:
            best = v
    if best.kind == NONE and best.origin.startswith(_NAME_MARK):
        return _constants(values)
    if best.items is not None:
        # a join of paths forgets the tuple's shape, not a guess an element was taken on
        return Value(best.kind, best.origin, trail=best.trail, guess=best.guess or _guess(best.items))
    if best.keys is not None and len(values) > 1:
        return best.with_keys(None)  # and a dict's entries
    return best


def merge_paths(values: "list[Value]") -> Value:
    """What a name holds after alternative paths: the largest kind; a dict with string keys on
    every path keeps its entries, each the join of what the paths put under that key."""
    best = values[0]
    for v in values[1:]:
        if v.kind > best.kind:
            best = v
    if best.kind == NONE and best.origin.startswith(_NAME_MARK) and len(values) > 1:
        return _constants(values)
    if all(v.keys is not None for v in values) and any(v is not values[0] for v in values):
        keys: dict[str, Value] = {}
        for v in values:
            for k, x in v.keys.items():
                old = keys.get(k)
                keys[k] = x if old is None or x.kind > old.kind else old
        return best.with_keys(keys)
    if best.keys is not None and any(v.keys is None for v in values):
        return best.with_keys(None)
    return best


def join_tuples(a: Value, b: Value) -> Value:
    """The join of two paths' results that keeps a tuple's shape when both have the same one."""
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join_tuples(x, y) for x, y in zip(a.items, b.items))
        whole = join(*items)
        return Value(whole.kind, whole.origin, items, trail=whole.trail, guess=_guess(items))
    return join(a, b)


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


def _containers_only(value: Value) -> Value:
    """Under no_grad nothing new gets a grad_fn, but passing a graph tensor along keeps it."""
    return value if value.kind == GRAPH else NOTHING


def _is_true(node: ast.Call, keyword: str) -> bool:
    for k in node.keywords:
        if k.arg == keyword:
            return not (isinstance(k.value, ast.Constant) and not k.value.value)
    return False
