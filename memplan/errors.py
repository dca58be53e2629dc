"""The small tree of memplan's exceptions.

Every failure names what it is about (file, line, buffer, tensor), so that a
user can find it without a traceback::

    MemplanError
    ├── ProblemError (ValueError)        bad input: a file, a buffer, an alias
    ├── UnknownPlannerError (KeyError)   a planner name nobody registered
    ├── InvalidPlanError (ValueError)    a plan that breaks its problem
    ├── NoPlanError (RuntimeError)       a planner ended without any plan
    ├── PairLimitError (RuntimeError)    pair lists too large for memory or the time left
    ├── UnsoundBoundError (RuntimeError) a proven bound above a valid plan: a solver defect
    └── MissingExtraError (ImportError)  an optional dependency that is not installed

and one warning, `HintWarning`: a planner's hint that is no valid layout of its problem
was set aside (the plan is made as without one). `renamed` keeps an old public name
working for one release, with a `DeprecationWarning`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager


class MemplanError(Exception):
    """Base of every error memplan raises on purpose."""


class ProblemError(MemplanError, ValueError):
    """Bad input: a malformed file or row, or a buffer, alias or field that is wrong.

    The message starts with where the problem is: ``file:line``, the buffer id
    or the tensor name, then what is wrong with it.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 buffer: str | None = None):
        where = []
        if file is not None:
            where.append(f"{file}:{line}" if line is not None else str(file))
        if buffer is not None:
            where.append(f"buffer {buffer!r}")
        message = one_line(message)  # what a library wrapped (ONNX's checker) may span lines
        super().__init__(": ".join([*where, message]) if where else message)
        self.reason = message
        self.file = file
        self.line = line
        self.buffer = buffer


def one_line(text: str) -> str:
    """``text`` with its line breaks (and the blanks around them) made one space."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()


LONGEST_LINE = 2000  # characters of a message printed on a terminal; the middle is cut


def printable_line(text: str, longest: int = LONGEST_LINE) -> str:
    """``text`` as one line safe to print on a terminal: line breaks one space, every other
    character that does not print escaped (``\\x1b``, ``\\u2028``; a byte no codec read
    as ``\\xff``), and cut in the middle past ``longest`` characters, so that a name
    from a hostile file can neither drive the terminal nor flood it."""
    line = "".join(_escaped(ch) for ch in one_line(text))
    if len(line) <= longest:
        return line
    head, tail = longest * 2 // 3, longest // 3
    return f"{line[:head]} [... {len(line) - head - tail} characters cut ...] {line[-tail:]}"


def _escaped(ch: str) -> str:
    if ch.isprintable():
        return ch
    if "\udc80" <= ch <= "\udcff":  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return ch.encode("unicode_escape").decode("ascii")


@contextmanager
def naming(file: str | None) -> Iterator[None]:
    """A `ProblemError` raised inside that names no file gets ``file`` (work on a model
    already parsed, whose frontend no longer knows where it came from)."""
    try:
        yield
    except ProblemError as error:
        if error.file is not None or file is None or str(error).startswith(f"{file}:"):
            raise
        raise ProblemError(str(error), file=file) from None


class UnknownPlannerError(MemplanError, KeyError):
    """A planner name that is not registered; the message lists the valid ones."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0])


class InvalidPlanError(MemplanError, ValueError):
    """A plan that breaks its problem; ``violations`` lists what the validator found."""

    def __init__(self, violations):
        self.violations = list(violations)
        shown = "; ".join(str(v) for v in self.violations[:5])
        more = f" (and {len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(f"invalid plan: {shown}{more}")


class NoPlanError(MemplanError, RuntimeError):
    """A planner stopped (time limit, interrupt) before it had any plan at all."""


class PairLimitError(MemplanError, RuntimeError):
    """The pairs of buffers that overlap in time are too many to list: more than memplan
    holds in memory, or more than the time left allows (`memplan.heuristics.units`).
    Planners that need the lists catch it and plan without them, saying so in stats."""


class UnsoundBoundError(MemplanError, RuntimeError):
    """A bound the exact planner proved lies above the arena of a valid plan it has seen.

    No plan can beat a true lower bound, so this is a defect inside the solver
    (a wrong bound), never a result: it is raised, not turned into a status.
    """


class MissingExtraError(MemplanError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


class HintWarning(UserWarning):
    """A planner's ``hint`` is no valid layout of its problem (another problem's plan,
    overlapping buffers): set aside, the planner runs as without one
    (``stats["hint_rejected"]``)."""


def require(module: str, extra: str, purpose: str):
    """``module``, imported; or `MissingExtraError`: ``purpose`` needs ``memplan[extra]``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"{purpose} needs {module.split('.')[0]}, which is not "
                                f"installed: pip install 'memplan[{extra}]'") from None


def renamed(module: str, names: dict[str, str]):
    """A module's ``__getattr__`` that keeps its old ``names`` working for one release:
    each old name gives the object its new one names (``"new"`` in ``module``, or
    ``"package.module.new"``) with one `DeprecationWarning` line."""
    import importlib
    import warnings

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, _, new = names[name].rpartition(".")
        warnings.warn(f"{module}.{name} is deprecated: use {names[name] if where else new}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(where or module), new)

    return __getattr__


def renamed_keyword(old: str, old_value, new: str, new_value, where: str = ""):
    """The value of keyword ``new``, or of its old spelling ``old`` (kept for one release,
    with one `DeprecationWarning` line); `ProblemError` when both are given. ``where``: the
    call that takes them, for the message."""
    if old_value is None:
        return new_value
    call = f"{where}({old}=...)" if where else f"{old}="
    if new_value is not None:
        raise ProblemError(f"{call} is the old name of {new}=: give {new}= only")
    import warnings

    warnings.warn(f"{call} is deprecated: use {new}=", DeprecationWarning, stacklevel=3)
    return old_value
