"""``shared_objects``: buffers share whole objects (GPU textures), minimising their total size.

For back ends that cannot place a buffer at an offset: each buffer goes into
an object, no two buffers of one object live at the same time, and each
object is as large as its largest member; the goal is the smallest total
object size (TensorFlow Lite GPU's greedy-by-size shared objects).

Steps:
- units (alias groups) in decreasing size;
- each joins the smallest object that is free for its whole lifetime (every
  existing object is at least as large, since larger units came first), else
  opens a new object of its size;
- the objects are laid out one above another, so the arena is the total.

``stats``: ``objects`` (how many), ``object_total`` (their total size) and
``objects_needed``: the most units live at once, which no assignment can go
below. Cost: O(n * c) for c objects tried per unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.heuristics.objects import assign_objects, lay_out, object_sizes
from memplan.heuristics.order import order_units
from memplan.heuristics.presets import register_preset
from memplan.heuristics.units import Units


@dataclass(frozen=True)
class SharedObjectsOptions:
    """``shared_objects`` has no options: one rule, deterministic."""


def most_live(units: Units) -> int:
    """The most units live at one step (ends before starts: half-open); O(n log n)."""
    times = np.concatenate([units.start, units.end])
    change = np.concatenate([np.ones(len(units), np.int64), -np.ones(len(units), np.int64)])
    order = np.lexsort((change, times))
    return int(np.cumsum(change[order]).max()) if len(units) else 0


def object_offsets(units: Units, options: SharedObjectsOptions,
                   deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """Objects by greedy size, laid out one above another: (offsets, stats); past
    ``deadline`` the units left get objects of their own (``stats["cut"]``)."""
    assignment = assign_objects(units, order_units(units, "size"), "closest_size", deadline)
    sizes = object_sizes(units, assignment)
    return lay_out(units, assignment), {"objects": len(sizes), "object_total": sum(sizes),
                                        "objects_needed": most_live(units),
                                        "optional_aliases_taken": assignment.taken,
                                        "cut": assignment.cut}


register_preset("shared_objects", SharedObjectsOptions(), object_offsets,
                "objects by greedy size (see memplan.heuristics.shared_objects)")
