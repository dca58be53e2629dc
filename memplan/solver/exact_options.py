"""The exact planner's options (one frozen dataclass) and its progress report."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from fractions import Fraction

from memplan.errors import ProblemError, renamed_keyword
from memplan.limits import check_time_limit, check_workers, whole
from memplan.options import option, renamed_fields

ORDERS = ("total", "lifetime", "area", "size")  # see `memplan.solver.cp_search.unit_order`


@dataclass(frozen=True)
class Progress:
    """What the search knows at one moment; given to the ``on_progress`` callback."""

    arena_size: int | None  # bytes of the best plan so far (None before the first plan)
    best_bound: int  # bytes: no plan can be smaller (proven)
    seconds: float  # wall time since the planner started


@renamed_fields(workers="threads")
@dataclass(frozen=True)
class ExactOptions:
    """How the exact planner searches. Defaults are the best measured settings."""

    time_limit: float | None = option(None, "deprecated: plan_with's time_limit= (or budget=) "
                                      "bounds the run")
    cpu: float | None = option(None, "deprecated: a budget= with a CPU allowance (memplan"
                                     ".budget.Budget)")
    seed: int = option(0, "CP-SAT's random seed")
    threads: int = option(0, "CP-SAT search threads; 0 = one per core")
    deterministic: bool = option(False, "same plan every run: interleaved threads, time limit "
                                 "counted in CP-SAT's deterministic time instead of wall seconds")
    minimize: bool | None = option(None, "None: fit the capacity when there is one, else minimise")
    warm_start: str | None = option("best", "planner whose plan is the hint and upper bound; "
                                    "None = "
                                    "none")
    strategy: str = option("lowest_offset", "'lowest_offset': a worker puts buffers at their "
                           "lowest "
                           "free offset in `orders` (MiniMalloc); 'none': CP-SAT's own")
    orders: tuple[str, ...] = option(("total", "lifetime", "area"), "unit orders for the strategy; "
                                     "to fit, they race at once (one worker each); to minimise, "
                                     "the first one")
    canonical: bool = option(True, "fit mode, or minimise without a capacity, on problems "
                             "without aliases, pins or conflicts: the canonical search "
                             "(memplan.solver.canonical) first, then racing CP-SAT")
    floors: bool = option(True, "minimise with the canonical search: when its descent stalls, "
                          "probe relaxations at the floor to prove a higher one "
                          "(memplan.solver.floors)")
    canonical_share: float = option(0.25, "of a fit search's time, the share the canonical "
                                    "search has alone before CP-SAT joins (1 to 3 s; sooner "
                                    "when its nodes are slow: memplan.solver.canonical"
                                    ".run_head_start)")
    slice_seconds: float = option(8.0, "with one worker (or deterministic): the orders take turns, "
                                  "in slices of this many CPU seconds (deterministic: CP-SAT's "
                                  "deterministic seconds), doubling every round")
    subsolvers: tuple[str, ...] = option((), "CP-SAT full-problem threads by name; () = CP-SAT's "
                                         "choice")
    lns_buffers: int = option(3000, "parts with more buffers: large-neighbourhood search from the "
                              "warm start (memplan.solver.lns), not one model of the whole part")
    lns_pairs: int = option(200_000, "... and parts with more pairs of overlapping lifetimes "
                            "(their whole model grows with them)")
    sections: bool = option(True, "also a 1-D NoOverlap per time section (clique of live boxes)")
    timetabling: bool = option(False, "NoOverlap2D: timetabling reasoning")
    energetic: bool = option(False, "NoOverlap2D: energetic and area-energetic reasoning")
    try_edge: bool = option(False, "NoOverlap2D: try-edge reasoning")
    pairwise_pairs: int = option(1250, "NoOverlap2D: most box pairs for pairwise reasoning (0 = "
                                 "off)")
    on_progress: Callable[[Progress], None] | None = option(None, "called on new plans and bounds")
    stop: threading.Event | None = option(None, "set it (from any thread) to stop with the best "
                                          "plan")
    log: bool = option(False, "print CP-SAT's search log")
    relative_gap: float = option(0.0, "stop once (arena - proven bound) / arena is at most this "
                                 "(0.01: within 1 %); the plan is then 'feasible' with its gap")
    absolute_gap: int = option(0, "stop once arena - proven bound is at most this many bytes")

    def __post_init__(self):
        for name in ("time_limit", "cpu"):  # the run's limit is its budget= (one release)
            value = check_time_limit(getattr(self, name), name)
            object.__setattr__(self, name, renamed_keyword(name, value, "budget", None,
                                                           where="ExactOptions"))
        if self.threads != 0:  # 0: one per core
            check_workers(self.threads, "threads")
        if not 0 <= self.relative_gap < 1:
            raise ProblemError(f"relative_gap must be a share in [0, 1), got "
                               f"{self.relative_gap!r}")
        whole(self.absolute_gap, "absolute_gap")
        unknown = set(self.orders) - set(ORDERS)
        if unknown or not self.orders:
            raise ValueError(f"unknown order(s) {sorted(unknown)}; valid: {', '.join(ORDERS)}")
        if self.strategy not in ("lowest_offset", "none"):
            raise ValueError(f"unknown strategy {self.strategy!r}; valid: lowest_offset, none")

    def enough(self, floor: int, scale: int = 1) -> int:
        """The highest arena within the gap tolerance of the bound ``floor`` (both in units of
        ``scale`` bytes): ``floor`` itself without a tolerance."""
        by_share = Fraction(floor) / (1 - Fraction(self.relative_gap)) if self.relative_gap \
            else floor
        return max(floor + self.absolute_gap // scale, math.floor(by_share))

    def within_gap(self, arena: int, bound: int) -> bool:
        """Whether ``arena`` is close enough to the proven ``bound`` to stop searching."""
        return arena <= self.enough(bound)

    @classmethod
    def from_kwargs(cls, **options) -> ExactOptions:
        """Options from keyword arguments; an unknown name lists the valid ones."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)} for the exact planner; "
                            f"valid: {', '.join(sorted(names))}")
        if "orders" in options and isinstance(options["orders"], str):
            options["orders"] = tuple(options["orders"].split(","))
        return cls(**options)
