"""Placement: given an order of units, put each one at an offset (XLA's heap simulator).

The order (`memplan.heuristics.order`) says *which* unit goes next; the
placement policy says *where*:

- ``best_fit``: the smallest gap that fits among the placed buffers this unit
  must avoid (lifetime overlap or explicit conflict), else on top of them
  (TensorFlow Lite's greedy planner, XLA's best-fit heap);
- ``first_fit``: the lowest offset that fits (what a runtime allocator gets);
- ``stack``: on top of everything placed so far (no reuse: the naive plan).

Gaps are searched in *base space*: a placed buffer ``j`` forbids the unit's
base on ``(off[j] - rel[m] - size[m], off[j] + size[j] - rel[m])`` for each
member ``m`` it meets, so alias groups, alignment and pinned obstacles are one
computation::

    base forbidden:     [====)      [==)  [=====)
    free gaps:      [..)      [....)    ..       [..... on top
                     0

Steps of `Placer.place`:
- pinned units first, at their offsets (two pinned buffers that collide make
  the problem impossible: `ProblemError`);
- each unit of the order: gather the forbidden intervals of its placed
  partners (`Units` lists them), sort, sweep for the gap the policy wants,
  round up to the unit's alignment;
- optional aliases: when an aliased partner is placed, the spot the alias asks
  for is taken if it is free (only the partner's own mandatory group may
  overlap it, as the validator allows: an in-place write serves one output,
  so units joined to the partner by other taken aliases count as obstacles)
  and it does not end above both the current peak and the policy's own spot.

Cost: O(sum over units of k log k) for k placed partners, i.e.
O(E log L) for E conflicting pairs and L buffers live at once; a few numpy
calls per unit (about 20 us).

A ``deadline`` (a `time.perf_counter` value) makes the pass keep a time
limit: once it passes, the units not placed yet are *stacked* on top of
everything placed (O(1) each), so the pass still returns a valid plan, and
`Placer.cut` says how many units it stacked (0: the pass ran to the end).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from memplan.budget import past
from memplan.errors import ProblemError
from memplan.heuristics.units import Units

PLACEMENTS = ("best_fit", "first_fit", "stack")
_NEVER = np.iinfo(np.int64).max
SMALL = 40  # up to this many intervals, a plain loop beats numpy's per-call cost
CLOCK_EVERY = 64  # units placed between two looks at the clock (when there is a deadline)


def choose_gap(forbid_lo: np.ndarray, forbid_hi: np.ndarray, residue: int, modulus: int,
               best: bool) -> int:
    """The base that fits among forbidden half-open intervals: best fit or lowest; O(k log k).

    Gap ``i`` runs from the highest end of the intervals before it (or 0) to
    the start of interval ``i``; the last gap is open above. Few intervals go
    through a plain loop, many through numpy (each is faster on its side).
    """
    if len(forbid_lo) <= SMALL:
        return _gap_by_loop(forbid_lo.tolist(), forbid_hi.tolist(), residue, modulus, best)
    return _gap_by_numpy(forbid_lo, forbid_hi, residue, modulus, best)


def _gap_by_loop(forbid_lo: list[int], forbid_hi: list[int], residue: int, modulus: int,
                 best: bool) -> int:
    reach, tightest, chosen = 0, None, None
    for lo, hi in sorted(zip(forbid_lo, forbid_hi, strict=True)):
        base = reach + (residue - reach) % modulus
        if base < lo:
            if not best:
                return base
            if tightest is None or lo - reach < tightest:
                tightest, chosen = lo - reach, base
        reach = max(reach, hi)
    return chosen if chosen is not None else reach + (residue - reach) % modulus


def _gap_by_numpy(forbid_lo: np.ndarray, forbid_hi: np.ndarray, residue: int, modulus: int,
                  best: bool) -> int:
    order = np.argsort(forbid_lo, kind="stable")
    gap_end = forbid_lo[order]
    gap_start = np.empty(len(order) + 1, np.int64)
    gap_start[0] = 0
    np.maximum(np.maximum.accumulate(forbid_hi[order]), 0, out=gap_start[1:])
    base = gap_start + (residue - gap_start) % modulus
    fits = base[:-1] < gap_end
    if best:
        room = np.where(fits, gap_end - gap_start[:-1], _NEVER)
        i = int(room.argmin())
        return int(base[i]) if fits[i] else int(base[-1])
    i = int(fits.argmax())
    return int(base[i]) if fits[i] else int(base[-1])


class Placer:
    """Places units of one problem in any order; reusable for many orders (order search)."""

    def __init__(self, units: Units):
        self.units = units
        sizes = units.problem.sizes
        member, other = units.pair_member, units.pair_other
        self.pair_reach = units.rel[member] + sizes[member] - 1  # rel + size - 1 of the member
        self.pair_shift = sizes[other] - units.rel[member]  # partner's size - rel of the member
        self.taken = 0  # optional aliases taken by the last `place`
        self.cut = 0  # units the last `place` stacked because its deadline had passed
        unit_of = units.unit_of  # unit pairs an explicit conflict keeps apart, alias or not
        self.conflicting = {(int(unit_of[a]), int(unit_of[b])) for a, b in
                            units.problem.conflicts.tolist()}
        self.conflicting |= {(b, a) for a, b in self.conflicting}
        self.has_optional = any(units.optional)  # then `place` cannot reuse a prefix

    def forbidden(self, unit: int, offsets: np.ndarray, placed: np.ndarray):
        """(forbid_lo, forbid_hi, other) for the placed partners of ``unit``."""
        units = self.units
        a, b = units.pair_ptr[unit], units.pair_ptr[unit + 1]
        other = units.pair_other[a:b]
        mask = placed[other]
        other = other[mask]
        at = offsets[other]
        return at - self.pair_reach[a:b][mask], at + self.pair_shift[a:b][mask], other

    def place(self, order: Iterable[int], placement: str = "best_fit", *,
              reuse: np.ndarray | None = None, prefix: int = 0,
              deadline: float | None = None) -> np.ndarray:
        """Buffer offsets: pinned units first, then ``order`` (unit indices) by ``placement``.

        ``reuse``: the offsets an earlier call gave an order that starts with the
        same ``prefix`` units (same placement, no optional aliases in the
        problem): those units keep them and only the rest is placed again, which
        is what makes an order search's small moves cheap. ``deadline``: past
        it, the remaining units are stacked (see the module doc, `cut`).
        """
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
        units = self.units
        problem = units.problem
        offsets = np.zeros(len(problem), np.int64)
        placed = np.zeros(len(problem), bool)
        peak = 0
        self.taken = self.cut = 0
        best = placement == "best_fit"

        single = np.diff(units.member_ptr) == 1
        first = units.first_member

        def put(unit: int, base: int) -> int:
            if single[unit]:
                offsets[first[unit]] = base
                placed[first[unit]] = True
            else:
                members = units.members(unit)
                offsets[members] = base + units.rel[members]
                placed[members] = True
            return max(peak, base + int(units.extent[unit]))

        for unit in units.pinned.tolist():
            base = int(units.pinned_base[unit])
            lo, hi, other = self.forbidden(unit, offsets, placed)
            linked = [int(units.unit_of[partner]) for partner, shift in units.optional[unit]
                      if placed[partner] and offsets[partner] + shift == base
                      and (unit, int(units.unit_of[partner])) not in self.conflicting]
            clash = (lo <= base) & (base < hi) & ~np.isin(units.unit_of[other], linked)
            if clash.any():
                j = int(other[clash.argmax()])
                mine = first[unit]
                raise ProblemError(f"pinned where pinned {problem.ids[j]!r} is, while both "
                                   f"are live or in conflict", file=problem.source,
                                   buffer=problem.ids[mine])
            peak = put(unit, base)

        if prefix:
            if reuse is None or self.has_optional:
                raise ValueError("reuse needs the earlier offsets and a problem without "
                                 "optional aliases")
            order = np.asarray(order)
            kept = np.isin(units.unit_of, order[:prefix])
            offsets[kept], placed[kept] = reuse[kept], True
            peak = max(peak, int((reuse + problem.sizes)[kept].max(initial=0)))
            order = order[prefix:]
        for count, unit in enumerate(order):
            if self.cut:
                peak = put(unit, units.aligned(unit, peak))
                continue
            if deadline is not None and count % CLOCK_EVERY == 0 and past(deadline):
                self.cut = len(order) - count
                peak = put(unit, units.aligned(unit, peak))
                continue
            residue, modulus = int(units.residue[unit]), int(units.modulus[unit])
            if placement == "stack" and not (units.optional[unit] and units.has_pairs):
                peak = put(unit, units.aligned(unit, peak))
                continue
            lo, hi, other = self.forbidden(unit, offsets, placed)
            if placement == "stack":
                base = units.aligned(unit, peak)
            else:
                base = choose_gap(lo, hi, residue, modulus, best)
            if units.optional[unit]:
                base = self._take_alias(unit, base, peak, lo, hi, other, offsets, placed)
            peak = put(unit, base)
        return offsets

    def _take_alias(self, unit, base, peak, lo, hi, other, offsets, placed) -> int:
        """The base an optional alias asks for when it is free and no higher; else ``base``."""
        units = self.units
        ceiling = max(peak, base + int(units.extent[unit]))
        for partner, shift in units.optional[unit]:
            if not placed[partner]:
                continue
            spot = int(offsets[partner]) + shift
            partner_unit = int(units.unit_of[partner])
            if (unit, partner_unit) in self.conflicting:
                continue  # an explicit conflict holds whatever the alias says
            if (spot < 0 or (spot - units.residue[unit]) % units.modulus[unit]
                    or spot + units.extent[unit] > ceiling):
                continue
            outside = units.unit_of[other] != partner_unit  # only the partner's own group
            if not ((lo <= spot) & (spot < hi) & outside).any():
                self.taken += 1
                return spot
        return base
