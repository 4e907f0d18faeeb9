"""Step 2 of a finding: the program model, from the syntax alone (no value is evaluated here).

- :mod:`.stmtwalk`, :mod:`.textpos` — walking statements, positions in the text;
- :mod:`.imports` — what a file's names resolve to; :mod:`.grad_mode` — ``no_grad`` and the
  other switches as written;
- :mod:`.summaries`, :mod:`.project_view` — a file's summary for the whole-program index, and
  what one file may ask about the others (answered by :mod:`flake8_graphleaf.project`);
- :mod:`.modules` — which classes are ``nn.Module``s and what their attributes hold
  (``ClassFacts``); :mod:`.given_models`, :mod:`.helper_objects` — models a class was given,
  helper state objects a module holds; :mod:`.flags` — settings a class fixes for good;
  :mod:`.copysafe_state` — what a class's own ``__getstate__`` / ``__deepcopy__`` hands to copies.
"""
