"""``time_sweep``: a time sweep with a free list, O(n log n): the planner for very large problems.

The order x placement planners (`memplan.heuristics.greedy`) look, for every
unit, at all the placed buffers it meets in time: O(E) for E overlapping
pairs. On training graphs, where forward activations live until their
backward operator, E grows with the square of the buffer count (tens of
millions of pairs at 30k buffers), and so do their time and memory. This
planner never lists pairs. It walks time like an allocator that knows every
lifetime ahead::

    address
      ^   free list at step t:  [..)     [.....)        [..... top
      |   +----+     +--+             +---+
      |   | a  |     |b |             | c |   a, b, c live at t
      +---+----+-----+--+-------------+---+--> address ranges at step t

Steps:
- units (alias groups, `memplan.heuristics.units`) without their pair lists;
  each unit is one rectangle: its lifetime span x its extent (members inside);
- events in time order: at step t, first the units that ended by t give their
  bytes back to the free list (merged with free neighbours), then the units
  starting at t take bytes, largest first: ``placement="best_fit"`` the
  smallest free gap that fits (its alignment honoured), ``"first_fit"`` the
  lowest; a unit that fits no gap goes on top of the highest byte in use.

The loop runs in C (`memplan.heuristics.compiled_place.compiled_sweep`) when
the extension is built, else in Python over a `FreeList` (`free_list_sweep`);
both give the same offsets.

Cost: O(n log n). The compiled loop keeps the free gaps in balanced trees
(by (size, offset) for best fit, by offset for first fit) and their ends in
hash tables: O(log g) a unit for g free gaps; about 0.6 CPU-s for the whole
sweep of 10^6 generated buffers, sort included (BENCHMARKS.md).
The Python `FreeList` keeps sorted lists, O(g) a unit in list moves: the
plain reference the compiled loop is tested against. Memory O(n).
Pinned units keep their bytes for the whole sweep; units in explicit
conflict hold their bytes over the union of their lifetimes (both sound,
maybe wasteful: large problems rarely have either). Optional aliases are
never taken. A ``time_limit`` that passes mid-sweep is kept by stacking the units
left (``stats["cut"]``).
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from memplan.bounds import lower_bound
from memplan.budget import Budget, past
from memplan.heuristics import compiled_place
from memplan.heuristics.units import Units
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register

PLACEMENTS = ("best_fit", "first_fit")
CLOCK_EVERY = 256  # units placed between two looks at the clock
_TOP = np.iinfo(np.int64).max


@dataclass(frozen=True)
class TimeSweepOptions:
    """Options of ``time_sweep``."""

    placement: str = option("best_fit", "best_fit: the smallest free gap that fits; "
                                        "first_fit: the lowest")


class FreeList:
    """Free address gaps ``[lo, hi)``, sorted and disjoint; the last one is open above.

    Two sorted lists of the same finite gaps: by address (``lo``, ``hi``: first
    fit, merging) and by size (``by_size``: best fit, a bisection instead of a
    scan). Insertions and deletions are list moves in C: O(g) bytes moved for
    g gaps, fast at the gap counts seen (thousands).
    """

    def __init__(self, reserved: list[tuple[int, int]] = ()):
        """All bytes free but the ``reserved`` ranges (pinned units, for the whole sweep)."""
        self.lo, self.hi = [], []
        self.by_size: list[tuple[int, int]] = []  # (hi - lo, lo) of the finite gaps
        reach = 0
        for lo, hi in sorted(reserved):
            if lo > reach:
                self._insert(len(self.lo), reach, lo)
            reach = max(reach, hi)
        self._insert(len(self.lo), reach, _TOP)

    def _remove(self, i: int) -> None:
        lo, hi = self.lo.pop(i), self.hi.pop(i)
        if hi != _TOP:
            del self.by_size[bisect.bisect_left(self.by_size, (hi - lo, lo))]

    def _insert(self, i: int, lo: int, hi: int) -> None:
        self.lo.insert(i, lo)
        self.hi.insert(i, hi)
        if hi != _TOP:
            bisect.insort(self.by_size, (hi - lo, lo))

    def _chosen(self, extent: int, residue: int, modulus: int, best: bool) -> int:
        """The index (by address) of the gap to take: smallest that fits, or lowest."""
        if best:
            for size, lo in self.by_size[bisect.bisect_left(self.by_size, (extent, -1)):]:
                if lo + (residue - lo) % modulus + extent <= lo + size:
                    return bisect.bisect_left(self.lo, lo)
            return len(self.lo) - 1
        for i, (lo, hi) in enumerate(zip(self.lo, self.hi, strict=True)):
            if lo + (residue - lo) % modulus + extent <= hi:
                return i
        raise AssertionError("the top gap always fits")

    def take(self, extent: int, residue: int, modulus: int, best: bool) -> int:
        """The base of ``extent`` bytes (``base % modulus == residue``); the gap shrinks."""
        i = self._chosen(extent, residue, modulus, best)
        lo, hi = self.lo[i], self.hi[i]
        base = lo + (residue - lo) % modulus
        self._remove(i)
        for a, b in ((base + extent, hi), (lo, base)):
            if b > a:
                self._insert(i, a, b)
        return base

    def give(self, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` are free again: merged with the free gaps they touch."""
        i = bisect.bisect_left(self.lo, lo)
        if i > 0 and self.hi[i - 1] == lo:
            i -= 1
            lo = self.lo[i]
            self._remove(i)
        if i < len(self.lo) and self.lo[i] == hi:
            hi = self.hi[i]
            self._remove(i)
        self._insert(i, lo, hi)


