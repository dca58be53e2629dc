"""The one-pass planners: an order composed with a placement, one preset per name.

Each planner here is a pair (order, placement) from `memplan.heuristics.order`
and `memplan.heuristics.placement`; nothing else differs, so they share one
function and one options dataclass, and every preset can be re-composed by
its options (``plan_with("first_fit", p, order="size")``):

============================  ===========  ==========  ==================================
planner                       order        placement   what it is
============================  ===========  ==========  ==================================
``naive``                     index        stack       no reuse: the sum of the sizes
``greedy_by_size``            size         best_fit    TensorFlow Lite's offset planner
``greedy_by_breadth``         breadth      best_fit    TensorFlow Lite GPU's by breadth
``best_fit``                  spatial      best_fit    XLA's heap; ``order="temporal"`` too
``best_fit_temporal``         temporal     best_fit    ``best_fit`` with order="temporal"
``first_fit``                 start        first_fit   a runtime allocator that never plans
============================  ===========  ==========  ==================================

Steps: build the units (alias groups, the conflicting pairs), order the free
units, place pinned units then the ordered ones; best and first fit go
through the compiled kernel (`memplan.heuristics.compiled_place`, the same
plan) when it is built and the problem has no optional aliases. Cost: O(n log n + E log L)
for E conflicting pairs and L buffers live at once; 100k network-like
buffers take a few seconds. Known limit: memory regions are not planned
(every buffer goes to region 0); a problem whose buffers may not use region 0
gets a `ProblemError` rather than an invalid plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memplan.heuristics import compiled_place
from memplan.heuristics.compiled_place import compiled_offsets
from memplan.heuristics.order import order_units
from memplan.heuristics.placement import Placer
from memplan.heuristics.presets import register_preset
from memplan.heuristics.units import Units
from memplan.options import option


@dataclass(frozen=True)
class GreedyOptions:
    """Options of the one-pass planners (defaults differ per preset)."""

    order: str | Sequence[int | str] = option("size", "size, spatial, temporal, breadth, start, "
                                              "index")
    placement: str = option("best_fit", "best_fit, first_fit or stack")


PRESETS = {
    "naive": GreedyOptions("index", "stack"),
    "greedy_by_size": GreedyOptions("size", "best_fit"),
    "greedy_by_breadth": GreedyOptions("breadth", "best_fit"),
    "best_fit": GreedyOptions("spatial", "best_fit"),
    "best_fit_temporal": GreedyOptions("temporal", "best_fit"),
    "first_fit": GreedyOptions("start", "first_fit"),
}


def greedy_offsets(units: Units, options: GreedyOptions, deadline: float | None = None, *,
                   compiled: bool | None = None) -> tuple[np.ndarray, dict]:
    """Order and place ``units`` as ``options`` say: (buffer offsets, stats).

    Past ``deadline`` (a `time.perf_counter` value) the units left are stacked:
    ``stats["cut"]`` counts them (0: the pass ran to its end). ``compiled``: whether
    `compiled_place.fits` the problem, if the caller knows (None: asked here).
    """
    ordered = order_units(units, options.order)
    order = options.order if isinstance(options.order, str) else "custom"
    if compiled is None:
        compiled = compiled_place.fits(units.problem, options.placement)
    if compiled and options.placement in ("best_fit", "first_fit"):
        offsets, cut = compiled_offsets(units, ordered, options.placement, deadline)
        return offsets, {"order": order, "placement": options.placement,
                         "optional_aliases_taken": 0, "cut": cut, "compiled": True}
    if not units.has_pairs and options.placement != "stack":
        # built for the kernel or the sweep: best and first fit need the pairs (stacking
        # looks at them only for optional aliases, see `presets._needs_pairs`)
        units = Units.build(units.problem, deadline=deadline)
    placer = Placer(units)
    offsets = placer.place(ordered, options.placement, deadline=deadline)
    return offsets, {"order": order, "placement": options.placement,
                     "optional_aliases_taken": placer.taken, "cut": placer.cut}


for _name, _defaults in PRESETS.items():
    register_preset(_name, _defaults, greedy_offsets,
                    f"order {_defaults.order!r}, placement {_defaults.placement!r} "
                    f"(see memplan.heuristics.greedy)")
