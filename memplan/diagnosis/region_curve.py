"""Fast and slow regions: what fills the fast region at its peak, what a larger one would save.

A hardware team sizing a part's fast memory (TCM, on-chip SRAM) asks two
questions of a plan over memory regions (`memplan.deploy.regions`; the
fast region is the cheapest region, every other region is slow):

- what occupies the fast region when it is fullest (`fast_peak`): the step
  where its buffers hold the most bytes, and those buffers, largest first,
  with how often each is read when the reads are known;
- what each extra KiB of fast memory would save (`fast_curve`): the problem
  planned again with the fast region larger (by default by 1/8, 1/4, 1/2, 1
  and 2 times its size, in whole KiB), and per size the bytes in slow regions,
  those bytes times their reads, and the slow arenas, each against the
  current size and per extra KiB::

      fast KiB   slow bytes   saved/KiB   slow arena   saved/KiB     (a 64-256-64 MLP,
            12      417,792           -       73,728           -      8 rows, 3 blocks)
            18      393,216       4,096       65,536       1,365

Each point of the curve is planned by the region heuristic (milliseconds;
an upper bound on what that size allows), or by the exact region planner
with ``time_limit`` seconds per point. Cost: one region plan per point, and
one sweep over the fast region's buffers for its peak.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from memplan.bounds import live_bytes
from memplan.budget import Budget
from memplan.deploy.regions import checked_reads, plan_gaps, plan_regions, region_plan
from memplan.deploy.scratch import subproblem
from memplan.errors import ProblemError, renamed, renamed_keyword
from memplan.plan import Plan
from memplan.problem import Problem

GROWTH = (1.125, 1.25, 1.5, 2.0, 3.0)  # the curve's fast sizes, times the current one
KIB = 1024
SHOWN = 10  # tensors listed at the peak


@dataclass(frozen=True)
class CurvePoint:
    """The plan at one fast region size, and what it saves against the current size."""

    fast: int  # the fast region's size, bytes
    slow_bytes: int  # bytes of the buffers in slow regions
    traffic: int  # those bytes times their reads
    slow_arena: int  # the slow regions' arenas, summed
    slow_bytes_per_kib: float = 0.0  # slow bytes saved per extra KiB of fast memory
    traffic_per_kib: float = 0.0
    slow_arena_per_kib: float = 0.0


@dataclass
class RegionExplanation:
    """`explain_regions`: the fast region's peak and the curve of larger fast regions."""

    fast: str  # the fast region's name
    capacity: int
    step: int  # where the fast region holds the most
    step_name: str
    peak: int  # the bytes it holds then
    tensors: list[tuple[str, int, int]] = field(default_factory=list)  # (id, bytes, reads)
    curve: list[CurvePoint] = field(default_factory=list)  # the current size first
    gap: float = 0.0  # the plan's proven gap on bytes x reads (0: its contents are optimal)
    within_ceiling: bool = False  # that gap among the plans within a ceiling only

    def lines(self) -> list[str]:
        lines = [f"fast region {self.fast}: {self.peak:,} of {self.capacity:,} B at its peak, "
                 f"step {self.step}{f' ({self.step_name})' if self.step_name else ''}, held by "
                 f"{len(self.tensors)} tensors:"]
        proof = "proven optimal" if self.gap == 0 else \
            f"not proven optimal: within {self.gap:.2%} of the least, proven"
        where = " among the plans within the ceiling" if self.within_ceiling else ""
        lines.insert(0, f"fast region contents: {proof} for bytes x reads in slow memory{where}")
        for name, size, reads in self.tensors[:SHOWN]:
            lines.append(f"  {name:<32} {size:>12,} B  {reads} read{'s' * (reads != 1)}")
        if len(self.tensors) > SHOWN:
            lines.append(f"  ... and {len(self.tensors) - SHOWN} more")
        lines.append("a larger fast region (the region heuristic's plan at each size; saved "
                     "per extra KiB against the current size):")
        lines.append(f"  {'fast KiB':>9} {'slow bytes':>14} {'saved/KiB':>10} "
                     f"{'bytes x reads':>14} {'saved/KiB':>10} {'slow arena':>12} "
                     f"{'saved/KiB':>10}")
        for k, p in enumerate(self.curve):
            per = ["-"] * 3 if k == 0 else [f"{v:,.0f}" for v in (
                p.slow_bytes_per_kib, p.traffic_per_kib, p.slow_arena_per_kib)]
            lines.append(f"  {p.fast / KIB:>9,.0f} {p.slow_bytes:>14,} {per[0]:>10} "
                         f"{p.traffic:>14,} {per[1]:>10} {p.slow_arena:>12,} {per[2]:>10}")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict:
        return asdict(self)


def _fast(problem: Problem) -> int:
    if len(problem.regions) < 2:
        raise ProblemError("explaining regions needs two of them or more (a fast and a "
                           "slow one)", file=problem.source)
    return int(np.argmin([r.cost for r in problem.regions]))


