"""``best``: run the fast heuristics and keep the smallest valid plan (XLA's ChooseBestHeap).

Steps:
- build the units once and run every fast planner on them (the one-pass
  presets and the pools), within ``time_limit`` if one is given (the first
  always runs);
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
from memplan.heuristics.greedy import PRESETS, check_regions, run_greedy
from memplan.heuristics.options import parse_options
from memplan.heuristics.units import Units
from memplan.problem import Plan, Problem
from memplan.registry import register
from memplan.validate import validate


@dataclass(frozen=True)
class BestOptions:
    """Options of ``best``."""

    candidates: tuple[str, ...] = ("greedy_by_size", "greedy_by_breadth", "best_fit",
                                   "best_fit_temporal", "first_fit")  # planners to run


DEFAULTS = BestOptions()


def _run(name: str, units: Units) -> Plan:
    return run_greedy(units, PRESETS[name], name, time.perf_counter())


@register("best")
def plan(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
         hint: Plan | None = None, **options) -> Plan:
    """The smallest valid plan of the fast heuristics (see the module doc)."""
    began = time.perf_counter()
    chosen = parse_options("best", DEFAULTS, options)
    check_regions(problem)
    units = Units.build(problem)
    plans: list[Plan] = []
    for name in chosen.candidates:
        if plans and time_limit is not None and time.perf_counter() - began > time_limit:
            break
        plans.append(_run(name, units))
    arenas = {p.planner: p.arena_size for p in plans}
    for candidate in sorted(plans, key=lambda p: p.arena_size):
        if not [v for v in validate(problem, candidate) if v.kind != "capacity"]:
            stats = {"winner": candidate.planner, "arenas": arenas, **candidate.stats}
            return Plan.from_offsets(problem, candidate.offsets, planner="best",
                                     seconds=time.perf_counter() - began, stats=stats)
    raise NoPlanError(f"no heuristic found a valid plan for {problem.name or 'the problem'}; "
                      f"arenas tried: {arenas}")


plan.options = DEFAULTS
