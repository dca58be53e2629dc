"""Orders: which unit the placer takes next (XLA's heap simulator keeps this separate).

Named orders, each a permutation of the free (not pinned) units:

- ``size``: largest extent first, ties by earlier start (TensorFlow Lite's
  greedy-by-size planner);
- ``spatial``: largest extent first, ties by longer lifetime (XLA's spatial
  best fit);
- ``temporal``: longest lifetime first, ties by larger extent (XLA's temporal
  best fit);
- ``breadth``: operators in decreasing width (bytes live at that step), and
  within an operator its units largest first; a unit goes with the widest
  operator it is live at (TensorFlow Lite GPU's greedy by breadth). Widths
  come from the problem when the frontend gave them, else from the lifetimes;
- ``start``: earliest start first, ties by larger extent (a runtime allocator);
- ``index``: the problem's own order (the naive baseline);
- a custom permutation: a sequence of buffer indices or ids; each unit goes
  where its first member appears.

All orders are sorts or a range-minimum table: O(n log n).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memplan.bounds import load_profile
from memplan.heuristics.units import Units

ORDERS = ("size", "spatial", "temporal", "breadth", "start", "index")


def _range_min(values: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """``min(values[first[i] .. last[i]])`` (inclusive) for every i: a sparse table, O(S log S)."""
    table = [values]
    while (1 << len(table)) <= len(values):
        half = 1 << (len(table) - 1)
        table.append(np.minimum(table[-1][:-half], table[-1][half:]))
    level = np.floor(np.log2(last - first + 1)).astype(np.int64)
    result = np.empty(len(first), values.dtype)
    for k in np.unique(level).tolist():
        pick = level == k
        span = 1 << k
        result[pick] = np.minimum(table[k][first[pick]], table[k][last[pick] - span + 1])
    return result


def _breadth_key(units: Units) -> np.ndarray:
    """Per unit: the rank of the widest operator (step) it is live at; 0 = the widest."""
    problem = units.problem
    if problem.widths is not None and len(problem.widths):
        times, widths = np.arange(len(problem.widths)), np.asarray(problem.widths)
    else:
        times, widths = load_profile(problem)
    rank = np.empty(len(widths), np.int64)
    rank[np.argsort(-widths, kind="stable")] = np.arange(len(widths))
    first = np.clip(np.searchsorted(times, units.start, side="right") - 1, 0, len(times) - 1)
    last = np.clip(np.searchsorted(times, units.end, side="left") - 1, first, len(times) - 1)
    return _range_min(rank, first, last)


def _custom(units: Units, permutation: Sequence[int | str]) -> np.ndarray:
    problem = units.problem
    buffers = np.array([problem.index(b) if isinstance(b, str) else int(b) for b in permutation],
                       np.int64)
    if sorted(buffers.tolist()) != list(range(len(problem))):
        raise ValueError(f"a custom order must list each of the {len(problem)} buffers once")
    seen = units.unit_of[buffers]
    _, first = np.unique(seen, return_index=True)
    ordered = seen[np.sort(first)]
    return ordered[units.pinned_base[ordered] < 0]


def order_units(units: Units, order: str | Sequence[int | str]) -> np.ndarray:
    """The free units in the order named ``order`` (see the module doc), as unit indices."""
    if not isinstance(order, str):
        return _custom(units, order)
    free = units.free
    extent, start = units.extent[free], units.start[free]
    length = units.end[free] - start
    keys = {  # np.lexsort: the last key is the primary one
        "size": (free, start, -extent),
        "spatial": (free, start, -length, -extent),
        "temporal": (free, -extent, -length),
        "start": (free, -extent, start),
        "index": (free,),
    }
    if order == "breadth":
        return free[np.lexsort((free, start, -extent, _breadth_key(units)[free]))]
    if order not in keys:
        raise ValueError(f"unknown order {order!r}; valid orders: {', '.join(ORDERS)} "
                         f"or a sequence of buffers")
    return free[np.lexsort(keys[order])]
