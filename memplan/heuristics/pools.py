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

import time
from dataclasses import dataclass

from memplan.heuristics.greedy import check_regions
from memplan.heuristics.objects import assign_objects, lay_out
from memplan.heuristics.options import parse_options
from memplan.heuristics.order import order_units
from memplan.heuristics.units import Units
from memplan.problem import Plan, Problem
from memplan.registry import register


@dataclass(frozen=True)
class PoolOptions:
    """Options of the pool planners (the default differs per planner)."""

    prefer: str = "closest_size"  # which free block: closest_size or latest_free


def run_pool(units: Units, options: PoolOptions, planner: str, began: float) -> Plan:
    """Assign blocks in order of start time, lay them out, wrap the plan."""
    assignment = assign_objects(units, order_units(units, "start"), options.prefer)
    offsets = lay_out(units, assignment)
    return Plan.from_offsets(units.problem, offsets, planner=planner,
                             seconds=time.perf_counter() - began,
                             stats={"pool_total": sum(o.size for o in assignment.objects),
                                    "blocks": len(assignment.objects),
                                    "optional_aliases_taken": assignment.taken})


PRESETS = {"pool_by_size": PoolOptions("closest_size"),
           "pool_by_lifetime": PoolOptions("latest_free")}


def _preset(name: str, defaults: PoolOptions):
    def plan(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
             hint: Plan | None = None, **options) -> Plan:
        began = time.perf_counter()
        chosen = parse_options(name, defaults, options)
        check_regions(problem)
        return run_pool(Units.build(problem), chosen, name, began)

    plan.__name__ = name
    plan.__doc__ = (f"{name}: blocks chosen by {defaults.prefer!r} (see "
                    f"memplan.heuristics.pools). One pass, deterministic.")
    plan.options = defaults
    return register(name)(plan)


for _name, _defaults in PRESETS.items():
    _preset(_name, _defaults)
