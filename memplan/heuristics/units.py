"""Placement units: what the heuristics move, and which placed buffers each one must avoid.

A *unit* is a group of buffers tied together by mandatory aliases (a lone
buffer is a unit of one). The group has one free offset, its *base* (the
lowest member offset); every member sits at ``base + rel[member]``. So a unit
occupies the union of its members' time x address boxes::

    address
      ^        +------+
      |        | cat  |            cat = [a | b]: a at rel 0, b at rel 32;
      |  +-----+--+---+            the unit is placed as one piece
      |  |  a  |  b   |
      +--+--------+---+--> time

Which placed buffers a unit must keep clear of is fixed by the problem:
buffers whose lifetimes intersect a member's, and explicit conflicts.
`Units` lists these *pairs* once, up front, as CSR arrays per unit (member,
other buffer), so that placing a unit looks only at the buffers it can touch
instead of every placed buffer (the all-pairs loop of TFLite-Micro's
planner).

Steps of `Units.build`:
- alias groups from `Problem.alias_groups`; ``rel`` = delta - lowest delta;
- per unit: extent (highest member top above the base), lifetime span,
  alignment as one congruence ``base % modulus == residue`` (the members'
  alignments combined, Chinese remainder), pinned base if a member is pinned;
- lifetime pairs by a sort on start times: a buffer meets every buffer that
  starts inside its lifetime, one contiguous run of the sorted order, so the
  pairs come out of `np.repeat` without a loop; explicit conflicts appended.

Cost: O(n log n + E) time and memory for E conflicting pairs (about n times
the number of buffers live at once on network-like schedules; a problem
where everything overlaps everything needs O(n^2)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.errors import ProblemError
from memplan.groups import group_congruence
from memplan.problem import NO_OFFSET, Problem


def time_overlap_pairs(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every intersecting pair ``(a, b)`` of half-open intervals, once; O(n log n + E)."""
    order = np.argsort(starts, kind="stable")
    sorted_starts = starts[order]
    last = np.searchsorted(sorted_starts, ends[order], side="left")  # first that starts after
    counts = np.maximum(last - np.arange(len(order)) - 1, 0)
    first = np.repeat(np.arange(len(order)), counts)
    run_begin = np.repeat(np.cumsum(counts) - counts, counts)
    second = first + 1 + (np.arange(len(first)) - run_begin)
    return order[first], order[second]


