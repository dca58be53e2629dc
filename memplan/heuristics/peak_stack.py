"""``peak_stack``: the units live at a peak step stacked, each side of it swept outward.

A time sweep (`memplan.heuristics.time_sweep`) walks time forward and places
each unit where the free list has room at its start. Buffers that live for a
large part of the schedule (features a decoder reads much later, a network's
input) then sit wherever the first fit happened to be, and at the peak step
the holes between them are more than the bound allows: on a 10^6-buffer
network schedule a thousand such buffers carry 82 % of the peak, and the
sweep ends 11 % above the live-load bound. This planner starts at the peak
instead, where no hole may be, and sweeps away from it::

    address
      ^                        cut
      |   before the cut:      |      after the cut:
      |   the sweep, time      +--+   the sweep, forward;
      |   reversed; a stack    |d |   a stack unit's bytes
      |   unit's bytes return  +--+-----+   return when it dies
      |   where it is born  +--+ c      |
      |          +----------+-----+--+--+
      |          | b              |
      |   +------+----------------+------+
      |   | a                            |
      +---+------------------------------+----> time

Steps:
- units (alias groups) with their spans (`time_sweep.spans`); the live load
  of the free units over the distinct event times (no array as long as the
  schedule);
- cut steps: the step of the largest load, then the next largest at least a
  ``2 * cuts``-th of the event times away from those chosen;
- per stack order (the first to die on top: the side after the cut gives
  bytes back at the top; then the last born on top: the side before it
  does), per cut step, highest first: the units live at the cut stacked
  above the pinned units (the cut step holds its live load, up to
  alignment); after the cut, the time sweep
  of the units born after it, the stack's bytes reserved until each stack
  unit dies; before the cut, the same sweep with time reversed (a stack
  unit, seen backwards, dies where it is born); so neither side ever meets a
  unit it must fit around later, and the sweeps are those of `time_sweep`
  (compiled when built). The two sides share no step: each keeps the better
  of best fit and first fit;
- the smallest plan of those tried.

Cost: O(n log n) a try, four sweeps of ``n / 2`` units; ``2 * cuts`` tries,
fewer when the limit passes (the first always runs; a sweep the limit
cuts stacks its remaining units, as `time_sweep` does). Memory O(n).
Known limits: a peak elsewhere that the cut does not see can still be
fragmented (1.022 of the bound at 10^6 network-like buffers, BENCHMARKS.md);
optional aliases are never taken; pinned units hold their bytes throughout;
units in explicit conflict hold their bytes over the union of their
lifetimes (as in `time_sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.budget import Budget, past
from memplan.heuristics.time_sweep import (
    Sweep,
    run_sweep,
    spans,
    unit_sweep_plan,
)
from memplan.heuristics.units import Units
from memplan.options import option
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.registry import register

ORDERS = ("dying_on_top", "born_on_top")  # the stack at a cut, top first


@dataclass(frozen=True)
class PeakStackOptions:
    """Options of ``peak_stack``."""

    cuts: int = option(8, "peak steps to try as the cut, the highest first (with one "
                          "stack order, then with the other)")
    placement: str = option("both", "both: each side keeps the better of best_fit and "
                                    "first_fit; or one of them")


def load_peaks(units: Units, start: np.ndarray, end: np.ndarray, count: int) -> list[int]:
    """Up to ``count`` steps of high live load of the free units, the highest first, each at
    least a ``2 * count``-th of the distinct event times from those before. O(n log n)."""
    free = units.free
    if not len(free):
        return []
    times = np.sort(np.concatenate([start[free], end[free]]))
    times = times[np.concatenate([[True], times[1:] != times[:-1]])]  # np.unique: 5x slower
    change = np.zeros(len(times) + 1, np.int64)
    np.add.at(change, np.searchsorted(times, start[free]), units.extent[free])
    np.add.at(change, np.searchsorted(times, end[free]), -units.extent[free])
    load = np.cumsum(change)[:-1]  # over [times[k], times[k + 1])
    spacing = max(1, len(times) // (2 * count))
    chosen: list[int] = []
    for k in np.argsort(-load, kind="stable").tolist():
        if all(abs(k - c) >= spacing for c in chosen):
            chosen.append(k)
            if len(chosen) == count:
                break
    return [int(times[k]) for k in chosen]


class Side:
    """The units on one side of a cut, in the order the sweep away from the cut meets them,
    and with the stack's, by the end of their spans (where their bytes return)."""

    def __init__(self, units: Units, side: np.ndarray, stack: np.ndarray, start: np.ndarray,
                 end: np.ndarray):
        extent = units.extent
        self.units, self.side, self.stack = units, side, stack
        self.order = side[np.lexsort((side, -extent[side], start[side]))]
        self.starts = start[self.order]
        released = np.concatenate([side, stack])
        self.by_end = released[np.argsort(end[released], kind="stable")]
        self.ends = end[self.by_end]

    def bases(self, base: np.ndarray, top: int, placements: tuple[bool, ...],
              deadline: float | None) -> tuple[np.ndarray, int, int]:
        """The side's unit bases swept around the stack placed at ``base`` (its bytes
        reserved until each stack unit's end), the lower of ``placements`` (True: best
        fit); the top of the side, and the units the deadline cut."""
        units = self.units
        extent = units.extent
        held = np.concatenate([units.pinned, self.stack])
        reserved = np.stack((base[held], base[held] + extent[held]), axis=1)
        reserved = reserved[np.lexsort((reserved[:, 1], reserved[:, 0]))]
        sweep = Sweep(extent, units.residue, units.modulus, self.order, self.starts,
                      self.by_end, self.ends, reserved, base, top)
        chosen = None
        for best in placements:
            found, cut = run_sweep(sweep, best, deadline)
            arena = int((found[self.side] + extent[self.side]).max(initial=0))
            if chosen is None or arena < chosen[1]:
                chosen = (found[self.side], arena, cut)
            if cut:
                break
        return chosen


