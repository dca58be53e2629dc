"""Presets: one registered planner per default options of a shared algorithm.

The one-pass planners are few algorithms under many names: ``greedy_by_size``
and ``first_fit`` are one order-and-place pass with other defaults,
``pool_by_size`` and ``pool_by_lifetime`` one block assignment with another
preference. `register_preset` registers such a name: it parses the options
against the preset's defaults, refuses problems the heuristics cannot plan
(`check_single_region`), runs the algorithm and wraps its offsets into a `Plan`.

A pass that needs the lists of buffers overlapping in time gets them only
when they fit memory and the time left (`memplan.heuristics.units.check_pairs`);
else the planner returns the time sweep's plan (O(n log n), no lists) with
``stats["fallback"] = "time_sweep"`` and the reason (`pair_free_plan`), so
that training steps and decoders of 100k buffers (billions of pairs) get a
valid plan within the time limit instead of a pass that never ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from memplan.bounds import lower_bound, time_overlap_count
from memplan.budget import Budget, Stopwatch
from memplan.errors import PairLimitError
from memplan.heuristics import compiled_place
from memplan.heuristics.time_sweep import sweep_offsets
from memplan.heuristics.units import Units, listing_budget
from memplan.options import parse_options
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Problem, check_single_region
from memplan.registry import register

Options = TypeVar("Options")
Algorithm = Callable[[Units, Any, float | None], tuple[np.ndarray, dict]]  # (offsets, stats)


STACK_PAIRS = 1_000_000  # stacking looks at pairs only to take optional aliases, up to this


def _needs_pairs(problem: Problem, chosen) -> bool:
    """Whether the pass needs the pair lists: stacking (naive) only for optional aliases,
    and not when there are so many pairs that their lists would cost more than they save."""
    placement = getattr(chosen, "placement", None)
    if placement is None:  # whole objects (pools, shared objects): only around pinned buffers
        return bool((problem.pinned != NO_OFFSET).any())
    if placement in ("best_fit", "first_fit") and compiled_place.fits(problem, placement):
        return False  # the compiled pass lists its pairs itself
    if placement != "stack":
        return True
    if (problem.pinned != NO_OFFSET).sum() > 1:  # pinned buffers may collide: say so
        return True
    return bool(problem.alias_optional.any()) and \
        time_overlap_count(problem.starts, problem.ends) <= STACK_PAIRS


def pair_free_plan(name: str, problem: Problem, watch: Stopwatch, deadline: float | None,
                   why: PairLimitError) -> Plan:
    """The plan of planner ``name`` (started with ``watch``, its budget) when its pair
    lists do not fit (``why``): the time sweep's, which lists no pairs, marked
    ``stats["fallback"]``, by ``deadline`` (a `time.perf_counter` value; None: none)."""
    offsets, stats = sweep_offsets(Units.build(problem, pairs=False), "best_fit", deadline)
    return Plan.from_offsets(problem, offsets, planner=name,
                             seconds=watch.elapsed(),
                             stats={**stats, "fallback": "time_sweep", "why": str(why)})


def register_preset(name: str, defaults: Options, algorithm: Algorithm, summary: str):
    """Register ``algorithm`` with ``defaults`` as the planner ``name``.

    The algorithm takes ``(units, options, deadline)`` (a `time.perf_counter`
    value or None) and keeps the deadline (cutting its pass, saying so in its
    stats), so the planner keeps its budget (wall seconds: `Budget.wall_end`).
    """

    def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
             **options) -> Plan:
        chosen = parse_options(name, defaults, options)
        check_single_region(problem)
        lower_bound(problem)  # the plan's bound (cached): its cost inside the limit, not after
        deadline = budget.wall_end()
        try:
            units = Units.build(problem, pairs=_needs_pairs(problem, chosen),
                                deadline=deadline,
                                cpu_deadline=listing_budget(budget.cpu_began, budget.seconds))
            offsets, stats = algorithm(units, chosen, deadline)
        except PairLimitError as why:
            return pair_free_plan(name, problem, budget, deadline, why)
        return Plan.from_offsets(problem, offsets, planner=name,
                                 seconds=budget.elapsed(), stats=stats)

    plan.__name__ = name
    plan.__doc__ = (f"{name}: {summary}. One pass, deterministic: seed and hint are unused; "
                    f"past its budget the units left are stacked (stats['cut']).")
    plan.options = defaults
    return register(name)(plan)
