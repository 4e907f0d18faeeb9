"""``graphleaf verify``: the command line of :mod:`flake8_graphleaf.runtime.verify`.

Parses the arguments and prints the report; the work is the runtime's.  torch is imported only
inside :func:`run`, so ``graphleaf --help`` works without it."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from ..runtime.targets import TargetError, resolve_target
from ..runtime.verify import (
    CUDA_ATOL,
    CUDA_RTOL,
    SEED,
    Result,
    Spec,
    UsageError,
    collect_fixtures,
    fixture_spec,
    format_table,
    payload,
    verify_one,
    write_junit,
)

INSTALL_HINT = "graphleaf verify needs torch: pip install 'flake8-graphleaf[verify]' (or pip install torch)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("fixtures", nargs="*", metavar="FIXTURES",
                        help="fixture files or folders (default: fixtures/models/)")
    parser.add_argument("--device", default=None,
                        help="comma-separated devices, e.g. cpu,cuda (default: cpu, and cuda when available)")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply and verify unsafe fixes")
    parser.add_argument("--model", metavar="TARGET",
                        help="verify a model of yours: package.module:callable or path/to/file.py:callable")
    parser.add_argument("--inputs", metavar="TARGET",
                        help="callable returning the model's inputs (default: make_inputs next to --model)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--junit-xml", metavar="FILE", help="write the results as JUnit XML")


def _devices(arg: str | None, out) -> list[str]:
    import torch

    if arg is None:
        if torch.cuda.is_available():
            return ["cpu", "cuda"]
        print("cuda: not available, skipped", file=out)
        return ["cpu"]
    devices = [d.strip() for d in arg.split(",") if d.strip()]
    for d in devices:
        if d.startswith("cuda"):
            if not torch.cuda.is_available():
                raise UsageError(f"graphleaf verify: --device {d}: CUDA is not available here (torch.cuda.is_available() is False)")
        elif d != "cpu":
            raise UsageError(f"graphleaf verify: unknown device {d!r} (use cpu, cuda or cuda:N)")
    return devices


def _user_spec(args) -> Spec:

    try:
        target = resolve_target(args.model)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    path = target.file if target.file and target.file.endswith(".py") else None
    spec = Spec(name=args.model, path=path, model_attr=target.attr, user=True, expect_crash=None,
                step_attr="training_step")
    if args.inputs:
        try:
            spec.inputs_callable = resolve_target(args.inputs).obj
        except TargetError as exc:
            raise UsageError(str(exc)) from None
    elif target.sibling("make_inputs") is None:
        raise UsageError(f"graphleaf verify: --inputs TARGET is needed ({args.model}'s module has no make_inputs)")
    spec.module = target.module
    return spec


def run(args) -> int:
    out = sys.stdout
    try:
        import torch
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    try:
        devices = _devices(args.device, out)
        if args.model:
            specs = [_user_spec(args)]
        else:
            if args.inputs:
                raise UsageError("graphleaf verify: --inputs only goes with --model")
            specs = [fixture_spec(p) for p in collect_fixtures(args.fixtures)]
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    header = [f"graphleaf verify: torch {torch.__version__}, seed {SEED}, devices {', '.join(devices)}"
              + (", unsafe fixes on" if args.unsafe_fixes else "")]
    if "cpu" in devices:
        header.append("cpu: bitwise comparison, torch.use_deterministic_algorithms(True)")
    if any(d.startswith("cuda") for d in devices):
        header.append(f"cuda: bitwise where deterministic, else within rtol={CUDA_RTOL} atol={CUDA_ATOL} (reported per run)")
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="graphleaf-verify-") as work:
        for spec in specs:
            for device in devices:
                results.append(verify_one(spec, device, args.unsafe_fixes, work))
    print(format_table(results, header), file=out)
    doc = payload(results, devices, args.unsafe_fixes)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
    if args.junit_xml:
        write_junit(results, args.junit_xml)
    return 0 if doc["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphleaf verify", description="Run each fixture (or your model) before and after its fix and compare outputs and gradients bitwise.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
