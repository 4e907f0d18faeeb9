"""What a finding says: one grammar for every code, written for the person who reads it at its line.

At a copy (GLF202, a DataLoader's GLF301), the copied object, its class, the attribute path from it
to each tensor that breaks the copy, and the line that stored it::

    copy.deepcopy(model) will raise: model (TinyClassifier) keeps a tensor on the autograd graph in
    model.block.attn.last_attn (GLF001 at line 21, stored by train() -> TinyClassifier.forward ->
    Block.forward -> Attention.forward), and in model.activations[...] (GLF003 at line 48, stored by
    train() -> hook (registered hook)): fix those lines, or copy with state_dict()

Every store that breaks the copy is named, up to three, then "and N more".

At a store (GLF001 - GLF005), what is stored where, with the class that holds it, the source of the
graph tensor, the calls that reach the store where the program shows them, and the copy that will
fail: the file's own copy, by its line, where it has one (a copy in another file names the store
in its own finding)::

    'self.last_attn' (Attention) keeps a tensor on the autograd graph (from self.qkv(...));
    copy.deepcopy(model) at line 62 will raise (it reaches it as model.block.attn.last_attn):
    use a local variable, or store .detach()

The other codes say the same parts in the same order: a legacy norm or a pruning call as the
subject of a store (``legacy torch.nn.utils.weight_norm makes the module's weight a non-leaf tensor;
copy.deepcopy of the module will raise as soon as it is applied: use ...``), a copy of a tensor
itself (GLF201: ``copy.deepcopy(logits) will raise: it copies a tensor on the autograd graph (from
model(...)): use .detach().clone()``), a send to another process (GLF301: ``queue.put(out) will fail:
it sends a tensor on the autograd graph (from model(...)) to another process; <the error>: <advice>``).

Call chains name a function ``train()``, a method with its class (``TinyClassifier.forward``) and a
hook by its function (``hook (registered hook)``).  The confidence clause a lower-level finding carries
(analysis/confidence.py) comes after all of it, unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MODULE_CODE = "module-level code"
GRAPH_TENSOR = "a tensor on the autograd graph"
LISTED = 3  # the stores a copy's message names before "and N more"


def frame_name(func: str, cls: str | None = None, hook: bool = False) -> str:
    """One call of a chain: ``train()``, ``TinyClassifier.forward``, ``hook (registered hook)``."""
    if hook:
        return f"{cls + '.' if cls else ''}{func} (registered hook)"
    return f"{cls}.{func}" if cls else f"{func}()"


def call_chain(names: Iterable[str]) -> str:
    """The calls from a root to the code, joined by arrows; the module-level code is named only
    when it is the whole chain (``train() -> TinyClassifier.forward``, not ``module-level code ->
    train() -> ...``)."""
    names = list(names)
    while len(names) > 1 and names[0] == MODULE_CODE:
        names.pop(0)
    return " -> ".join(names)


def at(line: int, path: str | None = None) -> str:
    """A line of the reported file (``line 21``), or of another (``ema.py:13``)."""
    return f"{path}:{line}" if path else f"line {line}"


def holder(place: str, cls: str | None, kind: str = "") -> str:
    """The stored place as written, with the class of the object that holds it:
    ``'self.last_attn' (Attention)``; ``kind``: ``buffer``."""
    text = f"{kind} '{place}'" if kind else f"'{place}'"
    return f"{text} ({cls})" if cls else text


def store(subject: str, verb: str, source: str | None, copy: str, advice: str, chain: str | None = None,
          maybe: bool = False, by: str | None = None, then: str | None = None, tensor: str = GRAPH_TENSOR) -> str:
    """A finding at a store. ``subject``: what is stored where (:func:`holder`); ``verb``: ``keeps``,
    ``is given``, ...; ``source``: what put the tensor on the graph (``self.qkv(...)``); ``by``: how
    (``by .append()``); ``chain``: the calls that reach the store; ``then``: what the store does to
    the object (``the buffer then has a grad_fn``); ``copy``: the copy that fails and when
    (:func:`copy_clause`); ``maybe``: the tensor may be on the graph (a step of the proof is taken on
    trust)."""
    what = tensor if not maybe else tensor.replace("a tensor on", "a tensor that may be on", 1)
    text = f"{subject} {verb} {what}"
    if source:
        text += f" (from {source})"
    if by:
        text += f" {by}"
    if chain:
        text += f", stored by {chain}"
    return f"{text}; {then + ' and ' if then else ''}{copy}: {advice}"


def copy_clause(copy: str, line: int | None = None, path: str | None = None, reach: str | None = None,
                when: str = "after forward", maybe: bool = False, copies: str | None = None) -> str:
    """The copy that fails: the program's own (``copy.deepcopy(model) at line 62 will raise (it reaches
    it as model.block.attn.last_attn)``), else any copy of the object at the time it is kept
    (``copy.deepcopy(model) will raise after forward``); ``copies``: what it copies on the way
    (``the hooked module``)."""
    if_it_is = " if it is" if maybe else ""
    if line is not None:
        text = f"{copy} at {at(line, path)} will raise{if_it_is}"
        return text + (f" (it reaches it as {reach})" if reach else "")
    text = f"{copy} will raise {when}{if_it_is}".rstrip()
    return text + (f" (it copies {copies})" if copies else "")


_ANY_COPY = re.compile(r"copy\.deepcopy(?:\([^()]*\)| of the module| of the model) will raise (?:after [^:;()]*?|"
                       r"even before training|afterwards|as soon as it is applied|in between)(?P<maybe> if it is)?"
                       r"(?P<copies> \(it copies [^()]*\))?(?=:)")


def name_copy(f, copy: str, line: int, path: str | None = None, reach: str | None = None) -> None:
    """Name the program's own copy that fails in the message of the store ``f`` (a Finding), in
    place of any copy (``copy.deepcopy(model) will raise after forward`` becomes
    ``copy.deepcopy(ema_model) at line 70 will raise (it reaches it as ...)``); once, the first
    copy named."""
    if f.data.get("copy_named"):
        return
    found = _ANY_COPY.search(f.message)
    if found is None:
        return
    clause = copy_clause(copy, line, path, reach, maybe=bool(found.group("maybe")))
    if not reach and found.group("copies"):
        clause += found.group("copies")
    f.data["unnamed_message"] = f.message  # what it says again if that copy turns out clean (copy_graph.settle)
    f.message = f.message[: found.start()] + clause + f.message[found.end():]
    f.data["copy_named"] = line


class Store:
    """A store that breaks a copy, as a copy's message lists it."""

    __slots__ = ("path", "code", "lines", "file", "chain")

    def __init__(self, path: str, code: str, line: int, file: str | None = None, chain: str | None = None):
        self.path = path  # the attribute path from the copied object: model.block.attn.last_attn
        self.code = code
        self.lines = [line]  # several: stores of one place by one chain (three .append() lines)
        self.file = file  # the store's file as the message names it (None: the reported file)
        self.chain = chain

    @property
    def key(self) -> tuple:
        return self.path, self.code, self.file, self.chain

    def text(self) -> str:
        if len(self.lines) == 1:
            where = f"{self.code} at {at(self.lines[0], self.file)}"
        else:
            numbers = [str(n) for n in self.lines]
            where = f"{self.code} at {self.file + ' ' if self.file else ''}lines {', '.join(numbers[:-1])} and {numbers[-1]}"
        return f"{self.path} ({where}, stored by {self.chain})" if self.chain else f"{self.path} ({where})"


