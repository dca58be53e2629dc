"""Buffer pools: ``pool_by_size`` and ``pool_by_lifetime`` (reusable blocks, no offsets).

A pool allocator hands each tensor a whole free block and takes it back when
the tensor dies; it never splits or merges blocks. Planning ahead only
decides which free block a tensor takes:

- ``pool_by_size``: the free block whose size is closest above its own;
- ``pool_by_lifetime``: the free block whose previous user died last (the
  warmest block, as a caching allocator's free list gives it back);

else a new block as large as the tensor. Tensors come in order of start
time, as the program runs. The blocks are then laid out one above another
(`memplan.heuristics.objects`); the plan reports the pool's total
(``stats["pool_total"]``) and its number of blocks (``stats["blocks"]``).

Cost: O(n * b) for b blocks tried per tensor. Known limit: a block never
grows, so a large tensor that comes late gets a new block even when a small
block is free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.heuristics.objects import assign_objects, lay_out, object_sizes
from memplan.heuristics.order import order_units
from memplan.heuristics.presets import register_preset
from memplan.heuristics.units import Units
from memplan.options import option


@dataclass(frozen=True)
class PoolOptions:
    """Options of the pool planners (the default differs per planner)."""

    prefer: str = option("closest_size", "which free block: closest_size or latest_free")


def pool_offsets(units: Units, options: PoolOptions,
                 deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """Assign blocks in order of start time and lay them out: (offsets, stats); past
    ``deadline`` the tensors left get blocks of their own (``stats["cut"]``)."""
    assignment = assign_objects(units, order_units(units, "start"), options.prefer, deadline)
    sizes = object_sizes(units, assignment)
    return lay_out(units, assignment), {"pool_total": sum(sizes), "blocks": len(sizes),
                                        "optional_aliases_taken": assignment.taken,
                                        "cut": assignment.cut}


PRESETS = {"pool_by_size": PoolOptions("closest_size"),
           "pool_by_lifetime": PoolOptions("latest_free")}

for _name, _defaults in PRESETS.items():
    register_preset(_name, _defaults, pool_offsets,
                    f"blocks chosen by {_defaults.prefer!r} (see memplan.heuristics.pools)")
