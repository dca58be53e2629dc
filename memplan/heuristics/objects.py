"""Objects: buffers share whole blocks instead of offsets (pools, GPU shared objects).

Some back ends cannot place a tensor at any offset: a buffer pool hands out
whole blocks, a GPU assigns textures. A unit (an alias group, see
`memplan.heuristics.units`) then takes one *object*, which it shares only with
units whose lifetimes it does not meet; the object is as large as the
largest unit it ever holds::

    object 0  [ a ][  c  ]      a, c, e never live at once: one object,
    object 1  [  b  ][ d ]      as large as the largest of them

Steps of `assign_objects`:
- take the units in the given order; for each, list the objects it may
  join: large enough, no member live at the same time (the units' lifetime
  spans, kept merged and sorted per object for a bisect), no explicit
  conflict, alignments that can hold together;
- an optional alias first: join the partner's object at the alias's spot
  when that fits inside the object and meets only the partner's own group;
- else the candidate the rule prefers (``closest_size``: smallest object
  that fits; ``latest_free``: the one whose last use ended last), else a new
  object of the unit's size.

`lay_out` then puts the objects one above another from 0 (first fit around
pinned buffers, which never join an object). Costs: O(n * c) for c objects
tried per unit (the preferred one usually fits); a new object is O(1).
With a deadline the clock is read before every unit; past it, each unit left
gets a new object of its own (``cut`` counts them: stacking).
Known limit: a unit holds its object for its whole span (first member start
to last member end), which can waste room inside a long alias group.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from memplan.budget import past
from memplan.groups import combine_congruences
from memplan.heuristics.placement import Placer, choose_gap
from memplan.heuristics.units import Units

PREFERENCES = ("closest_size", "latest_free")


@dataclass
class SharedObject:
    """One block: its size, when it is busy, where its units sit inside it."""

    size: int
    residue: int  # the object's base % modulus must equal residue
    modulus: int
    busy_starts: list[int] = field(default_factory=list)  # merged busy spans, sorted
    busy_ends: list[int] = field(default_factory=list)
    units: list[int] = field(default_factory=list)
    last_end: int = 0

    def free_during(self, start: int, end: int) -> bool:
        i = bisect_right(self.busy_starts, start)
        if i and self.busy_ends[i - 1] > start:
            return False
        return i == len(self.busy_starts) or self.busy_starts[i] >= end

    def occupy(self, unit: int, start: int, end: int) -> None:
        i = bisect_right(self.busy_starts, start)
        if i and self.busy_ends[i - 1] >= start:  # merge with the span before
            i -= 1
        j = i
        while j < len(self.busy_starts) and self.busy_starts[j] <= end:
            start, end = min(start, self.busy_starts[j]), max(end, self.busy_ends[j])
            j += 1
        self.busy_starts[i:j] = [start]
        self.busy_ends[i:j] = [end]
        self.units.append(unit)
        self.last_end = max(self.last_end, end)


@dataclass
class Assignment:
    """Units to objects: ``object_of[unit]`` (-1 for pinned units), its position inside it."""

    objects: list[SharedObject]
    object_of: np.ndarray
    position: np.ndarray
    taken: int = 0  # optional aliases taken
    own: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # units past the
    # deadline: each in an object of its own, laid out after ``objects``

    @property
    def cut(self) -> int:
        """Units given objects of their own because the deadline passed."""
        return len(self.own)


def object_sizes(units: Units, assignment: Assignment) -> list[int]:
    """The size of every object, the units' own ones (past the deadline) last."""
    return [o.size for o in assignment.objects] + units.extent[assignment.own].tolist()


def _explicit_partners(units: Units) -> dict[int, set[int]]:
    """The units each unit is in explicit conflict with (only those that have any)."""
    partners: dict[int, set[int]] = {}
    for a, b in units.unit_of[units.problem.conflicts].tolist():
        if a != b:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
    return partners


