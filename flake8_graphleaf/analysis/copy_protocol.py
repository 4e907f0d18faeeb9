"""Classes that take ``copy.deepcopy`` into their own hands.

A class with its own ``__deepcopy__``, ``__getstate__``, ``__reduce__`` or ``__reduce_ex__``
decides what a copy gets: PairwiseGP sets its cached non-leaf tensors to None around the copy,
a distillation wrapper clears its feature dicts in ``__getstate__``.  An attribute that such a
method names (``self.cache``, ``"cache"``, ``state["cache"]``) is handled there, so a store to
it is not reported.  Attributes the method does not name are judged as usual.
"""

from __future__ import annotations

import ast

COPY_METHODS = ("__deepcopy__", "__getstate__", "__reduce__", "__reduce_ex__")


def handled_attributes(methods: dict[str, ast.FunctionDef]) -> set[str]:
    """The attribute names that the class's copy methods name (empty when it has none)."""
    names: set[str] = set()
    for name in COPY_METHODS:
        func = methods.get(name)
        if func is None:
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    return names


def attribute_root(attribute: str | None) -> str | None:
    """``self.cache[...]`` / ``self.cache.x`` -> ``cache``."""
    if not attribute or "." not in attribute:
        return None
    rest = attribute.split(".", 1)[1]
    for sep in ("[", ".", "<"):
        rest = rest.split(sep, 1)[0]
    return rest or None
