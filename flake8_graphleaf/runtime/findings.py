"""What the runtime reports: a graph tensor that deepcopy would refuse, where it was stored, and the
text of the report.  Data only (no torch import)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class Source:
    """A line that stored (or may have stored) a graph tensor."""

    file: str
    line: int
    code: str  # rule code ("GLF002"), or "trace" for a line recorded by trace_stores
    text: str  # the source line, stripped
    attribute: str | None = None
    message: str = ""
    traced: bool = False  # a static finding whose line trace_stores also recorded

    def location(self) -> str:
        return f"{display_path(self.file)}:{self.line}"


@dataclass
class GraphTensor:
    """A tensor that deepcopy would reach and refuse (it is not a graph leaf)."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    grad_fn: str | None
    requires_grad: bool
    owner_class: str | None  # class of the object whose attribute holds it (module, hook object, ...)
    attribute: str | None  # that attribute's name, e.g. "features" for model.encoder.features[3]
    sources: list[Source] = field(default_factory=list)
    # [(owner object, attribute names from it down to the tensor)], nearest owner first.
    owners: list[tuple[Any, tuple[str, ...]]] = field(default_factory=list, repr=False, compare=False)
    tensor: Any = field(default=None, repr=False, compare=False)
    grad_of: Any = field(default=None, repr=False, compare=False)  # the leaf whose .grad this tensor is
    holder: Any = field(default=None, repr=False, compare=False)  # the object, list or dict holding it directly
    # (file, line, "Tracker.__deepcopy__"): the line of an object's own __deepcopy__ / __getstate__ that copied it
    copy_method: tuple[str, int, str] | None = None


    def describe(self) -> str:
        shape = "(" + ", ".join(str(s) for s in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
        if self.grad_fn is None and self.requires_grad:
            return f"{shape} {self.dtype} {self.device} requires_grad=True (a leaf)"
        return f"{shape} {self.dtype} {self.device} grad_fn={self.grad_fn}"


@dataclass
class Problem:
    """Something deepcopy would fail on that is not a graph tensor (e.g. an object that cannot be copied)."""

    path: str
    error: str


class Findings(list):
    """The list of :class:`GraphTensor` returned by :func:`find_graph_tensors` / :func:`explain`;
    ``problems`` lists what else deepcopy would stumble on."""

    problems: list[Problem]

    def __init__(self, items: Iterable[GraphTensor] = (), problems: Iterable[Problem] = ()):
        super().__init__(items)
        self.problems = list(problems)

    def __str__(self) -> str:
        return format_explanation(self)




_LABELS = {
    "trace": "stored:",  # nn.Module.__setattr__ recorded by trace_stores / explain --run
    "assigned": "assigned (static, not recorded):",  # a self.<attr> = ... line of the owner's class
    "built": "built:",
    "made": "made (returned by the function and kept):",
    "sent": "sent:",
    "loader": "given to a DataLoader:",
    "method": "its own copy method copies it:",
    "passed": "given to the constructor that stores it:",
    "forward": "ran the forward that stored it, with grad on:",
    "copied": "copied (the tensor itself):",
}


def format_explanation(items: Findings | list[GraphTensor]) -> str:
    problems = getattr(items, "problems", [])
    if not items and not problems:
        return "no tensor on the autograd graph is reachable: copy.deepcopy will not raise the graph-leaf error"
    lines = []
    if items:
        n = len(items)
        lines.append(
            f"copy.deepcopy raises: {n} tensor{'s' if n != 1 else ''} on the autograd graph "
            f"(not graph leaves) {'are' if n != 1 else 'is'} reachable"
        )
    for item in items:
        lines.append("")
        lines.append(f"{item.path}  {item.describe()}")
        if not item.sources:
            lines.append("    <- no store of it was recorded (it was not set on a module with setattr while "
                         "traced) and no static finding names this attribute")
        for s in item.sources:
            code = f"{s.code} (traced)" if s.traced and s.code != "trace" else _LABELS.get(s.code, s.code)
            lines.append(f"    <- {s.location()} {code} {s.text}")
    for p in problems:
        lines.append("")
        lines.append(f"{p.path}: deepcopy would also fail here: {p.error}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- trace_stores


def display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel
