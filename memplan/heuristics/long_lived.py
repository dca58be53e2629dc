"""``long_lived``: long-lived buffers as two stacks that shift, the rest swept around them.

Graphs that carry state through a step (the KV caches of a decoder: graph
inputs live from the first step until the layer that reads them, their
updated copies graph outputs live until the last) fill most of the arena
with buffers that no time window holds whole. A greedy pass or a time sweep
places them wherever the first fit happens to be, and the holes they leave
at the peak are obstacles that no local search moves. This planner places
them first, by a layout of their own, and the rest around them::

    address
      ^  ............. the rest (time sweep) ....................
      |  B +---------------------------+
      |    | in3 (dies last)            |
      |    +--------------------+--+    gap: free between the stacks;
      |    | in2                |     moves up as inputs die and
      |    +------------+--+    .       outputs are born
      |    | in1        |   gap    +---------------------------
      |    +------------+       +--+ out3 ...................
      |             +-----------+ out2 ........................
      |  floor +----+ out1 .......................................
      +--------------------------------------------------------> time

Steps:
- units (alias groups) with their spans (`memplan.heuristics.time_sweep.spans`);
  *inputs*: free units live at the first step and dead before the last;
  *outputs*: live at the last step, born after the first; *always*: both;
- the band: always units at the bottom; outputs stacked on them in birth
  order (they end together, so at the end they are one block); inputs
  hung from the band's top ``B`` in death order (the last to die on top;
  among inputs with no output born between their deaths, the first to die
  on top, so that its bytes join the free space above the band),
  ``B`` the lowest that keeps every input above every output born before
  it dies: the band's own live-load peak (up to alignment), so the band
  alone is optimal;
- the time sweep of `time_sweep` over every unit in time order, largest
  first at each step: an output takes its place in the stack; an input's
  bytes join the free list when it dies; any other unit takes the
  best-fitting free gap (or the lowest, ``first_fit``) at or above the top
  of the outputs born before it ends, so that no output finds its place
  taken: the gap between the stacks serves short-lived units.

Cost: O(n log n) for the sorts and the free list's bisections (as
`time_sweep`, plus one bisection a unit for its floor); memory O(n), no
pair lists. Known limits: optional aliases are never taken; pinned units
hold their bytes for the whole sweep (the band starts above them); a
problem with no long-lived units gets the time sweep's plan.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from memplan.budget import Budget, past
from memplan.heuristics.time_sweep import (
    CLOCK_EVERY,
    PLACEMENTS,
    FreeList,
    spans,
    sweep_order,
    unit_sweep_plan,
)
from memplan.heuristics.units import Units
from memplan.options import option
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.registry import register

_TOP = np.iinfo(np.int64).max


@dataclass(frozen=True)
class LongLivedOptions:
    """Options of ``long_lived``."""

    placement: str = option("best_fit", "the units outside the band: best_fit (the smallest "
                                        "gap that fits) or first_fit (the lowest)")


@dataclass
class Band:
    """Where the long-lived units go: bases per unit, and the outputs' stack by birth."""

    base: dict[int, int]  # per band unit: its base
    births: list[int]  # the outputs' births, ascending
    heights: list[int]  # heights[k]: top of the outputs' stack once births[:k + 1] are born
    floor: int  # the outputs' stack starts here (above the always units)
    top: int  # B: one past the band's highest byte
    inputs: list[int]  # input units
    outputs: list[int]  # output units
    held: dict[int, tuple[int, int]]  # per input: bytes it frees when it dies (its own, and
    # the alignment padding up to the input above it)

    def floor_until(self, end: int) -> int:
        """The lowest base for a unit that lives until ``end``: above every output born
        before then."""
        k = bisect.bisect_left(self.births, end)
        return self.heights[k - 1] if k else self.floor


def _aligned_down(units: Units, unit: int, at_most: int) -> int:
    """The highest base <= ``at_most`` that satisfies the unit's alignment."""
    return at_most - (at_most - int(units.residue[unit])) % int(units.modulus[unit])


def lay_band(units: Units, start: np.ndarray, end: np.ndarray, floor: int) -> Band:
    """The band (see the module doc), its lowest byte at ``floor`` or above."""
    free_units = units.free
    if not len(free_units):
        return Band({}, [], [], floor, floor, [], [], {})
    first_step, last_step = int(start[free_units].min()), int(end[free_units].max())
    live_first = start[free_units] == first_step
    live_last = end[free_units] == last_step
    always = free_units[live_first & live_last]
    inputs = free_units[live_first & ~live_last]
    outputs = free_units[live_last & ~live_first]
    inputs = inputs[np.lexsort((inputs, end[inputs]))].tolist()
    outputs = outputs[np.lexsort((outputs, start[outputs]))].tolist()
    extent = units.extent.tolist()
    base: dict[int, int] = {}
    height = floor
    for u in always.tolist():
        base[u] = units.aligned(u, height)
        height = base[u] + extent[u]
    stack_floor = height
    heights = []
    for u in outputs:
        base[u] = units.aligned(u, height)
        height = base[u] + extent[u]
        heights.append(height)
    births = [int(start[u]) for u in outputs]
    # inputs hang from B in death order, the last to die on top, except that inputs with no
    # output born between their deaths (the same floor) are in either order: there the first
    # to die goes on top, where its bytes join the free space above the band
    floors = np.array([heights[k - 1] if k else stack_floor
                       for k in np.searchsorted(births, end[inputs], side="left").tolist()],
                      np.int64).reshape(-1)
    ranked = np.lexsort((np.asarray(inputs, np.int64), -end[inputs], floors))
    inputs = [inputs[k] for k in ranked.tolist()]
    # positions relative to a B
    # that is a multiple of every input's alignment modulus (so shifting B keeps them)
    step = math.lcm(*(int(units.modulus[u]) for u in inputs)) if inputs else 1
    if step > 1 << 20:  # alignments too unlike to share one grid: no inputs in the band
        inputs, step = [], 1
    below, relative = 0, {}
    for u in reversed(inputs):
        relative[u] = _aligned_down(units, u, below - extent[u])
        below = relative[u]
    # B: each input above the outputs born before it dies (they meet it in time)
    top = height
    for u in inputs:
        k = bisect.bisect_left(births, int(end[u]))
        top = max(top, (heights[k - 1] if k else stack_floor) - relative[u])
    top += (-top) % step
    held = {}  # per input: the bytes it gives back when it dies (up to the next input's)
    ceiling = top
    for u in reversed(inputs):
        base[u] = top + relative[u]
        held[u] = (base[u], ceiling)
        ceiling = base[u]
    return Band(base, births, heights, stack_floor, top, inputs, outputs, held)


class _FreeList(FreeList):
    """`FreeList` that places at or above a floor, and hands out one exact range."""

    def find_above(self, extent: int, residue: int, modulus: int, best: bool,
                   floor: int) -> int:
        """The base for ``extent`` bytes at or above ``floor``: in the smallest gap whose part
        above the floor fits (``best``), or the lowest; nothing is taken yet."""
        if best:
            k = bisect.bisect_left(self.by_size, (extent, -1))
            for size, lo in self.by_size[k:]:
                at = max(lo, floor)
                at += (residue - at) % modulus
                if at + extent <= lo + size:
                    return at
        else:
            i = max(bisect.bisect_right(self.lo, floor) - 1, 0)
            for j in range(i, len(self.lo)):
                at = max(self.lo[j], floor)
                at += (residue - at) % modulus
                if at + extent <= self.hi[j]:
                    return at
        at = max(self.lo[-1], floor)  # the open gap at the top
        return at + (residue - at) % modulus

    def take_at(self, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)``, which lie in one free gap, are taken."""
        i = bisect.bisect_right(self.lo, lo) - 1
        gap_lo, gap_hi = self.lo[i], self.hi[i]
        if not (gap_lo <= lo and hi <= gap_hi):
            raise AssertionError(f"bytes [{lo}, {hi}) are not free")
        self._remove(i)
        for a, b in ((hi, gap_hi), (gap_lo, lo)):
            if b > a:
                self._insert(i, a, b)


class _InPlace:
    """The bytes each placed unit gives back, and optional aliases taken in place.

    A unit whose optional alias partner is live and ends no later than it may
    sit where the alias says, inside the partner's bytes (an in-place
    operator): those bytes then pass to it. Not when the partner itself sits
    in the bytes of a unit still live (the two ends of a chain would share),
    nor against an explicit conflict.
    """

    def __init__(self, units: Units, start: np.ndarray, end: np.ndarray):
        self.units, self.start, self.end = units, start, end
        self.owned: dict[int, list[tuple[int, int]]] = {}  # live unit: bytes it gives back
        self.source: dict[int, int] = {}  # unit: the unit whose bytes it took
        conflicts = units.problem.conflicts
        self.conflicting = {(int(a), int(b)) for a, b in units.unit_of[conflicts].tolist()}
        self.taken = 0

    def own(self, unit: int, at: int) -> None:
        self.owned[unit] = [(at, at + int(self.units.extent[unit]))]

    def release(self, unit: int) -> list[tuple[int, int]]:
        """The bytes ``unit`` gives back as it dies."""
        return [(lo, hi) for lo, hi in self.owned.pop(unit, ()) if hi > lo]

    def spot(self, unit: int, base: np.ndarray, lowest: int, highest: int, now: int,
             is_band: np.ndarray) -> int | None:
        """The base an optional alias gives ``unit`` inside a live partner's bytes, between
        ``lowest`` and ``highest`` (where it would go otherwise: an alias never lifts a
        unit, nor carries a chain of in-place operators up where it began), taken; or
        None."""
        units = self.units
        extent, residue, modulus = (int(units.extent[unit]), int(units.residue[unit]),
                                    int(units.modulus[unit]))
        for partner, shift in units.optional[unit]:
            other = int(units.unit_of[partner])
            if (other not in self.owned or is_band[other] or self.end[unit] < self.end[other]
                    or (unit, other) in self.conflicting or (other, unit) in self.conflicting):
                continue
            source = self.source.get(other)
            if source is not None and self.end[source] > now:
                continue
            at = int(base[other]) + int(units.rel[partner]) + shift
            if at < lowest or at > highest or (at - residue) % modulus:
                continue
            pieces = self.owned[other]
            for k, (lo, hi) in enumerate(pieces):
                if lo <= at and at + extent <= hi:
                    pieces[k:k + 1] = [(lo, at), (at + extent, hi)]
                    self.owned[unit] = [(at, at + extent)]
                    self.source[unit] = other
                    self.taken += 1
                    return at
        return None


def band_offsets(units: Units, placement: str = "best_fit",
                 deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """Buffer offsets: the band, and the time sweep of the other units (the module doc)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
    best = placement == "best_fit"
    count = len(units)
    start, end = spans(units)
    pinned = units.pinned
    floor = int((units.pinned_base + units.extent)[pinned].max(initial=0))
    band = lay_band(units, start, end, floor)
    # the band's bytes are held from the start: an input's bytes return when it dies, an
    # output's gap (between the stacks) is free until it is born
    held = [(int(units.pinned_base[u]), int(units.pinned_base[u] + units.extent[u]))
            for u in pinned.tolist()] + [(0, band.top)]
    free = _FreeList(held)
    extent, residue, modulus = (units.extent.tolist(), units.residue.tolist(),
                                units.modulus.tolist())
    lowest_input = min((band.held[u][0] for u in band.inputs), default=band.top)
    if lowest_input > band.floor:  # between the stacks at the start: free until outputs come
        free.give(band.floor, lowest_input)
    is_band = np.zeros(count, bool)
    is_band[list(band.base)] = True
    is_output = np.zeros(count, bool)
    is_output[band.outputs] = True
    base = np.zeros(count, np.int64)
    base[pinned] = units.pinned_base[pinned]
    for u, b in band.base.items():
        base[u] = b
    peak = max(floor, band.top)
    order, starts, by_end, ends = sweep_order(units, start, end)
    starts, by_end, ends = starts.tolist(), by_end.tolist(), ends.tolist()
    released, cut, in_gap = 0, 0, 0
    inplace = _InPlace(units, start, end)
    for position, unit in enumerate(order.tolist()):
        if cut or (deadline is not None and position % CLOCK_EVERY == 0 and past(deadline)):
            cut = cut or len(order) - position
            if not is_band[unit]:
                at = peak + (residue[unit] - peak) % modulus[unit]
                base[unit] = at
                peak = at + extent[unit]
            continue
        now = starts[position]
        while released < len(by_end) and ends[released] <= now:
            done = by_end[released]
            released += 1
            if done in band.held:
                free.give(*band.held[done])
            elif not is_band[done]:
                for lo, hi in inplace.release(done):
                    free.give(lo, hi)
        if is_band[unit]:
            if is_output[unit] and extent[unit]:  # its place in the stack: free, by design
                free.take_at(int(base[unit]), int(base[unit]) + extent[unit])
            continue
        if extent[unit] == 0:
            continue
        lowest = band.floor_until(int(end[unit]))
        fits = free.find_above(extent[unit], residue[unit], modulus[unit], best, lowest)
        at = inplace.spot(unit, base, lowest, fits, now, is_band)
        if at is None:
            at = fits
            free.take_at(at, at + extent[unit])
            inplace.own(unit, at)
        in_gap += at < band.top
        base[unit] = at
        peak = max(peak, at + extent[unit])
    return units.offsets(base), {"placement": placement, "cut": cut,
                                 "band_units": len(band.base), "band_top": band.top,
                                 "in_band": int(in_gap), "optional_aliases_taken": inplace.taken}


@register("long_lived")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The band plan (see the module doc); ``seed`` and ``hint`` are not used."""
    return unit_sweep_plan("long_lived", band_offsets, problem, budget, LongLivedOptions(),
                           options)


plan.options = LongLivedOptions()
