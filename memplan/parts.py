"""Plan a problem part by part: the independent pieces its lifetimes separate.

Where no buffer is live across a point of time (and no alias or explicit
conflict links a buffer before it to one after it), the buffers on either
side never meet: each side can be laid out from offset 0 on its own, and the
arena of the whole is the larger side's::

    address                       two parts: nothing spans the cut at t;
      ^  +---+  +-+  :  +----+    each is planned with its share of the
      |  |   +--+ |  :  |    |    limit, and the peak and the proven bound
      +--+--------+--:--+----+--> time    are the larger part's
                     t

Steps of `solve_parts` (called by `memplan.api.solve_report` on problems of
at least `PART_BUFFERS` buffers):

- the parts: `memplan.solver.preprocess.components` (a sweep in start order
  cuts time where no buffer spans a point; a union-find joins the blocks an
  alias or a conflict links), grouped in time order into at most `MOST_PARTS`
  groups (a group of several parts is still independent of the others); the
  sweep passes over pinned buffers in no alias or conflict (their bytes are
  fixed), and each group then keeps those live during its span (`groups`);
- identical parts (the same columns once time is renumbered: a step or a
  request repeated) are planned once and their offsets reused;
- the distinct parts, smallest lower bound first, each by the whole pipeline
  (heuristics, then the exact planner, each plan checked by the independent
  validator on its part) with its share of the time left: its buffers over
  the buffers left. The largest part's bound is a lower bound of the whole,
  so a part below it need not go further: it is planned with that much gap
  allowed (unless the caller gave a gap);
- stitch the offsets and check the whole with the independent validator
  (the parts never meet by the split's definition, but the check does not
  take the split's word for it: about a CPU second at 500k buffers); its
  proven bound is the largest of the parts' bounds.

The exact planner splits the same way inside (`memplan.solver.preprocess.split`),
but only when the heuristics before it leave it time; here every stage, the
floor and the validation included, runs on a part at a time. Cost: O(n log n
+ a x g + c x g) for a aliases, c conflicts and g groups, plus the parts'
plans and the validation of the whole (a sweep, O(n log n)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from memplan.bounds import lower_bound
from memplan.budget import Budget
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Problem
from memplan.solver.preprocess import _piece, components

PART_BUFFERS = 10_000  # smaller problems are planned whole (the split saves them nothing)
MOST_PARTS = 64  # parts beyond this are grouped: each group plans its parts together


def _lone_pins(problem: Problem) -> np.ndarray:
    """Whether each buffer is pinned and in no alias or explicit conflict: its bytes are
    fixed, so it may cross a cut (each part it meets in time keeps it, at its offset)."""
    lone = problem.pinned != NO_OFFSET
    lone[problem.alias_src] = lone[problem.alias_dst] = False
    lone[problem.conflicts.reshape(-1)] = False
    return lone


def groups(problem: Problem, most: int = MOST_PARTS) -> list[np.ndarray]:
    """The independent parts of ``problem`` (buffer indices, sorted), consecutive ones
    grouped so that there are at most about ``most``; one group when nothing splits.

    A cut where only pinned buffers live (pinned, in no alias or conflict) is a cut too:
    each group then also holds the pinned buffers live during its time span (a pinned
    buffer may be in several; a pin in no group's span goes to the first), so that every
    group's bound counts them and its plan keeps clear of their bytes."""
    lone = _lone_pins(problem)
    if not lone.any():
        return _grouped(components(problem), len(problem), most)
    rest, pins = np.flatnonzero(~lone), np.flatnonzero(lone)
    if not len(rest):
        return [np.arange(len(problem))]
    found = _grouped([rest[members] for members in components(_piece(problem, rest, 1))],
                     len(rest), most)
    if len(found) <= 1:
        return [np.arange(len(problem))]
    starts, ends = problem.starts[pins], problem.ends[pins]
    placed = np.zeros(len(pins), bool)
    whole = []
    for members in found:
        meets = (starts < problem.ends[members].max()) & (ends > problem.starts[members].min())
        placed |= meets
        whole.append(np.sort(np.r_[members, pins[meets]]))
    whole[0] = np.sort(np.r_[whole[0], pins[~placed]])
    return whole


def _grouped(found: list[np.ndarray], n: int, most: int) -> list[np.ndarray]:
    """Consecutive parts of ``found`` (of n buffers in all) grouped: at most about ``most``."""
    if len(found) <= 1:
        return found
    least = max(n // most, 1)
    grouped: list[list[np.ndarray]] = [[]]
    count = 0  # buffers in the last group
    for members in found:
        if count >= least:
            grouped.append([])
            count = 0
        grouped[-1].append(members)
        count += len(members)
    return [np.sort(np.concatenate(group)) for group in grouped]


def _key(piece: Problem) -> tuple:
    """What makes two pieces the same problem (time renumbered, ids aside)."""
    columns = (piece.sizes, piece.starts, piece.ends, piece.alignments, piece.pinned,
               piece.alias_src, piece.alias_dst, piece.alias_delta, piece.alias_optional,
               piece.conflicts)
    return (piece.capacity,) + tuple(np.ascontiguousarray(c).tobytes() for c in columns)


def solve_parts(problem: Problem, parts: list[np.ndarray], settings, solve_one: Callable,
                checked: Callable, new_report: Callable, budget: Budget):
    """`memplan.api.SolveReport` of ``problem`` planned part by part (see the module doc).

    ``solve_one(piece, settings, budget=)``: the pipeline on one part within its child
    budget, its report; ``checked(problem, plan, twin)``: the independent validation of the
    stitched whole (`memplan.api._checked`); ``new_report(plan, heuristic, exact)``: the
    whole's report; ``budget``: the caller's, which the parts share."""
    pieces = [_piece(problem, members, 1) for members in parts]
    distinct: dict[tuple, int] = {}
    same = [distinct.setdefault(_key(piece), k) for k, piece in enumerate(pieces)]
    bounds = [lower_bound(piece) for piece in pieces]
    planned = sorted(set(same), key=lambda k: bounds[k])  # the peak's part last: the most time
    whole_bound = max(bounds)
    reports: dict[int, object] = {}
    left = sum(len(pieces[k]) for k in planned)
    for k in planned:
        piece = pieces[k]
        chosen = replace(settings, gap=settings.gap if settings.gap is not None or
                         bounds[k] >= whole_bound else f"{whole_bound - bounds[k]}B")
        share = budget.share(len(piece) / left)
        if share.limit is not None and settings.heuristic_time_limit is not None:
            chosen = replace(chosen, heuristic_time_limit=min(settings.heuristic_time_limit,
                                                              share.limit))
        reports[k] = solve_one(piece, chosen, budget=share)
        left -= len(piece)

    def whole(which: Callable, planner: str) -> Plan:
        """The parts' plans (``which`` of each part's report) stitched into one."""
        offsets = np.zeros(len(problem), np.int64)
        for members, k in zip(parts, same, strict=True):
            offsets[members] = which(reports[k]).offsets
        bound = max(which(reports[k]).best_bound for k in same)
        plans = [which(reports[k]) for k in planned]
        plan = Plan.from_offsets(problem, offsets, planner=planner, best_bound=bound,
                                 seconds=budget.elapsed(), stats={
                                     "parts": len(parts), "distinct_parts": len(planned),
                                     "part_planners": [p.planner for p in plans],
                                     "cut_short": any(p.stats.get("cut_short") for p in plans),
                                     "clock_cut": any(p.stats.get("clock_cut") for p in plans)})
        if plan.status == "infeasible" and any(p.status == "unknown" for p in plans):
            plan.status = "unknown"  # a part neither fitted nor proven not to
        return plan

    heuristic = checked(problem, whole(lambda report: report.heuristic,
                                       reports[planned[0]].heuristic.planner))
    ran_exact = any(reports[k].exact is not None for k in planned)
    plan = checked(problem, whole(lambda report: report.plan, reports[planned[-1]].plan.planner),
                   heuristic) if ran_exact else heuristic
    report = new_report(plan, heuristic, plan if ran_exact else None)
    report.interrupted = any(reports[k].interrupted for k in planned)
    report.out_of_time = any(reports[k].out_of_time for k in planned)
    report.within_gap = not ran_exact and all(reports[k].within_gap or reports[k].plan.status
                                              == "optimal" for k in planned)
    return report
