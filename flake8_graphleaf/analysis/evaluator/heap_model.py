"""What the copy graph's heap is made of (:mod:`.heap`): the atoms a name or an attribute may hold,
the graph tensors objects keep (:class:`Kept`), the copies and sends that meet them
(:class:`Sink`), and one file of the program as a run sees it (:class:`FileContext`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..values import NOTHING, Value

# Atoms: what a name or an attribute may hold, besides its Value.
#   ("obj", key)                 an object of a class of the program (key: "path::Name", see class_key)
#   ("alloc", path, line, col)   a dict / list / set made there (("module",) after it: a torch module)
#   ("queue",)                   a multiprocessing queue
#   ("fn", key)                  a function or closure of the program (Program.functions[key])
#   ("bound", qualname, method, holder atom)  a bound method (``self._hook``)
#   ("partial", key)             functools.partial(...) (Program.partials[key])
#   ("tuple", (types, ...))      a tuple of known length
Types = frozenset

EMPTY: frozenset = frozenset()
QUEUE = ("queue",)
POOL = ("pool",)  # a process pool: what its map / apply / submit are given is pickled to a worker
MP_CONTEXT = ("mp-context",)  # multiprocessing.get_context(...): its Queue() / Process() are the real ones
MP_PICKLING = ("mp-context", "pickles")  # get_context("spawn" / "forkserver"): a Process pickles its args



def flatten(types) -> frozenset:
    """The atoms of ``types``, with the elements of tuples in place of the tuples."""
    out = set()
    for a in types:
        if a[0] == "tuple":
            for t in a[1]:
                out |= flatten(t)
        else:
            out.add(a)
    return frozenset(out)


@dataclass
class Kept:
    """A graph tensor an object keeps: where it was stored and how that code was reached."""

    holder: tuple  # the atom
    attr: str  # the attribute ("[]": the items of a dict / list made by the program)
    code: str  # GLF001 attribute, GLF002 container item, GLF003 in a hook
    node: ast.AST  # the store
    stmt: ast.AST | None
    value: Value
    path: str  # the file of the store
    reached: str  # how the storing code was reached: "train() -> ema.update()"
    target: str  # the target as written
    method: str = ""  # the function that stored it
    root: str = ""  # the name the target starts from
    on_self: bool = False  # stored by a method of the holder's class on its own object
    # where the stored tensor was made, when the storing code only keeps what a caller gave it
    # (``self.values = values`` in a constructor): (path, the expression or statement that made it there)
    made: tuple | None = None
    # the call outside any module's forward that ran the forward storing it, where that call's
    # result is only inspected (``model(example)`` for its shapes, a stride probe's
    # ``y = self.forward(zeros)`` then ``y.shape``): (path, the call); run under torch.no_grad()
    # it would store no graph tensor
    entry: tuple | None = None


@dataclass
class Sink:
    kind: str  # "copy", "loader", "queue", "pool", "process"
    node: ast.Call
    what: str  # copy.deepcopy(trainer), DataLoader(ds, ...), queue.put(out)
    kept: list[Kept]
    value: Value = NOTHING  # queue / process: the value sent; "copy-arg": the tensor copied
    path: str = ""  # the file of the call
    # "copy-arg": where the copied tensor was made, in the function that passed it on: (path, the
    # statement that bound it there or the argument itself, the argument as written, the call
    # that passed it, the function that made that call)
    origin: tuple | None = None
    # "copy", "loader": the attributes from the copied object to each of ``kept`` (Program.reach_paths),
    # the copied object as written, and the names of the classes of the objects it may be
    paths: list = field(default_factory=list)
    copied: str = ""
    classes: tuple = ()


@dataclass
class FileContext:
    """One file of the program as the run sees it."""

    name: str
    path: str
    imports: object
    defs: dict
    classes: dict = field(default_factory=dict)
    module_classes: set = field(default_factory=set)

def classes_of(types) -> tuple[str, ...]:
    """The names of the classes of the objects among ``types``."""
    return tuple(sorted({a[1].rpartition("::")[2] for a in flatten(types) if a[0] == "obj"}))
