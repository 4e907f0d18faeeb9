"""Step 1 of a finding: what torch's and Python's names mean, before any program is read.

- :mod:`.torch_facts` — what each torch callable does to autograd history (returns a tensor,
  carries its input's history, makes a fresh leaf, in place, an alias), read from
  ``semantics.json``, which ``runtime/torch_probe.py`` generates by running torch;
- :mod:`.torch_names` — what the table cannot say: builtins, Python's containers, naming
  conventions of parameters and submodules;
- :mod:`.sinks` — the calls that copy an object or send it to another process.
"""