def sweep_order(units: Units, start: np.ndarray, end: np.ndarray):
    """The free units in sweep order (by start, the largest first) with their starts, and
    in order of end with their ends (when their bytes return). O(n log n)."""
    free_units = units.free
    order = free_units[np.lexsort((free_units, -units.extent[free_units],
                                   start[free_units]))]
    by_end = free_units[np.argsort(end[free_units], kind="stable")]
    return order, start[order], by_end, end[by_end]


class Sweep(NamedTuple):
    """What a sweep walks: the same for the compiled sweep
    (`memplan.heuristics.compiled_place.compiled_sweep`) and `free_list_sweep`."""

    extent: np.ndarray  # per unit: bytes
    residue: np.ndarray  # per unit: its base % modulus must equal this
    modulus: np.ndarray  # per unit: its alignment
    order: np.ndarray  # the free units in sweep order (`sweep_order`)
    starts: np.ndarray  # their span starts, in that order
    by_end: np.ndarray  # the free units by span end
    ends: np.ndarray  # their span ends, in that order
    reserved: np.ndarray  # (k, 2): the pinned units' bytes [lo, hi), sorted, never free
    base: np.ndarray  # per unit: the pinned units' bases, 0 elsewhere
    peak: int  # one past the highest pinned byte


def free_list_sweep(sweep: Sweep, best: bool, deadline: float | None) -> tuple[np.ndarray, int]:
    """Unit bases by the sweep over a `FreeList` in Python (the compiled sweep's twin, and
    its fallback when the extension is not built), and the units cut by ``deadline``."""
    free = FreeList([tuple(pair) for pair in sweep.reserved.tolist()])
    base, peak = sweep.base.copy(), sweep.peak
    extent, residue, modulus = (sweep.extent.tolist(), sweep.residue.tolist(),
                                sweep.modulus.tolist())
    order, starts = sweep.order.tolist(), sweep.starts.tolist()
    by_end, ends = sweep.by_end.tolist(), sweep.ends.tolist()
    released, cut = 0, 0
    for position, unit in enumerate(order):
        if cut or (deadline is not None and position % CLOCK_EVERY == 0 and past(deadline)):
            cut = cut or len(order) - position
            at = peak + (residue[unit] - peak) % modulus[unit]
            base[unit] = at
            peak = at + extent[unit]
            continue
        now = starts[position]
        while released < len(by_end) and ends[released] <= now:
            done = by_end[released]
            if extent[done]:
                free.give(int(base[done]), int(base[done]) + extent[done])
            released += 1
        if extent[unit] == 0:
            continue
        at = free.take(extent[unit], residue[unit], modulus[unit], best)
        base[unit] = at
        peak = max(peak, at + extent[unit])
    return base, cut


def sweep_offsets(units: Units, placement: str = "best_fit", deadline: float | None = None,
                  *, compiled: bool | None = None) -> tuple[np.ndarray, dict]:
    """Buffer offsets by the time sweep (see the module doc), and stats. ``compiled``: by
    the compiled sweep (the same offsets, faster) or `free_list_sweep`; None: compiled when
    the extension is built."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
    if compiled is None:
        compiled = compiled_place.available()
    start, end = spans(units)
    pinned = units.pinned
    base = np.zeros(len(units), np.int64)
    base[pinned] = units.pinned_base[pinned]
    top = base[pinned] + units.extent[pinned]
    reserved = np.stack((base[pinned], top), axis=1)[np.lexsort((top, base[pinned]))]
    sweep = Sweep(units.extent, units.residue, units.modulus, *sweep_order(units, start, end),
                  reserved, base, int(top.max(initial=0)))
    bases, cut = run_sweep(sweep, placement == "best_fit", deadline, compiled=compiled)
    return units.offsets(bases), {"placement": placement, "cut": cut, "compiled": compiled}


def run_sweep(sweep: Sweep, best: bool, deadline: float | None, *,
              compiled: bool | None = None) -> tuple[np.ndarray, int]:
    """Unit bases by ``sweep`` (best fit or first fit) and the units cut by ``deadline``:
    the compiled sweep, or ``compiled=False`` (default: when the extension is not built)
    `free_list_sweep`."""
    if compiled is None:
        compiled = compiled_place.available()
    if compiled:
        return compiled_place.compiled_sweep(sweep, best, deadline, CLOCK_EVERY)
    return free_list_sweep(sweep, best, deadline)


def spans(units: Units) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, the time span it holds its bytes: its lifetime, grown so that units in
    explicit conflict overlap in time (one pass: spans only grow, so a pair made to
    overlap stays so)."""
    start, end = units.start.copy(), units.end.copy()
    conflicts = units.problem.conflicts
    for a, b in units.unit_of[conflicts].tolist() if len(conflicts) else ():
        low, high = min(start[a], start[b]), max(end[a], end[b])
        start[a] = start[b] = low
        end[a] = end[b] = high
    return start, end


def unit_sweep_plan(name: str, place, problem: Problem, budget: Budget,
                    defaults, options: dict) -> Plan:
    """The plan of a sweep planner ``name`` over alias units without pair lists:
    ``place(units, deadline=..., **options) -> (offsets, stats)`` with the chosen options
    (the fields of ``defaults``), by the budget's `Budget.wall_end`."""
    chosen = parse_options(name, defaults, options)
    check_single_region(problem)
    lower_bound(problem)  # the plan's bound (cached): its cost inside the limit, not after
    units = Units.build(problem, pairs=False)
    offsets, stats = place(units, deadline=budget.wall_end(), **asdict(chosen))
    return Plan.from_offsets(problem, offsets, planner=name,
                             seconds=budget.elapsed(), stats=stats)


@register("time_sweep")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The time-sweep plan (see the module doc); ``seed`` and ``hint`` are not used."""
    return unit_sweep_plan("time_sweep", sweep_offsets, problem, budget, TimeSweepOptions(),
                           options)


plan.options = TimeSweepOptions()
