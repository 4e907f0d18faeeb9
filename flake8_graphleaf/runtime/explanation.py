"""``explain(model)``: the graph tensors that break ``copy.deepcopy(model)``, each with the line that stored it.

Combines the deepcopy walk (:mod:`.walk`), the static findings (:mod:`.static_map`) and, when
given, the stores recorded by :func:`flake8_graphleaf.runtime.trace.trace_stores`.  Imports torch.
"""

from __future__ import annotations

import linecache
import sys
from typing import Any, Iterable

from .findings import Findings, Source, format_explanation
from .static_map import StaticIndex, map_static
from .trace import FORWARD, PASSED, StoreLog, graph_trained
from .walk import find_graph_tensors


def explain(
    obj: Any,
    name: str | None = None,
    *,
    trace: "StoreLog | None" = None,
    extra_files: Iterable[str] = (),
    print_result: bool = True,
    file=None,
    requiring_grad: bool = False,
) -> Findings:
    """:func:`find_graph_tensors`, plus the line that stored each tensor, and print it.

    Each tensor's owner class (and the classes of the objects above it) is looked up with
    ``inspect.getsourcefile``; that file goes through the static analysis, and the
    findings for the same class and attribute are the tensor's ``sources``.  ``extra_files``
    (e.g. the file that built the model) are searched too, for stores made outside a
    class and for legacy ``weight_norm`` calls.  With a ``trace`` from :func:`trace_stores`,
    the recorded lines are added.  ``requiring_grad=True`` also lists leaves that require grad
    (what a DataLoader worker cannot batch).
    """
    items = find_graph_tensors(obj, name, requiring_grad=requiring_grad)
    index = StaticIndex()
    extra = list(extra_files)
    for item in items:
        item.sources = map_static(item, index, extra)
        if trace is not None:
            for rec in trace.records_for(item):
                if rec.how == FORWARD and graph_trained(item.tensor):
                    continue  # a backward went through it: that forward's graph was trained
                same = [s for s in item.sources if s.file == rec.file and s.line == rec.line]
                for s in same:
                    s.traced = True
                if same:
                    continue
                text = rec.text + (f"  (via {rec.library_frame})" if rec.library_frame else "")
                if rec.how == FORWARD:
                    text += f"  ({rec.note}; no backward went through what it stored: run it under torch.no_grad() " \
                            "unless its gradient is wanted)"
                caller = rec.how in (PASSED, FORWARD)  # a line above the store, on the stack when it ran
                item.sources.append(
                    Source(file=rec.file, line=rec.line, code=rec.how if caller else "trace", text=text,
                           attribute=rec.attribute, message=f"{rec.how} recorded by trace_stores ({rec.grad_fn})",
                           traced=not caller)
                )
    for item in items:
        if item.copy_method is not None:
            file, line, method = item.copy_method
            if not any(s.file == file and s.line == line for s in item.sources):
                item.sources.append(Source(file=file, line=line, code="method",
                                           text=linecache.getline(file, line).strip(), message=f"{method}() copies it"))
    if print_result:
        print(format_explanation(items), file=file or sys.stdout)
    return items