class Cut:
    """One cut step: the units live at it (the stack), and the sides after and before it
    (the one before with time reversed)."""

    def __init__(self, units: Units, start: np.ndarray, end: np.ndarray, step: int):
        free = units.free
        live = (start[free] <= step) & (end[free] > step)
        self.stack = free[live]
        horizon = int(end.max(initial=0))
        self.after = Side(units, free[start[free] > step], self.stack, start, end)
        self.before = Side(units, free[~live & (start[free] <= step)], self.stack,
                           horizon - end, horizon - start)

    def stacked(self, units: Units, start: np.ndarray, end: np.ndarray,
                order: str) -> tuple[np.ndarray, int]:
        """Unit bases with the pinned units' and the stack's, in ``order`` from the pinned
        units' top; and one past the stack's top."""
        pinned, stack = units.pinned, self.stack
        base = np.zeros(len(units), np.int64)
        base[pinned] = units.pinned_base[pinned]
        key = -end[stack] if order == "dying_on_top" else start[stack]
        extent = units.extent.tolist()
        height = int((base[pinned] + units.extent[pinned]).max(initial=0))
        for u in stack[np.lexsort((stack, key))].tolist():
            base[u] = units.aligned(u, height)
            height = int(base[u]) + extent[u]
        return base, height


def stack_offsets(units: Units, placement: str = "both", deadline: float | None = None,
                  cuts: int = PeakStackOptions.cuts) -> tuple[np.ndarray, dict]:
    """Buffer offsets by the smallest of the tries (see the module doc), and stats."""
    placements = {"both": (True, False), "best_fit": (True,), "first_fit": (False,)}
    if placement not in placements:
        raise ValueError(f"unknown placement {placement!r}; valid: {', '.join(placements)}")
    start, end = spans(units)
    best = None
    tried = 0
    steps = load_peaks(units, start, end, max(1, cuts))
    for order, step in ((order, step) for order in ORDERS for step in steps):
        if tried and deadline is not None and past(deadline):
            break
        cut = Cut(units, start, end, step)  # again per order: O(n) memory, not O(n * cuts)
        tried += 1
        base, top = cut.stacked(units, start, end, order)
        after, after_top, after_cut = cut.after.bases(base, top, placements[placement],
                                                      deadline)
        before, before_top, before_cut = cut.before.bases(base, top, placements[placement],
                                                          deadline)
        arena = max(top, after_top, before_top)
        if best is None or arena < best[0]:
            base[cut.after.side], base[cut.before.side] = after, before
            best = (arena, base, step, order, after_cut + before_cut)
    if best is None:  # no free unit: the pinned units where they are
        base = np.zeros(len(units), np.int64)
        base[units.pinned] = units.pinned_base[units.pinned]
        return units.offsets(base), {"placement": placement, "cut": 0, "tries": 0}
    arena, base, step, order, stacked = best
    return units.offsets(base), {"placement": placement, "cut": stacked, "tries": tried,
                                 "cut_step": step, "stack_order": order}


@register("peak_stack")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The peak-stack plan (see the module doc); ``seed`` and ``hint`` are not used."""
    return unit_sweep_plan("peak_stack", stack_offsets, problem, budget, PeakStackOptions(),
                           options)


plan.options = PeakStackOptions()