def _grouped(stores: list[Store]) -> list[Store]:
    """One entry per place, code, file and chain, with all its lines."""
    out: dict[tuple, Store] = {}
    for s in stores:
        seen = out.get(s.key)
        if seen is None:
            out[s.key] = Store(s.path, s.code, s.lines[0], s.file, s.chain)
            out[s.key].lines = list(s.lines)
        else:
            seen.lines += [n for n in s.lines if n not in seen.lines]
    return list(out.values())


def copied_object(copied: str, cls: str | None) -> str:
    """``model (TinyClassifier)``, ``the dict made at line 10``."""
    return f"{copied} ({cls})" if cls else copied


def copy_site(call: str, copied: str, cls: str | None, stores: list[Store], advice: str | None = None,
              verb: str = "will raise", tensor: str = GRAPH_TENSOR) -> str:
    """A finding at a copy: ``call`` (``copy.deepcopy(model)``) fails because ``copied`` of class
    ``cls`` keeps ``stores`` (the surest first)."""
    stores = _grouped(stores)
    listed = [s.text() for s in stores[:LISTED]]
    more = len(stores) - len(listed)
    places = ", and in ".join(listed)
    if more:
        places += f", and {more} more"
    several = len(stores) > 1 or len(stores[0].lines) > 1 if stores else False
    advice = advice or f"fix {'those lines' if several else 'that line'}, or copy with state_dict()"
    return f"{call} {verb}: {copied_object(copied, cls)} keeps {tensor} in {places}: {advice}"


def copied_tensor(call: str, source: str | None, advice: str, maybe: bool = False, tensor: str = GRAPH_TENSOR) -> str:
    """A finding at a copy of a tensor itself (GLF201): ``copy.deepcopy(logits) will raise: it copies a
    tensor on the autograd graph (from model(...))``."""
    what = tensor if not maybe else tensor.replace("a tensor on", "a tensor that may be on", 1)
    return f"{call} will raise{' if it is' if maybe else ''}: it copies {what}" + (
        f" (from {source})" if source else "") + f": {advice}"


def sent(call: str, does: str, source: str | None, error: str, advice: str, to: str = "") -> str:
    """A finding at a send to another process (GLF301): ``queue.put(out) will fail: it sends a tensor
    on the autograd graph (from model(...)) to another process; 'Cowardly refusing ...': put .detach()
    on it``."""
    return f"{call} will fail: it {does}" + (f" (from {source})" if source else "") + (f" {to}" if to else "") + (
        f"; {error}: {advice}")


def attribute_path(root: str, steps: Iterable[str]) -> str:
    """``model`` and the attributes from it (``block``, ``attn``, ``last_attn``; ``[]`` for the items
    of a container): ``model.block.attn.last_attn``, ``model.activations[...]``."""
    out = root
    for step in steps:
        out += "[...]" if step == "[]" else f".{step}"
    return out


def self_relative(target: str) -> list[str]:
    """The attribute steps of a store's target from the object that holds it:
    ``self.attn.last_attn`` -> ``attn``, ``last_attn``; ``self.stats[k]`` -> ``stats``, ``[]``."""
    head = re.match(r"[^.\[]*", target).end()
    return [m.group(1) or "[]" for m in re.finditer(r"\.(\w+|<[^>]*>)|\[[^\]]*\]", target[head:])]
