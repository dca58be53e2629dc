"""Startup: Ctrl-C while memplan's command line is still importing exits quietly.

Importing numpy, OR-Tools and onnx takes about half a second; a Ctrl-C in that
window would print a KeyboardInterrupt traceback from inside some import. When
this process is the ``memplan`` command (or ``python -m memplan.<module>``),
this module, imported first by the package, sets a SIGINT handler that prints
one line and exits with 130; the command's ``main`` restores Python's default
handler once everything is imported. A library import changes nothing. It
also notes when memplan began to load (`STARTED`): a command's
``--time-limit`` counts from there, imports and reading included
(`COMMAND_STARTED`, set by `memplan.budget.command_began`; `command_left`). The
handler is set through the interpreter's built-in ``_signal`` (already loaded
at start-up): importing ``signal`` first imports ``enum`` and ``functools``,
20 ms in which a Ctrl-C would still end in a traceback.
"""

import _signal
import os
import sys
import time

STARTED, STARTED_CPU = time.perf_counter(), time.process_time()  # see the module doc
# when the command began (`memplan.budget.command_began`)
COMMAND_STARTED, COMMAND_CPU = STARTED, STARTED_CPU


def launched_as_command() -> bool:
    """Whether this process is the ``memplan`` command or ``python -m memplan.<module>``."""
    argv, orig = sys.argv, getattr(sys, "orig_argv", [])
    if argv and os.path.basename(argv[0]) in ("memplan", "memplan.exe"):
        return True
    return any(flag == "-m" and module.split(".")[0] == "memplan"
               for flag, module in zip(orig, orig[1:], strict=False))


def _interrupted_while_starting(signum, frame):  # a quiet Ctrl-C before main() runs
    sys.stderr.write("memplan: interrupted\n")
    os._exit(130)


if launched_as_command() and \
        _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)  # main() restores the default
