"""The engine of ``graphleaf verify``: run fixtures (or a user's model) and prove each fix dynamically.

Per fixture and device it checks:

1. ``crash``    the original reproduces the graph-leaves crash (``copy.deepcopy(model)`` after a
                training step, or inside the fixture's own ``training_step``), or, for a negative
                fixture (``EXPECT_CRASH = False``), does not;
2. ``fix``      the real fixer (:func:`flake8_graphleaf.fix.fixer.fix_source`) is run on a temporary
                copy, which is imported fresh; a positive fixture whose findings have no fix fails;
3. ``same``     with the same seed, weights (the original's state_dict, legacy weight_norm /
                spectral_norm keys mapped) and inputs: forward outputs, the step's loss, every
                parameter gradient, input gradients, buffers and parameters after the step;
4. ``deepcopy`` ``copy.deepcopy`` of the fixed model works, and the copy gives the same outputs;
5. ``safety``   a SAFE fix must show no difference at all; for an UNSAFE fix every difference
                is listed (and must include the fixture's ``EXPECT_UNSAFE_DIFF``).

torch is imported lazily, inside the functions: importing this package works without it (the
command line, :mod:`flake8_graphleaf.cli.verify`, then says how to install it).

Modules: ``results`` (the data), ``loading`` (fixtures), ``harness`` (one reproducible step),
``compare`` (bitwise comparisons), ``pipeline`` (one fixture on one device), ``report`` (table,
JUnit, JSON).

Fixture contract (``fixtures/models/<name>.py``): ``make_model()``, ``make_inputs()`` (a tuple of
CPU tensors), optional ``training_step(model, inputs)`` returning the loss, ``EXPECT_CRASH``.
Optional constants read here: ``EXPECT_FIX`` ("safe" | "unsafe" | "none"), ``EXPECT_UNSAFE_DIFF``
(substrings that must appear among the listed differences), ``STEP_BACKWARD`` (default True:
the harness calls ``loss.backward()`` on what ``training_step`` returns; False when the step
does its own backward).
"""

from __future__ import annotations

from .harness import CUDA_ATOL, CUDA_RTOL, SEED
from .loading import collect_fixtures, default_fixture_dir, fixture_spec
from .pipeline import verify_one
from .report import format_table, payload, write_junit
from .results import CHECKS, DIFF, FAIL, INFO, PASS, SKIP, Check, Result, Spec, UsageError

__all__ = [
    "CHECKS", "DIFF", "FAIL", "INFO", "PASS", "SKIP", "SEED", "CUDA_ATOL", "CUDA_RTOL", "Check", "Result", "Spec", "UsageError",
    "collect_fixtures", "default_fixture_dir", "fixture_spec", "format_table", "payload", "verify_one", "write_junit",
]
