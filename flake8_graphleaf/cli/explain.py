"""``graphleaf explain TARGET``: build a model, train one step, and name the tensors that break deepcopy.

The CLI owner wires ``graphleaf explain`` to :func:`add_arguments` and :func:`run`;
``python -m flake8_graphleaf.explain TARGET ...`` works on its own through :func:`main`.
torch is imported only inside :func:`run`; without it the command says how to install
it and exits 2.

Exit codes: 0 deepcopy works, 1 deepcopy would fail, 2 usage error (bad target, no
torch, the model or its inputs could not be built or run).

``graphleaf explain --run SCRIPT [ARG ...]`` runs the user's script instead
(:func:`flake8_graphleaf.runtime.script.run_script`): 0 it finished, 1 it raised the graph-leaf
error or a process-boundary error (located), 2 usage error, 3 it failed on its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from ..runtime.targets import TargetError, resolve_target

EXIT_OK, EXIT_FAILS, EXIT_USAGE = 0, 1, 2

INSTALL_HINT = (
    "graphleaf explain needs torch, which is not installed here.\n"
    "Install it with:  pip install 'flake8-graphleaf[verify]'   (or: pip install torch)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="TARGET", nargs="?", default=None,
        help="callable that returns the model: 'package.module:make_model' or 'path/to/file.py:make_model'",
    )
    parser.add_argument(
        "--run", metavar="SCRIPT [ARG ...]", nargs=argparse.REMAINDER, default=None,
        help="run SCRIPT as __main__ with those arguments (everything after SCRIPT goes to it) and explain "
        "a graph-leaf or process-boundary crash in it: exit 0 it finished, 1 crash located, 3 it failed on its own",
    )
    parser.add_argument(
        "--inputs", metavar="TARGET", default=None,
        help="callable that returns the inputs (a tuple of positional args, a dict of keyword args, or one tensor); "
        "default: make_inputs next to the model's callable",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--train", dest="train", action="store_true", default=True,
                      help="run the forward in train mode (the default, as training does)")
    mode.add_argument("--eval", dest="train", action="store_false", help="run the forward in eval mode")
    parser.add_argument("--trace", dest="trace", action="store_true", default=True,
                        help="record, while the step runs, the file:line of every store of a graph tensor "
                        "on the module tree (trace_stores); the default")
    parser.add_argument("--no-trace", dest="trace", action="store_false",
                        help="do not record stores while the step runs (static findings only)")
    parser.add_argument("--no-backward", dest="backward", action="store_false", default=True,
                        help="do not back-propagate after the forward")


def _error(msg: str) -> int:
    print(f"graphleaf explain: error: {msg}", file=sys.stderr)
    return EXIT_USAGE


def _user_error(what: str, exc: BaseException) -> int:
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "flake8_graphleaf" not in f.filename]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return _error(f"{what} raised {type(exc).__name__}: {exc}{where}")


def _scalar(out: Any, torch) -> Any:
    """A scalar to back-propagate: the sum of every floating tensor in ``out`` that requires grad."""
    total = None
    stack = [out]
    seen = set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, torch.Tensor):
            if x.requires_grad and (x.is_floating_point() or x.is_complex()):
                s = x.real.sum() if x.is_complex() else x.sum()
                total = s if total is None else total + s
        elif isinstance(x, dict) or (hasattr(x, "keys") and hasattr(x, "values") and callable(x.values)):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return total


def _call(model, inputs, torch):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def run(args: argparse.Namespace) -> int:
    run_argv = getattr(args, "run", None)
    if run_argv is not None and not run_argv:
        return _error("--run needs a SCRIPT: graphleaf explain --run SCRIPT [ARG ...]")
    if run_argv is not None and args.target is not None:
        return _error("give either TARGET or --run SCRIPT [ARG ...], not both")
    if run_argv is None and args.target is None:
        return _error("give a TARGET (path/to/file.py:make_model) or --run SCRIPT [ARG ...]")
    try:
        import torch  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return EXIT_USAGE
    if run_argv is not None:
        from ..runtime.script import run_script

        return run_script(run_argv[0], run_argv[1:])
    import copy

    from .. import runtime

    try:
        target = resolve_target(args.target)
        inputs_fn = None
        if args.inputs:
            inputs_fn = resolve_target(args.inputs).obj
        else:
            inputs_fn = target.sibling("make_inputs")
            if inputs_fn is not None and not callable(inputs_fn):
                inputs_fn = None
    except TargetError as exc:
        return _error(str(exc))
    if inputs_fn is None:
        where = target.spec.rpartition(":")[0]
        return _error(f"no inputs: pass --inputs TARGET, or define make_inputs() next to {target.attr} in {where}")

    try:
        model = target.obj()
    except Exception as exc:  # noqa: BLE001
        return _user_error(args.target, exc)
    if not isinstance(model, torch.nn.Module):
        return _error(f"{args.target} returned a {type(model).__name__}, not a torch.nn.Module")
    try:
        inputs = inputs_fn()
    except Exception as exc:  # noqa: BLE001
        return _user_error(args.inputs or "make_inputs", exc)

    training_step = target.sibling("training_step") if not args.inputs else None
    step_backward = target.sibling("STEP_BACKWARD") is not False  # a step that does its own backward says so
    model.train(args.train)
    trace_cm = runtime.trace_stores(model) if args.trace else None
    log = None
    mode = "train" if args.train else "eval"
    step_error = None
    how = "model(*inputs)"
    try:
        with torch.enable_grad():
            if trace_cm is not None:
                log = trace_cm.__enter__()
            try:
                if callable(training_step):
                    how = "training_step(model, inputs)"
                    loss = training_step(model, inputs)
                else:
                    loss = _scalar(_call(model, inputs, torch), torch)
                if args.backward and step_backward and isinstance(loss, torch.Tensor) and loss.requires_grad:
                    (loss if loss.dim() == 0 else loss.sum()).backward()
                    how += ", backward()"
            finally:
                if trace_cm is not None:
                    trace_cm.__exit__(None, None, None)
    except Exception as exc:  # noqa: BLE001
        from ..runtime.walk import _graph_leaf_error

        if not _graph_leaf_error(exc):
            return _user_error("the forward/backward", exc)
        step_error = exc

    if step_error is not None:
        import traceback

        from ..runtime.findings import display_path
        from ..runtime.walk import TORCH_DIR

        frames = [f for f in traceback.extract_tb(step_error.__traceback__)
                  if "flake8_graphleaf" not in f.filename and not f.filename.startswith(TORCH_DIR)
                  and os.path.basename(f.filename) != "copy.py"]
        where = f" at {display_path(frames[-1].filename)}:{frames[-1].lineno}: {frames[-1].line}" if frames else ""
        print(f"{how} itself raised the graph-leaf RuntimeError{where}")
        print("(a deepcopy inside the step reached a tensor on the autograd graph; the model is checked below)")
    print(f"ran {how} on {args.target} in {mode} mode with grad enabled")
    try:
        copy.deepcopy(model)
        error = None
    except Exception as exc:  # noqa: BLE001 - any deepcopy failure is what we report
        error = exc
    if error is None:
        print("copy.deepcopy(model): OK")
    else:
        first = str(error).split(".")[0]
        print(f"copy.deepcopy(model): {type(error).__name__}: {first}.")
    print()
    items = runtime.explain(model, trace=log, extra_files=[target.file], print_result=False)
    print(runtime.format_explanation(items))
    if error is not None and not items and not items.problems:
        print(f"\ndeepcopy failed for a reason the locator does not model: {type(error).__name__}: {error}")
    return EXIT_FAILS if error is not None or step_error is not None else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="graphleaf explain",
        description="Build a model, run one training step, and name every tensor that makes copy.deepcopy(model) "
        "raise 'Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol', "
        "with the line that stored it.",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