def assign_objects(units: Units, order: np.ndarray, prefer: str,
                   deadline: float | None = None) -> Assignment:
    """Give every unit of ``order`` an object (see the module doc); ``deadline``: a
    `time.perf_counter` value past which the units left get new objects (``cut``)."""
    if prefer not in PREFERENCES:
        raise ValueError(f"unknown preference {prefer!r}; valid: {', '.join(PREFERENCES)}")
    objects: list[SharedObject] = []
    object_of = np.full(len(units), -1, np.int64)
    position = np.zeros(len(units), np.int64)
    partners = _explicit_partners(units)
    assignment = Assignment(objects, object_of, position)

    def allowed(unit: int, index: int, pos: int) -> tuple[int, int] | None:
        """The object's new congruence if ``unit`` may sit at ``pos`` in object ``index``."""
        if any(object_of[v] == index for v in partners.get(unit, ())):
            return None
        obj = objects[index]
        need = ((int(units.residue[unit]) - pos) % int(units.modulus[unit]),
                int(units.modulus[unit]))
        return combine_congruences((obj.residue, obj.modulus), need)

    order = order.tolist()
    for count, unit in enumerate(order):
        if past(deadline):  # every unit: one may
            # try hundreds of objects (~1 ms), and a clock read costs ~60 ns
            assignment.own = np.array(order[count:], np.int64)
            break
        start, end = int(units.start[unit]), int(units.end[unit])
        extent = int(units.extent[unit])
        chosen = None
        for partner, shift in units.optional[unit]:
            index = int(object_of[units.unit_of[partner]])
            if index < 0:
                continue
            pos = int(position[units.unit_of[partner]] + units.rel[partner]) + shift
            obj = objects[index]
            meets_only_partner = all(  # an in-place write serves one partner, not its chain
                v == units.unit_of[partner] or units.end[v] <= start
                or units.start[v] >= end for v in obj.units)
            congruence = allowed(unit, index, pos) if meets_only_partner else None
            if 0 <= pos and pos + extent <= obj.size and congruence is not None:
                chosen = (index, pos, congruence)
                assignment.taken += 1
                break
        if chosen is None:
            fitting = [i for i, obj in enumerate(objects) if obj.size >= extent]
            if prefer == "closest_size":
                fitting.sort(key=lambda i: (objects[i].size, i))
            else:
                fitting.sort(key=lambda i: (-objects[i].last_end, i))
            for index in fitting:
                if objects[index].free_during(start, end):
                    congruence = allowed(unit, index, 0)
                    if congruence is not None:
                        chosen = (index, 0, congruence)
                        break
        if chosen is None:
            objects.append(SharedObject(extent, int(units.residue[unit]),
                                        int(units.modulus[unit])))
            chosen = (len(objects) - 1, 0, (objects[-1].residue, objects[-1].modulus))
        index, pos, (residue, modulus) = chosen
        obj = objects[index]
        obj.residue, obj.modulus = residue, modulus
        obj.occupy(unit, start, end)
        object_of[unit], position[unit] = index, pos
    return assignment


def lay_out(units: Units, assignment: Assignment) -> np.ndarray:
    """Buffer offsets: pinned units where pinned, objects stacked from 0 around them, the
    units' own objects (past the deadline) last; without pinned units each object right
    above the last, O(n + objects)."""
    if len(units.pinned):
        return _lay_out_around_pinned(units, assignment)
    base, top = [0] * len(units), 0
    for obj in assignment.objects:
        at = top + (obj.residue - top) % obj.modulus
        for unit in obj.units:
            base[unit] = at
        top = at + obj.size
    own = assignment.own
    for unit, size, residue, modulus in zip(own.tolist(), units.extent[own].tolist(),
                                            units.residue[own].tolist(),
                                            units.modulus[own].tolist(), strict=True):
        base[unit] = top + (residue - top) % modulus
        top = base[unit] + size
    return (np.array(base, np.int64) + assignment.position)[units.unit_of] + units.rel


def _lay_out_around_pinned(units: Units, assignment: Assignment) -> np.ndarray:
    """`lay_out` when pinned units hold bytes: each object at the lowest gap above the
    last that none of its units' pinned partners touch (first fit)."""
    own = assignment.own.tolist()
    blocks = [(o.size, o.residue, o.modulus, o.units) for o in assignment.objects]
    blocks += zip(units.extent[own].tolist(), units.residue[own].tolist(),
                  units.modulus[own].tolist(), ([u] for u in own), strict=True)
    position = assignment.position
    placer = Placer(units)
    offsets = placer.place([], "stack")  # pinned units only
    pinned = np.zeros(len(units.problem), bool)
    for unit in units.pinned.tolist():
        pinned[units.members(unit)] = True
    top = 0
    for size, residue, modulus, held in blocks:
        lows, highs = [np.array([np.iinfo(np.int64).min])], [np.array([top])]
        for unit in held:
            lo, hi, _ = placer.forbidden(unit, offsets, pinned)
            lows.append(lo - int(position[unit]))
            highs.append(hi - int(position[unit]))
        base = choose_gap(np.concatenate(lows), np.concatenate(highs), residue, modulus,
                          best=False)
        for unit in held:
            members = units.members(unit)
            offsets[members] = base + position[unit] + units.rel[members]
        top = base + size
    return offsets