def _point(problem: Problem, plan: Plan, reads: np.ndarray) -> CurvePoint:
    slow = plan.regions != _fast(problem)
    sizes = problem.sizes[slow]
    tops = plan.offsets[slow] + sizes
    arena = sum(int(tops[plan.regions[slow] == r].max(initial=0))
                for r in set(plan.regions[slow].tolist()))
    capacity = problem.regions[_fast(problem)].capacity
    return CurvePoint(capacity, int(sizes.sum()), int((sizes * reads[slow]).sum()), arena)


def fast_peak(problem: Problem, plan: Plan, reads=None, *,
              weights=None) -> tuple[int, int, list]:
    """``(step, bytes, [(id, bytes, reads), ...])``: the fast region's fullest step and the
    buffers it holds then, largest first (``reads``: how often each buffer is read, 0 when
    not given; ``weights``: its old name)."""
    reads = renamed_keyword("weights", weights, "reads", reads, where="fast_peak")
    fast = plan.regions == _fast(problem)
    if not fast.any():
        return 0, 0, []
    load = live_bytes(subproblem(problem, fast, one_arena=True))
    step = int(np.argmax(load))
    live = np.flatnonzero(fast & (problem.starts <= step) & (problem.ends > step))
    reads = np.zeros(len(problem), np.int64) if reads is None else np.asarray(reads)
    rows = sorted(((problem.ids[i], int(problem.sizes[i]), int(reads[i])) for i in live),
                  key=lambda row: (-row[1], row[0]))
    return step, int(load[step]), rows


def fast_curve(problem: Problem, plan: Plan, *, reads=None, sizes=None,
               time_limit: float | None = None, weights=None) -> list[CurvePoint]:
    """The plan at larger fast regions (``sizes`` in bytes, default `GROWTH` of the current
    one in whole KiB): the current plan's point first, then one per size; see the module
    docstring. ``time_limit``: the exact region planner per point, else the heuristic;
    ``reads``: how often each buffer is read (``weights``: its old name)."""
    reads = renamed_keyword("weights", weights, "reads", reads, where="fast_curve")
    fast = _fast(problem)
    capacity = problem.regions[fast].capacity
    if capacity is None:
        raise ProblemError("the fast region has no capacity: nothing to grow",
                           file=problem.source)
    measure = checked_reads(problem, reads)
    if sizes is None:
        sizes = sorted({max(capacity + KIB, -(-int(capacity * g) // KIB) * KIB)
                        for g in GROWTH})
    here = _point(problem, plan, measure)
    points = [here]
    for size in sizes:
        regions = list(problem.regions)
        regions[fast] = type(regions[fast])(regions[fast].name, int(size), regions[fast].cost)
        larger = problem.replace(regions=regions)
        grown = plan_regions(larger, reads=reads)
        if time_limit is not None:
            from memplan.deploy.regions_exact import plan_regions_exact

            grown = plan_regions_exact(larger, budget=Budget.of_limit(time_limit), hint=grown,
                                       reads=reads)
        point = _point(larger, grown, measure)
        extra = (point.fast - capacity) / KIB
        points.append(CurvePoint(point.fast, point.slow_bytes, point.traffic,
                                 point.slow_arena,
                                 (here.slow_bytes - point.slow_bytes) / extra,
                                 (here.traffic - point.traffic) / extra,
                                 (here.slow_arena - point.slow_arena) / extra))
    return points


def step_reads(problem: Problem) -> np.ndarray:
    """Per buffer, how many steps read it (`Problem.steps`; 0 each without steps)."""
    reads = np.zeros(len(problem), np.int64)
    position = {name: i for i, name in enumerate(problem.ids)}
    for step in problem.steps or ():
        for name in set(step.reads):
            if name in position:
                reads[position[name]] += 1
    return reads


def explain_regions(problem: Problem, plan: Plan, *, reads=None, sizes=None,
                    time_limit: float | None = None, weights=None) -> RegionExplanation:
    """The fast region's peak (`fast_peak`) and the curve of larger ones (`fast_curve`) for a
    plan over regions; ``reads``: how often each buffer is read (``weights``: its old
    name)."""
    reads = renamed_keyword("weights", weights, "reads", reads, where="explain_regions")
    fast = _fast(problem)
    step, peak, tensors = fast_peak(problem, plan, reads)
    steps = problem.steps or ()
    name = steps[step].name if step < len(steps) else ""
    stats = plan.stats if "cost" in plan.stats else region_plan(
        problem, plan.offsets, plan.regions, planner=plan.planner, seconds=plan.seconds,
        sizes=plan.sizes, reads=reads).stats
    ceiling = stats.get("ceiling", {}).get("cost_bound", 0.0) > stats["cost_bound"]
    return RegionExplanation(problem.regions[fast].name, problem.regions[fast].capacity, step,
                             name, peak, tensors,
                             fast_curve(problem, plan, reads=reads, sizes=sizes,
                                        time_limit=time_limit),
                             gap=plan_gaps(stats)["cost"], within_ceiling=ceiling)


__getattr__ = renamed(__name__, {"BankExplanation": "RegionExplanation",
                                 "explain_banks": "explain_regions"})
