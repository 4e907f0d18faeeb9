"""The ``graphleaf`` command: check, fix, rules, rule, explain, verify.

check and fix never import torch; explain and verify import their modules (which do)
only when asked for.  Exit codes: 0 nothing found, 1 findings (or, for ``fix --diff``,
changes to make), 2 a usage error or a file that could not be read or parsed.

This module only dispatches: :mod:`.options` (the parser, the settings), :mod:`.check`,
:mod:`.fixing` (fix, check --fix / --diff), :mod:`.rules` (rules, rule), :mod:`.runner` (many files,
workers, Ctrl-C); explain and verify live in :mod:`.explain` and :mod:`.verify`.
"""

from __future__ import annotations

import os
import sys

from .check import cmd_check
from .config import ConfigError
from .fixing import cmd_fix
from .options import build_parser, parse
from .rules import cmd_rule, cmd_rules


def cmd_lazy(args) -> int:
    if getattr(args, "lazy_error", None):
        sys.stderr.write(args.lazy_error + "\n")
        return 2
    return int(args.lazy_module.run(args) or 0)


COMMANDS = {"check": cmd_check, "fix": cmd_fix, "rules": cmd_rules, "rule": cmd_rule,
            "explain": cmd_lazy, "verify": cmd_lazy}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parse(parser, argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        sys.stderr.write(f"graphleaf: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("graphleaf: interrupted; every file is either as it was or fully fixed\n")
        return 130
    except BrokenPipeError:
        # stdout closed early (| head): nothing more to say.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except Exception as exc:  # noqa: BLE001 - an internal error: one line, exit 2
        if os.environ.get("GRAPHLEAF_DEBUG"):
            raise
        sys.stderr.write(f"graphleaf: internal error: {type(exc).__name__}: {exc} "
                         f"(set GRAPHLEAF_DEBUG=1 for the traceback, and please report it)\n")
        return 2


def entry() -> None:
    """The console script: :func:`main`, then the process ends at once. Every file the command
    writes is written (atomically) before main returns and the output is flushed here, so what
    is left is the interpreter freeing the run's objects one by one -- on a large tree about as
    long again as ``ruff`` takes for the whole check -- which an exiting process does not need."""
    from . import runner

    runner.RESTORE_THRESHOLDS = False  # this process ends with the command
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        code = code or 1  # the reader went away (| head): nothing more can be said
    os._exit(code)


if __name__ == "__main__":
    entry()
