"""``hill_climb``: improve the best greedy order by moving the buffers that set the peak.

Steps (a hill climb over placement orders, decoded by best fit; it steps down
now and then, by annealing's rule, so as not to stop on the first plateau: with
``temperature=0`` it never does; `memplan.heuristics.anneal` is the full
annealing search, compiled):
- start from the best greedy order (`memplan.heuristics.order_search`);
- each iteration: take a unit whose top reaches the current peak (now and
  then any unit, to leave a plateau) and swap it with a unit placed before
  it, so that it gets an earlier, lower spot;
- keep the new order when its arena is no larger; keep a larger one with
  probability ``exp(-increase / (temperature * arena))``, the temperature
  falling linearly to 0 over the iterations;
- stop at the iteration limit, the time limit (or the ``cpu`` budget, in
  CPU seconds of the thread: `memplan.heuristics.order_search`), or at once
  when the arena reaches the lower bound. The best order ever seen is returned.

Cost: one best-fit pass per iteration. Seeded: same seed and iteration
limit, same plan. Known limit: moves are blind to which swap helps; on the
hard MiniMalloc problems it closes part of the gap, not all of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memplan.budget import Budget
from memplan.errors import PairLimitError
from memplan.heuristics.order_search import OrderSearch
from memplan.heuristics.presets import pair_free_plan
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register


@dataclass(frozen=True)
class HillClimbOptions:
    """Options of ``hill_climb``."""

    iterations: int = option(1000, "orders tried after the start (the search's own limit)")
    temperature: float = option(0.005, "accept a worse arena with prob exp(-increase / (t * "
                                       "arena))")
    explore: float = option(0.2, "chance to move any unit rather than one at the peak")


DEFAULTS = HillClimbOptions()


def climb(search: OrderSearch, options: HillClimbOptions, seed: int,
          start: tuple[int, np.ndarray, np.ndarray] | None = None) -> int:
    """Run the climb from ``start`` (arena, offsets, order: a best-fit plan already
    decoded) or the search's best start; the search keeps the best. Accepted moves."""
    arena, offsets, order = start if start is not None else search.starts()[0]
    rng = np.random.default_rng(seed)
    accepted = 0
    for iteration in range(options.iterations):
        if search.should_stop() or len(order) < 2:
            break
        candidate, prefix = search.peak_swap(order, offsets, arena, rng, options.explore)
        new_arena, new_offsets = search.evaluate(candidate, (offsets, prefix))
        temperature = options.temperature * (1 - iteration / options.iterations)
        if new_arena <= arena or (temperature > 0 and rng.random() < math.exp(
                -(new_arena - arena) / (temperature * arena))):
            order, arena, offsets = candidate, new_arena, new_offsets
            accepted += 1
    return accepted


@register("hill_climb")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """A hill climb over orders (see the module doc); ``hint`` is unused."""
    chosen = parse_options("hill_climb", DEFAULTS, options)
    check_single_region(problem)
    try:
        search = OrderSearch(problem, budget)
    except PairLimitError as why:  # billions of pairs: no order can be decoded in time
        return pair_free_plan("hill_climb", problem, budget, budget.deadline, why)
    accepted = climb(search, chosen, seed)
    return search.plan("hill_climb", {"accepted": accepted})


plan.options = DEFAULTS
