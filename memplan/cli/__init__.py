"""``memplan``: plan, compare, validate, describe and convert from the command line.

::

    memplan solve [MODEL ...]      heuristics, then the exact planner; a summary
                                   (several models: one arena, --exclusive or --concurrent)
    memplan compare MODEL...       every planner on every model, one table
    memplan validate PROBLEM PLAN  check a plan file against its problem
    memplan info [MODEL]           buffers, lower bound, widths, aliases, largest tensors
    memplan convert MODEL -o F     a model as a problem file (.csv or .json)
    memplan view PLAN.json         plans as one interactive HTML page
    memplan explain [MODEL]        where the peak comes from, a plan's gap, why a capacity
                                   cannot be met, and what would help (`memplan.explain`)
    memplan prove MODEL PLAN.json  run an ONNX model in one arena at that plan's offsets
                                   (a .tflite model: in TFLite-Micro, beside TFLM's planner)
    memplan sweep MODEL...         models x shapes x capacities x planners on Dask

The very top (layer 5): may import everything; nothing imports it. One module
per command (`solve`, `prove`, `compare`, `validate`, `info`, `convert`,
`explain`, `view`, `sweep`), each with ``add_command(sub, shared)`` and
``run(args)``; beside them:

- `parser`: the options several commands share, and options built from the
  options dataclasses (one option per field, its metadata help the help text);
- `checks`: every option value through the rules of `memplan.limits`, outputs
  refused before any work, one-line usage errors;
- `models`: reading a model with the model options; `outputs`: what
  ``solve`` writes; `summary`: what it prints; `progress`: the live line and
  Ctrl-C;
- `tflm_proof`: ``python -m memplan.cli.tflm_proof``, a ``.tflite`` model
  planned and proven in TFLite-Micro (no ``memplan`` command);
- `exit_codes`: 0 success; 1 infeasible, undecided in the time limit (a
  capacity neither met nor ruled out) or invalid plan; 2 bad usage or bad
  input, with one line naming the file and what is wrong (``--debug`` shows
  the traceback), its characters that do not print escaped and a very long
  one cut (`memplan.errors.printable_line`: a name from a hostile file);
  3 a defect caught; 130 interrupted: a command runs inside
  `memplan.stopping.stop_on_ctrl_c` (``args.stop``), and ends within about
  a second of Ctrl-C with what it has (``solve``: its best plan so far,
  written where asked when it fits the capacity).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings

import memplan
from memplan.budget import command_began
from memplan.cli import (
    checks,
    compare,
    convert,
    explain,
    info,
    parser,
    prove,
    solve,
    sweep,
    validate,
    view,
)
from memplan.cli.exit_codes import BAD_INPUT, FAILED, INTERNAL, INTERRUPTED, OK
from memplan.errors import (
    InvalidPlanError,
    MemplanError,
    UnsoundBoundError,
    printable_line,
)
from memplan.stopping import stop_on_ctrl_c

COMMANDS = (solve, prove, compare, validate, info, convert, explain, sweep, view)  # help order


def build_parser() -> argparse.ArgumentParser:
    """The ``memplan`` parser: one sub-command per task, options from the options records."""
    shared = parser.parents()
    top = checks.Parser(
        prog="memplan", description="Ahead-of-time memory planning for neural networks: "
        "every tensor an offset in one arena, as small as it can be, with a proof of how "
        "close to optimal.", epilog="Exit codes: 0 success, 1 infeasible, undecided within "
        "the time limit, or invalid plan, 2 bad usage or bad input, 3 a solver defect caught "
        "(please report it). 'memplan COMMAND -h' for a command's options.")
    top.add_argument("--version", action="version", version=f"memplan {memplan.__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_command(sub, shared)
    return top


def _exit_code(error: BaseException) -> int:
    """The exit code of an error a command raised (see `memplan.cli.exit_codes`)."""
    if isinstance(error, InvalidPlanError):
        return FAILED
    return INTERNAL if isinstance(error, UnsoundBoundError) else BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    """Run one ``memplan`` command; its exit code (`memplan.cli.exit_codes`)."""
    command_began()  # --time-limit counts from here (or from memplan's import)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # imports are done
    except ValueError:  # not the main thread: Ctrl-C is not ours to handle
        pass
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # bad usage (one line printed), or --help: its exit code
        return stop.code if isinstance(stop.code, int) else BAD_INPUT
    except KeyboardInterrupt:
        print("memplan: interrupted", file=sys.stderr)
        return INTERRUPTED
    try:
        with warnings.catch_warnings(), stop_on_ctrl_c() as args.stop:
            warnings.showwarning = lambda message, *_, **__: print(  # one line, the command
                f"memplan {args.command}: warning: {printable_line(message)}", file=sys.stderr)
            code = args.run(args)
        if args.stop.is_set():  # Ctrl-C: the command kept what it had (`memplan.stopping`)
            print(f"memplan {args.command}: interrupted", file=sys.stderr)
            return INTERRUPTED
        return code
    except BrokenPipeError:  # the reader went away (``memplan info ... | head``)
        sys.stdout = open(os.devnull, "w")  # Python's documented recipe
        return OK
    except (MemplanError, checks.UsageError, OSError, RecursionError, MemoryError) as error:
        if args.debug:
            raise
        if isinstance(error, RecursionError | MemoryError):
            error = checks.UsageError(f"the input is too large or too deeply nested "
                                      f"({type(error).__name__})")
        where = f"{error.filename}: " if isinstance(error, OSError) and error.filename else ""
        message = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(printable_line(f"memplan {args.command}: error: {where}{message}"),
              file=sys.stderr)
        return _exit_code(error)
    except KeyboardInterrupt:
        print(f"memplan {args.command}: interrupted before any result", file=sys.stderr)
        return INTERRUPTED


__all__ = ["build_parser", "main"]
