"""`Plan`: an offset for every buffer of a `Problem`, and what its planner proved.

A plan is the answer every planner gives; it sits above `memplan.bounds`
because wrapping offsets into a plan derives its status from the problem's
lower bound (``optimal`` when the arena meets a proven bound). Every planner
decides a plan's status with `plan_status` and compares plans with
`plan_rank`, so "optimal" and "better" mean one thing across the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from memplan.bounds import lower_bound
from memplan.problem import Problem

Status = Literal["optimal", "feasible", "infeasible", "unknown"]
STATUSES: tuple[str, ...] = ("optimal", "feasible", "infeasible", "unknown")


@dataclass
class Plan:
    """An offset for every buffer of a problem, and what the planner knows about it.

    ``arena_size`` is ``max(offset + size)``; ``lower_bound`` is the problem's
    bound (`memplan.bounds.lower_bound`); ``best_bound`` is the best bound the
    planner *proved* for the optimum (the lower bound, or higher after an exact
    search). ``status``: ``optimal`` (arena_size == best_bound), ``feasible``
    (a valid plan; ``gap`` says how far from proven), ``infeasible`` (no plan
    within the capacity was found; proven only when ``best_bound`` exceeds the
    capacity), ``unknown``.
    """

    offsets: np.ndarray
    arena_size: int
    lower_bound: int
    status: Status
    best_bound: int
    planner: str
    seconds: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    regions: np.ndarray | None = None  # region index per buffer, when the problem has regions
    sizes: np.ndarray | None = None  # granted sizes, when variable-size scratch was grown

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; valid: {', '.join(STATUSES)}")
        self.offsets = np.asarray(self.offsets, dtype=np.int64)

    @classmethod
    def from_offsets(cls, problem: Problem, offsets, *, planner: str, seconds: float = 0.0,
                     best_bound: int | None = None, stats: dict[str, Any] | None = None,
                     regions=None, sizes=None) -> Plan:
        """Wrap offsets into a plan: arena size, bound and status derived; O(n)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        used = problem.sizes if sizes is None else np.asarray(sizes, dtype=np.int64)
        arena = int((offsets + used).max()) if len(problem) else 0
        bound = lower_bound(problem)
        proven = max(bound, best_bound or 0)
        capacity = problem.capacity
        if regions is None and problem.regions and problem.regions[0].capacity is not None:
            region = problem.regions[0].capacity  # one arena: everything in region 0
            capacity = region if capacity is None else min(capacity, region)
        status = plan_status(arena, proven, fits=capacity is None or arena <= capacity)
        return cls(offsets, arena, bound, status, proven, planner, seconds, dict(stats or {}),
                   None if regions is None else np.asarray(regions, dtype=np.int64),
                   None if sizes is None else used)

    @property
    def gap(self) -> float:
        """``(arena_size - best_bound) / arena_size`` (`gap_of`): 0 when proven optimal."""
        return gap_of(self.arena_size, self.best_bound)

    def offset_of(self, problem: Problem, id: str) -> int:
        """The offset of the buffer named ``id`` (``problem`` maps names to positions)."""
        return int(self.offsets[problem.index(id)])

    def __repr__(self) -> str:
        return (f"<Plan {self.planner}: arena {self.arena_size}, lower bound {self.lower_bound}, "
                f"{self.status}, gap {self.gap:.2%}, {self.seconds:.3f} s>")


def gap_of(arena: int, bound: int) -> float:
    """The gap of an arena over a bound, the one definition memplan uses everywhere:
    ``(arena - bound) / arena``, the share of the arena that may be waste (CP-SAT's relative
    gap); 0 when the arena meets the bound (or both are 0), never negative."""
    return max(arena - bound, 0) / arena if arena > 0 else 0.0


def plan_status(value: float, bound: float, *, fits: bool = True, proven_infeasible: bool = False,
                searched: bool = False) -> Status:
    """The status of a plan whose objective (arena bytes, or a region plan's cost) is
    ``value``, given the best proven lower ``bound`` on that objective.

    - ``infeasible``: no layout fits (``proven_infeasible``), or the plan does
      not ``fit`` the capacity and came from a planner that does not search
      for a proof (a heuristic gives up at once);
    - ``unknown``: the plan does not fit, and a ``searched`` (exact) planner
      ran out of time before finding a fitting plan or a proof;
    - ``optimal`` when ``value`` reaches ``bound``, else ``feasible``.
    """
    if proven_infeasible:
        return "infeasible"
    if not fits:
        return "unknown" if searched else "infeasible"
    return "optimal" if value <= bound else "feasible"


def fits(plan: Plan) -> bool:
    """Whether ``plan`` is usable: within the capacity (``infeasible`` and ``unknown`` are not)."""
    return plan.status in ("optimal", "feasible")


def plan_rank(problem: Problem, plan: Plan, *, cost: float = 0.0) -> tuple[bool, float, int, int]:
    """Plans of ``problem`` compare by this, lower is better: a plan that `fits` first,
    then the lower ``cost`` (a region plan's, see `memplan.deploy.regions.region_cost`),
    the smaller arena, and the more bytes granted to variable-size scratch."""
    granted = problem.sizes if plan.sizes is None else plan.sizes
    return (not fits(plan), cost, plan.arena_size, -int(granted.sum()))
