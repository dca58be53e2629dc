"""``best``: run the fast heuristics and keep the smallest valid plan (XLA's ChooseBestHeap).

Steps:
- build the units once and run every composition of the fast orders (size,
  spatial, breadth, start, temporal) with both placements (best fit, first
  fit): ten one-pass plans, the registered presets among them, most useful
  first, within ``time_limit`` if one is given (the first always runs). No
  one composition wins everywhere: first fit beats best fit on half of the
  MiniMalloc problems, start order wins some, breadth wins on large networks;
- keep the plans from the smallest arena up, and return the first that the
  independent validator accepts (a planner bug costs a candidate, never an
  invalid plan); its name goes to ``stats["winner"]``, every candidate's arena
  to ``stats["arenas"]``.

The exact solver takes this plan as its warm start. Cost: the sum of the
candidates (a few times one greedy pass) plus one validation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from memplan.errors import NoPlanError
from memplan.heuristics.greedy import PRESETS, GreedyOptions, greedy_offsets
from memplan.heuristics.hill_climb import HillClimbOptions, climb
from memplan.heuristics.order_search import OrderSearch
from memplan.heuristics.units import Units
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register
from memplan.validate import validate

ORDERS = ("size", "breadth", "spatial", "start", "temporal")


@dataclass(frozen=True)
class BestOptions:
    """Options of ``best``."""

    orders: tuple[str, ...] = option(ORDERS, "orders to try, each with every placement")
    placements: tuple[str, ...] = option(("best_fit", "first_fit"), "placements to try")
    search_iterations: int = option(100, "then hill climbing, unless a plan already meets the "
                                         "bound")
    search_max_buffers: int = option(5000, "... and only on problems up to this many buffers")


DEFAULTS = BestOptions()


def candidates(options: BestOptions) -> list[tuple[str, GreedyOptions]]:
    """(name, options) of each composition to try, named after its preset when it has one."""
    names = {preset: name for name, preset in PRESETS.items()}
    found = []
    for order in options.orders:
        for placement in options.placements:
            composition = GreedyOptions(order, placement)
            found.append((names.get(composition, f"best_fit(order={order!r}, "
                                                 f"placement={placement!r})"), composition))
    return found


@register("best")
def plan(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
         hint: Plan | None = None, **options) -> Plan:
    """The smallest valid plan of the fast heuristics (see the module doc)."""
    began = time.perf_counter()
    chosen = parse_options("best", DEFAULTS, options)
    check_single_region(problem)
    units = Units.build(problem)
    tried = []  # (arena, name, offsets, stats)
    for name, composition in candidates(chosen):
        if tried and time_limit is not None and time.perf_counter() - began > time_limit:
            break
        offsets, stats = greedy_offsets(units, composition)
        tried.append((int((offsets + problem.sizes).max(initial=0)), name, offsets, stats))
    left = None if time_limit is None else time_limit - (time.perf_counter() - began)
    if (0 < len(problem) <= chosen.search_max_buffers and chosen.search_iterations > 0
            and (left is None or left > 0)):
        search = OrderSearch(problem, left, time.perf_counter(), units)
        if min(arena for arena, _, _, _ in tried) > search.bound:
            climb(search, HillClimbOptions(iterations=chosen.search_iterations), seed)
            tried.append((search.best_arena, "hill_climb", search.best_offsets,
                          {"evaluations": search.evaluations}))
    arenas = {name: arena for arena, name, _, _ in tried}
    for arena, name, offsets, stats in sorted(tried, key=lambda t: t[0]):
        draft = Plan(offsets, arena, 0, "unknown", 0, name)  # the bound comes once, below
        if not [v for v in validate(problem, draft) if v.kind != "capacity"]:
            return Plan.from_offsets(problem, offsets, planner="best",
                                     seconds=time.perf_counter() - began,
                                     stats={"winner": name, "arenas": arenas, **stats})
    raise NoPlanError(f"no heuristic found a valid plan for {problem.name or 'the problem'}; "
                      f"arenas tried: {arenas}")


plan.options = DEFAULTS
