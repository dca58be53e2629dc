"""What the order searches share: decode an order, keep the best, know when to stop.

``genetic`` and ``hill_climb`` search over placement orders; an order is
decoded by the best-fit placer (`memplan.heuristics.placement`) into a plan
whose arena size is the order's cost. `OrderSearch`:

- starts from the best greedy order (size, spatial, breadth, start, temporal, each
  decoded once, as many as the time limit allows, at least one), so a search
  never returns a plan worse than its start;
- evaluates orders, counting them and remembering the best;
- says stop at the time limit, at the iteration limit the planner counts,
  and at once when the best arena reaches the lower bound (proven optimal);
  with a ``cpu`` budget (`memplan.budget`), also once the thread has
  taken it, each decode's deadline set at the call's pace: a busy machine
  runs the same generations or steps, later, within the time limit.

Cost: one evaluation is one best-fit pass, O(E log L) (figures: BENCHMARKS.md,
"Unit costs the code quotes"); after a swap only the units from the
first swapped position on are placed again (problems without optional
aliases), about half a pass on average. Same seed, same plan, as long as
the iteration limit, not the time limit, ends the search.
"""

from __future__ import annotations

import numpy as np

from memplan.bounds import lower_bound
from memplan.budget import Budget, thread_cpu
from memplan.heuristics.order import order_units
from memplan.heuristics.placement import Placer
from memplan.heuristics.units import Units, listing_budget
from memplan.plan import Plan
from memplan.problem import Problem

START_ORDERS = ("size", "spatial", "breadth", "start", "temporal")


class OrderSearch:
    """Decoder, best-so-far and stopping rule of one search run."""

    def __init__(self, problem: Problem, clock: Budget, units: Units | None = None):
        """``clock``: the time limit (its deadline) and the CPU budget of the search,
        counted from its start."""
        self.problem, self.clock = problem, clock
        limit = clock.cpu if clock.cpu is not None or clock.deadline is None else \
            clock.deadline - clock.began
        self.units = Units.build(  # the listing's budget counts from here, in CPU seconds
            problem, deadline=clock.end(),
            cpu_deadline=listing_budget(thread_cpu(), limit)) if units is None else units
        self.placer = Placer(self.units)
        self.bound = lower_bound(problem)
        self.evaluations = 0
        self.first_member = self.units.first_member
        self.best_arena = np.iinfo(np.int64).max
        self.best_offsets: np.ndarray | None = None
        self.start_name = ""
        self.start_arena = 0
        self.cut = 0  # units the best plan's pass stacked because the time limit passed

    def evaluate(self, order: np.ndarray, parent: tuple[np.ndarray, int] | None = None
                 ) -> tuple[int, np.ndarray]:
        """(arena, offsets) of ``order`` by best fit; remembers the best.

        ``parent``: (offsets, prefix) of a decoded order that shares its first
        ``prefix`` units with this one; only the rest is placed again.
        """
        deadline = self.clock.end()
        if parent is not None and parent[1] and not self.placer.has_optional:
            offsets = self.placer.place(order, "best_fit", reuse=parent[0], prefix=parent[1],
                                        deadline=deadline)
        else:
            offsets = self.placer.place(order, "best_fit", deadline=deadline)
        tops = offsets + self.problem.sizes
        arena = int(tops.max()) if len(tops) else 0
        self.evaluations += 1
        if arena < self.best_arena:
            self.best_arena, self.best_offsets = arena, offsets
            self.cut = self.placer.cut
        return arena, offsets

    def starts(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The greedy orders decoded: ``(arena, offsets, order)``, best first."""
        found = []
        for name in START_ORDERS:
            order = order_units(self.units, name)
            arena, offsets = self.evaluate(order)
            if not found or arena < self.start_arena:
                self.start_name, self.start_arena = name, arena
            found.append((arena, offsets, order))
            if self.should_stop():
                break
        return sorted(found, key=lambda member: member[0])

    @property
    def solved(self) -> bool:
        return self.best_arena <= self.bound

    def should_stop(self) -> bool:
        return self.solved or self.clock.expired()

    def peak_swap(self, order: np.ndarray, offsets: np.ndarray, arena: int,
                  rng: np.random.Generator, explore: float = 0.0) -> tuple[np.ndarray, int]:
        """``order`` with a unit that sets the peak (or, with probability ``explore``, any
        unit) swapped with one placed before it; and how many leading units are unchanged."""
        units = self.units
        base = offsets[self.first_member] - units.rel[self.first_member]
        at_peak = np.flatnonzero((base + units.extent)[order] >= arena)
        if len(at_peak) and rng.random() >= explore:
            position = int(rng.choice(at_peak))
        else:
            position = int(rng.integers(len(order)))
        other = int(rng.integers(position)) if position else int(rng.integers(1, len(order)))
        swapped = order.copy()
        swapped[[position, other]] = swapped[[other, position]]
        return swapped, min(position, other)

    def plan(self, planner: str, stats: dict) -> Plan:
        return Plan.from_offsets(self.problem, self.best_offsets, planner=planner,
                                 seconds=self.clock.elapsed(),
                                 stats={"start": self.start_name, "start_arena": self.start_arena,
                                        "evaluations": self.evaluations, "cut": self.cut,
                                        **stats})
