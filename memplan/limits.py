"""The numbers memplan accepts: whole numbers, never above `MAX_BYTES`.

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
from collections.abc import Sequence

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
