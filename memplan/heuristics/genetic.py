"""``genetic``: a population of placement orders, bred by order crossover and mutation.

Steps (each order decoded by best fit, its arena its cost):
- the first population: the greedy orders (size, spatial, breadth, start, temporal)
  and mutants of the best of them;
- each generation keeps the ``elite`` best orders and breeds the rest: two
  parents by tournament, a child by order crossover (a slice of one parent,
  the other units in the other parent's order), then with probability
  ``mutation`` a swap of a unit at the peak with one placed before it;
- stop after ``generations``, at the time limit (or the ``cpu`` budget, in
  CPU seconds of the thread: `memplan.heuristics.order_search`), or at once
  when an arena reaches the lower bound. The best order ever seen is returned, so the plan
  is never worse than the best greedy one it started from.

Cost: ``population`` best-fit passes per generation. Seeded: same seed and
limits, same plan (unless the time limit cuts the run).
"""

from __future__ import annotations

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
class GeneticOptions:
    """Options of ``genetic``."""

    generations: int = option(40, "generations bred after the first population")
    population: int = option(16, "orders per generation")
    elite: int = option(2, "best orders carried over unchanged")
    tournament: int = option(3, "orders drawn to pick each parent")
    mutation: float = option(0.5, "chance a child gets a peak swap")


DEFAULTS = GeneticOptions()


def crossover(first: np.ndarray, second: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Order crossover: ``first[i:j]`` kept in place, the rest in ``second``'s order."""
    i, j = np.sort(rng.integers(0, len(first) + 1, size=2))
    rest = second[~np.isin(second, first[i:j])]
    return np.concatenate([rest[:i], first[i:j], rest[i:]])


@register("genetic")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """A genetic search over orders (see the module doc); ``hint`` is unused."""
    chosen = parse_options("genetic", DEFAULTS, options)
    if chosen.population < 2 or not 0 <= chosen.elite < chosen.population:
        raise ValueError("genetic needs population >= 2 and 0 <= elite < population")
    check_single_region(problem)
    try:
        search = OrderSearch(problem, budget)
    except PairLimitError as why:  # billions of pairs: no order can be decoded in time
        return pair_free_plan("genetic", problem, budget, budget.deadline, why)
    rng = np.random.default_rng(seed)
    population = search.starts()  # (arena, offsets, order), best first
    if len(population[0][2]) < 2:
        return search.plan("genetic", {"generations": 0})
    while len(population) < chosen.population and not search.should_stop():
        arena, offsets, order = population[0]
        child, prefix = search.peak_swap(order, offsets, arena, rng)
        population.append((*search.evaluate(child, (offsets, prefix)), child))
    generation = 0
    while generation < chosen.generations and not search.should_stop():
        generation += 1
        population.sort(key=lambda member: member[0])
        bred = population[:chosen.elite]
        while len(bred) < chosen.population and not search.should_stop():
            parents = []
            for _ in range(2):
                drawn = rng.choice(len(population), size=chosen.tournament)
                parents.append(population[int(drawn.min())])  # sorted: lowest index is best
            child = crossover(parents[0][2], parents[1][2], rng)
            arena, offsets = search.evaluate(child)
            if rng.random() < chosen.mutation:
                child, prefix = search.peak_swap(child, offsets, arena, rng)
                arena, offsets = search.evaluate(child, (offsets, prefix))
            bred.append((arena, offsets, child))
        population = bred
    return search.plan("genetic", {"generations": generation})


plan.options = DEFAULTS
