"""Step 3 of a finding: evaluating the program, for autograd.

- :mod:`.graph_tensors` (with :mod:`.calls`) — the one place that decides what an expression
  may hold (a graph tensor, a leaf, a module, nothing), from the facts and the program model;
- :mod:`.flow` — walks a function body in order with its grad mode and reports every store;
- :mod:`.effects`, :mod:`.forward_results` — what calling a program function, or a submodule's
  ``forward``, gives;
- :mod:`.scopes` — the class runner: a class's methods from ``forward`` / ``__init__``, following
  ``self.method(...)`` with the values really passed;
- :mod:`.heap` — the copy graph's program runner: the program's objects, run in order from its
  roots, up to the copy sites and process boundaries.
"""
