"""The numbers memplan accepts: whole numbers, never above `MAX_BYTES`; and the one check
of each run setting (time limits, worker counts, capacities, sizes with units, gaps).

Why: every planner, bound and check computes in numpy ``int64`` (and the
exact planner in CP-SAT's int64 domains), where a sum past 2^63 wraps around
silently: a validator then calls overlapping buffers disjoint, and a bound
goes negative. Rather than compute in Python ints everywhere, memplan refuses,
at the door, any number whose sums could get there:

- every size, time, offset, alignment, alias delta and capacity is a whole
  number (``int`` or a numpy integer; never ``bool``, a float such as 8.5 or
  8.0, a string or None) with ``abs(value) <= MAX_BYTES``;
- a problem's *extent* (the sum of its buffers' largest sizes, alignments and
  absolute alias deltas, plus the highest pinned offset) is at most
  `MAX_BYTES` too, so that no plan a planner builds (buffers stacked, padding
  included) and no bound reaches past it.

``MAX_BYTES = 2^53`` (8 PiB): far beyond any accelerator's memory, exact in a
float64 (JSON readers, pandas), and with 2^10 of headroom under int64 for the
sums of a few such numbers inside planners and CP-SAT's linear constraints.

`int_column` checks a column of values in O(n) (a numpy integer array without
a Python loop); `whole` checks one scalar.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from memplan.errors import ProblemError

MAX_BYTES = 1 << 53  # the largest size, time, offset, alignment, delta or capacity accepted
_INT64 = (-(1 << 63), (1 << 63) - 1)


def describe(value) -> str:
    """A short, safe rendering of a refused value for a one-line message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problem_with(value, *, lowest: int = 0) -> str | None:
    """Why ``value`` is not an accepted whole number (None when it is)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        if isinstance(value, float | np.floating) and math.isfinite(value) \
                and float(value).is_integer():
            return f"must be a whole number (an integer, not the float {describe(value)})"
        return f"must be a whole number, got {describe(value)}"
    value = int(value)
    if value > MAX_BYTES or value < -MAX_BYTES:
        return (f"{value} is beyond the largest number memplan accepts "
                f"(2^53 = {MAX_BYTES})")
    if value < lowest:
        return f"must be >= {lowest}, got {value}"
    return None


def whole(value, what: str, *, lowest: int = 0, file: str | None = None,
          buffer: str | None = None) -> int:
    """``value`` as an int, or `ProblemError` naming ``what`` (and the file or buffer)."""
    reason = problem_with(value, lowest=lowest)
    if reason is not None:
        raise ProblemError(f"{what} {reason}", file=file, buffer=buffer)
    return int(value)


def int_column(values, what: str, ids: Sequence[str], *, file: str | None = None
               ) -> np.ndarray:
    """``values`` as a read-only int64 array, each within ``±MAX_BYTES``; O(n).

    A numpy integer array is range-checked without a Python loop; anything
    else is checked value by value, and the first bad one is named by its
    buffer id (``ids``).
    """
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu" and values.ndim == 1:
        if len(values) and (values.max() > MAX_BYTES or values.min() < -MAX_BYTES):
            bad = int(np.flatnonzero((values > MAX_BYTES) | (values < -MAX_BYTES))[0])
            _column_fail(values[bad], what, ids, bad, file)
        array = values.astype(np.int64)
    else:
        values = values.tolist() if isinstance(values, np.ndarray) else list(values)
        for i, value in enumerate(values):
            if type(value) is not int or not -MAX_BYTES <= value <= MAX_BYTES:
                if problem_with(value, lowest=-MAX_BYTES) is not None:
                    _column_fail(value, what, ids, i, file)
        array = np.array(values, dtype=np.int64)
    array.flags.writeable = False
    return array


def _column_fail(value, what: str, ids: Sequence[str], i: int, file: str | None):
    buffer = ids[i] if i < len(ids) else None
    raise ProblemError(f"{what} {problem_with(value, lowest=-MAX_BYTES)}", file=file,
                       buffer=buffer)


def check_extent(sizes: np.ndarray, alignments: np.ndarray, deltas: np.ndarray,
                 pinned_tops: np.ndarray, *, file: str | None = None) -> int:
    """The problem's extent in Python ints; `ProblemError` when above `MAX_BYTES`."""
    extent = (sum(sizes.tolist()) + sum(alignments.tolist()) + sum(abs(d) for d in
              deltas.tolist()) + max(pinned_tops.tolist(), default=0))
    if extent > MAX_BYTES:
        raise ProblemError(f"the buffers need up to {extent} bytes together (sizes, alignments, "
                           f"alias deltas and the highest pinned offset), beyond the largest "
                           f"arena memplan plans (2^53 = {MAX_BYTES})", file=file)
    return extent


# ------------------------------------------------------------- run settings
# One rule for each setting that every entry point takes (the CLI's commands, `memplan.solve`,
# `plan_with`, sweeps, explain, reorder, the ExecuTorch pass): checked here, nowhere else.
_NO_LIMIT = ("none", "inf", "infinity", "unlimited")
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e(?P<exponent>[+-]?[0-9]+))?"
                   r"\s*(?P<unit>[a-z]*)")
SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
              "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12,
              "tib": 2**40}  # case-insensitive: 1MiB = 1 mib = 1048576 bytes, 1MB = 10^6


def check_time_limit(value, name: str = "time_limit", *, unlimited: bool = True
                     ) -> float | None:
    """A time limit in seconds: a number >= 0; None or infinity mean no limit (None).

    `ProblemError` naming ``name`` for NaN, a negative number, a bool, a string, or no limit
    where ``unlimited`` is False (the searches that need a deadline: explain, reorder).
    """
    if value is None or (isinstance(value, float | np.floating) and math.isinf(value)
                         and value > 0):
        if unlimited:
            return None
        raise ProblemError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer |
                                                             np.floating):
        raise ProblemError(f"{name} must be a number of seconds, got {describe(value)}")
    if math.isnan(value) or value < 0:
        raise ProblemError(f"{name} must be a number of seconds >= 0"
                           f"{' (or none for no limit)' if unlimited else ''}, got {value!r}")
    return float(value)


def check_workers(value, name: str = "workers", *, default_allowed: bool = True) -> int | None:
    """A count of threads or processes: a whole number >= 1; None (the default) when
    ``default_allowed``. `ProblemError` naming ``name`` otherwise (0, -3, 1.5, 'two')."""
    if value is None and default_allowed:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) \
            or value < 1:
        raise ProblemError(f"{name} must be a whole number >= 1, got {describe(value)}")
    return int(value)


def check_seed(value, name: str = "seed") -> int:
    """A random seed: a whole number (a numpy integer too, as a Python int: the compiled
    kernels take only those); `ProblemError` naming ``name`` otherwise (1.5, '3', True)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ProblemError(f"{name} must be a whole number, got {describe(value)}")
    return int(value)


def check_capacity(value, name: str = "capacity") -> int | None:
    """A capacity in bytes: None (no capacity), a whole number 1 .. 2^53, or a size text
    (`parse_size`: ``"1MiB"``, ``"512KiB"``, ``"4096"``). `ProblemError` naming ``name``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_size(value, name)
        if value is None:
            return None
    return whole(value, name, lowest=1)


def parse_size(text: str, name: str = "size") -> int | None:
    """Bytes from a text: ``4096``, ``1MiB`` (2^20), ``512KiB``, ``2MB`` (10^6), ``1.5KiB``;
    ``none``/``inf`` give None. ASCII digits only; the bytes must come out whole and at most
    2^53 (computed exactly: ``9007199254740993`` is refused, not rounded)."""
    word = text.strip().lower().replace(" ", "") if isinstance(text, str) else None
    if word in _NO_LIMIT:
        return None
    found = _SIZE.fullmatch(word) if word and word.isascii() else None
    if found is None or found["unit"] not in SIZE_UNITS:
        raise ProblemError(f"{name}: not a memory size: {describe(text)} (bytes, or with a "
                           f"unit: 512KiB, 1MiB, 2MB; or none)")
    exponent = max(int(found["exponent"] or 0), -40)  # 1e-40 bytes is no whole number either
    if exponent > 20:  # beyond 2^53 whatever the digits; no huge power computed
        raise ProblemError(f"{name}: {text.strip()} is beyond the largest size memplan "
                           f"accepts (2^53 = {MAX_BYTES} bytes)")
    value = Fraction(found["number"]) * Fraction(10) ** exponent * SIZE_UNITS[found["unit"]]
    if value.denominator != 1:
        raise ProblemError(f"{name}: {text.strip()} is not a whole number of bytes")
    if value > MAX_BYTES:
        shown = text.strip() if text.strip() == str(int(value)) else \
            f"{text.strip()} = {int(value)} bytes"
        raise ProblemError(f"{name}: {shown} is beyond the largest size memplan accepts "
                           f"(2^53 = {MAX_BYTES})")
    return int(value)


def parse_gap(value, name: str = "gap") -> tuple[float, int]:
    """A gap tolerance as ``(relative, absolute)``: ``"1%"``, ``"0.01"`` or the float ``0.01``
    -> (0.01, 0); bytes take a unit, or come as an int: ``"4KiB"``, ``"4096B"``, ``4096`` ->
    (0.0, 4096). A relative gap is a share in [0, 1)."""
    text = str(value).strip().lower() if isinstance(value, str | int | float) and \
        not isinstance(value, bool) else None
    if text is None:
        raise ProblemError(f"{name}: not a gap: {describe(value)} (1%, 0.01, or bytes: 4KiB)")
    if text.endswith("%") or (not isinstance(value, int) and not text[-1:].isalpha()):
        percent = text.endswith("%")
        try:
            share = float(text.rstrip("%")) / (100 if percent else 1)
        except ValueError:
            share = math.nan
        if not 0 <= share < 1:
            raise ProblemError(f"{name}: a relative gap is a share in [0, 1) (like 0.01 or "
                               f"1%; bytes take a unit: 4096B, 4KiB), got {describe(value)}")
        return share, 0
    return 0.0, parse_size(text if isinstance(value, str) else str(value), name) or 0