@dataclass(frozen=True, eq=False)
class Units:
    """The problem seen as units; every array is indexed by unit or by buffer as named."""

    problem: Problem
    unit_of: np.ndarray  # per buffer: its unit
    rel: np.ndarray  # per buffer: offset - its unit's base (>= 0)
    member_ptr: np.ndarray  # CSR over units into member_buffers
    member_buffers: np.ndarray  # the buffers of each unit, unit by unit
    extent: np.ndarray  # per unit: bytes from the base to the highest member top
    start: np.ndarray  # per unit: first step any member is live
    end: np.ndarray  # per unit: one past the last step any member is live
    residue: np.ndarray  # per unit: base % modulus must equal residue (alignment)
    modulus: np.ndarray  # per unit
    pinned_base: np.ndarray  # per unit: its fixed base, or NO_OFFSET
    pair_ptr: np.ndarray  # CSR over units into pair_member / pair_other
    pair_member: np.ndarray  # a member of the unit ...
    pair_other: np.ndarray  # ... and a buffer of another unit it must not share bytes with
    optional: list[list[tuple[int, int]]]  # per unit: (partner buffer, c): base = off[p] + c

    def __len__(self) -> int:
        return len(self.extent)

    def members(self, unit: int) -> np.ndarray:
        """The buffers of ``unit``."""
        return self.member_buffers[self.member_ptr[unit]:self.member_ptr[unit + 1]]

    @property
    def first_member(self) -> np.ndarray:
        """Per unit: one of its buffers."""
        return self.member_buffers[self.member_ptr[:-1]]

    @property
    def free(self) -> np.ndarray:
        """The units a planner chooses offsets for (not pinned)."""
        return np.flatnonzero(self.pinned_base == NO_OFFSET)

    @property
    def pinned(self) -> np.ndarray:
        return np.flatnonzero(self.pinned_base != NO_OFFSET)

    def offsets(self, base: np.ndarray) -> np.ndarray:
        """Buffer offsets from unit bases."""
        return base[self.unit_of] + self.rel

    def aligned(self, unit: int, at_least: int) -> int:
        """The lowest base >= ``at_least`` that satisfies the unit's alignment."""
        return at_least + (int(self.residue[unit]) - at_least) % int(self.modulus[unit])

    @classmethod
    def build(cls, problem: Problem) -> Units:
        root, delta = problem.alias_groups
        roots, unit_of = np.unique(root, return_inverse=True)
        count = len(roots)
        low = np.full(count, np.iinfo(np.int64).max)
        np.minimum.at(low, unit_of, delta)
        rel = delta - low[unit_of]
        sizes = problem.sizes
        extent = np.zeros(count, np.int64)
        np.maximum.at(extent, unit_of, rel + sizes)
        start = np.full(count, np.iinfo(np.int64).max)
        np.minimum.at(start, unit_of, problem.starts)
        end = np.zeros(count, np.int64)
        np.maximum.at(end, unit_of, problem.ends)
        member_buffers = np.argsort(unit_of, kind="stable")
        member_ptr = np.zeros(count + 1, np.int64)
        np.cumsum(np.bincount(unit_of, minlength=count), out=member_ptr[1:])

        residue = np.zeros(count, np.int64)
        modulus = np.ones(count, np.int64)
        lone = np.bincount(unit_of, minlength=count) == 1
        modulus[unit_of[lone[unit_of]]] = problem.alignments[lone[unit_of]]
        for unit in np.flatnonzero(~lone):
            members = member_buffers[member_ptr[unit]:member_ptr[unit + 1]]
            residue[unit], modulus[unit] = group_congruence(problem, members, rel[members])

        pinned_base = np.full(count, NO_OFFSET, np.int64)
        held = np.flatnonzero(problem.pinned != NO_OFFSET)
        pinned_base[unit_of[held]] = problem.pinned[held] - rel[held]
        for b in held.tolist():
            base = int(pinned_base[unit_of[b]])
            if base < 0 or (base - residue[unit_of[b]]) % modulus[unit_of[b]]:
                raise ProblemError("its pinned offset puts a member of its alias group below 0 "
                                   "or off its alignment", file=problem.source,
                                   buffer=problem.ids[b])

        a, b = time_overlap_pairs(problem.starts, problem.ends)
        a = np.concatenate([a, problem.conflicts[:, 0]])
        b = np.concatenate([b, problem.conflicts[:, 1]])
        keep = unit_of[a] != unit_of[b]
        member = np.concatenate([a[keep], b[keep]]).astype(np.int32)
        other = np.concatenate([b[keep], a[keep]]).astype(np.int32)
        by_pair_unit = np.argsort(unit_of[member], kind="stable")
        pair_member, pair_other = member[by_pair_unit], other[by_pair_unit]
        pair_ptr = np.zeros(count + 1, np.int64)
        np.cumsum(np.bincount(unit_of[member], minlength=count), out=pair_ptr[1:])

        optional: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        for k in np.flatnonzero(problem.alias_optional).tolist():
            src, dst = int(problem.alias_src[k]), int(problem.alias_dst[k])
            d = int(problem.alias_delta[k])
            if unit_of[src] != unit_of[dst]:  # base of dst's unit = off[src] + d - rel[dst]
                optional[unit_of[dst]].append((src, d - int(rel[dst])))
                optional[unit_of[src]].append((dst, -d - int(rel[src])))
        for arr in (unit_of, rel, member_ptr, member_buffers, extent, start, end, residue,
                    modulus, pinned_base):
            arr.flags.writeable = False
        return cls(problem, unit_of, rel, member_ptr, member_buffers, extent, start, end,
                   residue, modulus, pinned_base, pair_ptr, pair_member, pair_other, optional)
