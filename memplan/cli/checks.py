"""The command line's checks: option values, mistyped names, outputs, all before any work.

Every value a command takes goes through the one rule of `memplan.limits`
(time limits, worker counts, sizes with units, capacities, gaps), here turned
into argparse types, so that ``memplan solve --time-limit nan`` and
``memplan sweep --capacity 9007199254740993`` stop at once with one line and
exit 2, as a library call with the same value raises `ProblemError`.

`Parser` prints a usage error as one line (``memplan solve: error: ...``)
and suggests the closest flag or command for a mistyped one (difflib: the
argparse of Python 3.11 has no ``suggest_on_error``; an old spelling another
command still takes, `RENAMED_FLAGS`, gets its new one). It never guesses
an option from a prefix (``--heuristic`` is not ``--heuristic-time-limit``:
``allow_abbrev=False``), and reads a value that is a negative number,
``-inf`` or ``-1e3`` included, as a value, not as an option. `check_output_path`,
`check_figure_path` and `check_html_path` refuse an output that could not be
written (a missing folder, a suffix matplotlib cannot write) before any work;
a value that makes no sense only beside another is a `UsageError`.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from pathlib import Path

from memplan.budget import command_pace, command_spent
from memplan.cli.exit_codes import BAD_INPUT
from memplan.errors import ProblemError, printable_line
from memplan.limits import check_capacity, check_time_limit, check_workers, parse_gap, parse_size
from memplan.output_files import check_output
from memplan.shares import CEILING_CPU_PER_BUFFER, COMMAND_SLACK

_NO_LIMIT = ("none", "inf", "infinity", "unlimited")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$|^-(inf|infinity|nan)$",
                              re.IGNORECASE)  # a value, never an option
RENAMED_FLAGS = {"--heuristic": ("--planner", "--planners"), "--workers": ("--threads",),
                 "--out": ("-o",)}  # old spellings -> the new ones, whichever a command has
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class UsageError(Exception):
    """Bad usage the parser could not see (an option value that makes no sense)."""


# ---------------------------------------------------------------- argparse types
def _type(check, name: str, metavar: str = ""):
    """An argparse type from a `memplan.limits` check: its `ProblemError` as the message."""
    def parse(text: str):
        try:
            return check(text)
        except ProblemError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = metavar or name
    return parse


def _seconds_of(name: str, unlimited: bool):
    def check(text: str) -> float | None:
        word = text.strip().lower()
        if word in _NO_LIMIT:
            if not unlimited:
                raise ProblemError(f"{name} must be a finite number of seconds >= 0, "
                                   f"got {text!r}")
            return None
        try:
            value = float(word)
        except ValueError:
            raise ProblemError(f"{name} must be a number of seconds"
                               f"{' or none' if unlimited else ''}, got {text!r}") from None
        return check_time_limit(value, name, unlimited=unlimited)
    return check


def seconds(name: str = "time_limit", *, unlimited: bool = True):
    """An argparse type: a time limit (`memplan.limits.check_time_limit`); ``none``/``inf``
    mean no limit where ``unlimited``."""
    return _type(_seconds_of(name, unlimited), name, "seconds")


def count(name: str = "workers"):
    """An argparse type: a whole number >= 1 (`memplan.limits.check_workers`)."""
    def check(text: str) -> int:
        word = text.strip()
        return check_workers(int(word) if word.isascii() and word.lstrip("-").isdigit()
                             else text, name, default_allowed=False)
    return _type(check, name, "count")


def size(name: str = "size"):
    """An argparse type: bytes, with an optional unit (``4096``, ``512KiB``, ``1MiB``)."""
    def check(text: str) -> int:
        value = parse_size(text, name)
        if value is None:
            raise ProblemError(f"{name}: give a number of bytes, got {text!r}")
        return check_capacity(value, name)
    return _type(check, name, "size")


def capacity(name: str = "capacity"):
    """An argparse type: a capacity (`memplan.limits.check_capacity`); ``none`` for none."""
    return _type(lambda text: check_capacity(text, name), name, "capacity")


def gap(name: str = "gap"):
    """An argparse type: a gap tolerance, ``1%``, ``0.01`` or ``4KiB`` (`memplan.limits.parse_gap`),
    kept as given."""
    def check(text: str) -> str:
        parse_gap(text, name)
        return text
    return _type(check, name, "gap")


# ---------------------------------------------------------------- the parser
class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, with a close match when there is one;
    no option taken from a prefix, negative numbers read as values (see the module doc)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False  # sub-commands too: argparse builds them with this class
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER  # argparse's: "-1", "-.5" only

    def error(self, message: str):  # argparse's hook; never returns
        message = _without_repeat(message)
        unknown = _UNRECOGNIZED.match(message)
        if unknown:
            flag = unknown.group(1).split()[0].partition("=")[0]
            names = self._option_names()
            renamed = [new for new in RENAMED_FLAGS.get(flag, ()) if new in names]
            message += f"; did you mean {renamed[0]}?" if renamed else _suggest(flag, names)
        choice = _INVALID_CHOICE.search(message)
        if choice:
            words = [w.strip("'") for w in choice.group(2).split(", ")]
            message += _suggest(choice.group(1), words)
        self.exit(BAD_INPUT, printable_line(f"{self.prog}: error: {message} "
                                            f"('{self.prog} -h' for help)") + "\n")

    def _option_names(self) -> list[str]:
        return [flag for action in self._actions for flag in action.option_strings
                if action.help is not argparse.SUPPRESS]  # not an old spelling kept

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is reported by the command it was given to."""
        found, extra = self.parse_known_args(args, namespace)
        if extra:
            command = getattr(found, "command", None)
            owner = self._commands().get(command, self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return found

    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


def _without_repeat(message: str) -> str:
    """``argument --capacity: capacity: ...`` -> ``capacity: ...`` (the check names it)."""
    found = re.match(r"argument (--[\w-]+)(?:/\S+)?: ", message)
    if found:
        rest = message[found.end():]
        flag = found.group(1)
        if rest.startswith((flag, flag.lstrip("-").replace("-", "_"))):
            return rest
    return message


def _suggest(word: str, candidates: list[str]) -> str:
    """``; did you mean --time-limit?`` for the closest of ``candidates`` ('' if none)."""
    flag, _, _ = word.partition("=")
    close = difflib.get_close_matches(flag, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def negated_help(comment: str) -> str:
    """The help of ``--no-NAME``: what the flag turns off, said as such."""
    return f"do not {comment}" if comment else "turn it off"


# ---------------------------------------------------------------- outputs, before the solve
def check_output_path(path: str, option: str) -> None:
    """Refuse an output file that is a folder, or whose folder is missing or not writable
    (`memplan.output_files.check_output`)."""
    check_output(path, option)


def check_figure_path(path: str | None, option: str = "--plot") -> None:
    """Refuse a figure file matplotlib cannot write (or no matplotlib), before any work."""
    if path is None:
        return
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in ("html", "htm"):
        raise ProblemError(f"{option} draws an image (.png, .svg, .pdf); for an interactive "
                           f"page use --html", file=path)
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ProblemError(f"{option} needs matplotlib: pip install 'memplan[plot]'",
                           file=path) from None
    formats = Figure().canvas.get_supported_filetypes()
    if suffix not in formats:
        what = f"matplotlib cannot write .{suffix}" if suffix else "no suffix"
        raise ProblemError(f"{option}: {what}; use one of "
                           f"{', '.join('.' + f for f in sorted(formats))}", file=path)
    check_output_path(path, option)


def check_html_path(path: str | None, option: str = "--html") -> None:
    """Refuse an HTML output that is not ``.html``, is a folder, or whose folder is missing
    or not writable."""
    if path is None:
        return
    if Path(path).suffix.lower() not in (".html", ".htm"):
        raise ProblemError(f"{option} writes an HTML page: give a name ending in .html",
                           file=path)
    check_output_path(path, option)


def warn_beyond_limit(command: str, buffers: int, limit: float | None, work: str, *,
                      per_buffer: float | None = None, after: float = 0.0) -> None:
    """One line on stderr, before the planning, when ``--time-limit`` cannot be kept: the
    ``work`` no limit cuts (``per_buffer`` CPU seconds a buffer, default
    `CEILING_CPU_PER_BUFFER`, on the clock at the command's pace so far) and ``after`` wall
    seconds (the outputs) need more than the limit and its `COMMAND_SLACK` after the
    reading (which the limit does not cover: a command given less than the reading took
    keeps `COMMAND_LEAST_SHARE` of its limit for its work). It says how long: ``memplan
    explain: 1,000,000 buffers: reading took 14.2 s; ... need about 9.6 s more, beyond
    --time-limit 5``."""
    if limit is None or not math.isfinite(limit):
        return
    spent = command_spent()
    rate = CEILING_CPU_PER_BUFFER if per_buffer is None else per_buffer
    needed = buffers * rate * command_pace() + after
    if needed > (1 + COMMAND_SLACK) * limit:
        print(f"memplan {command}: {buffers:,} buffers: reading took {spent:.1f} s; {work} need "
              f"about {needed:.1f} s more, beyond --time-limit {limit:g}", file=sys.stderr)
