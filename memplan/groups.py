"""Alias groups: the buffers that mandatory aliases tie to one base offset.

Every planner places alias groups (*units*), not buffers: a group moves as
one block, its members at fixed distances ``rel`` above the group's *base*
(the lowest member offset)::

    address
      ^        +------+
      |        | cat  |            cat = [a | b]: a at rel 0, b at rel 32;
      |  +-----+--+---+            the unit is placed as one piece
      |  |  a  |  b   |
      +--+--------+---+--> time

`alias_units` turns `Problem.alias_groups` (the weighted union-find in
problem.py) into the units every planner builds on (the heuristics'
`Units`, the exact model's geometry, the region planners):

- units numbered in the order of their groups' roots; ``rel`` = delta -
  the group's lowest delta;
- per unit: members (CSR), extent (highest member top above the base),
  alignment as one congruence ``base % modulus == residue`` (the members'
  alignments combined by the Chinese remainder theorem), and the pinned base
  if a member is pinned (checked against the congruence).

Cost: O(n log n) for n buffers, plus O(m log a) per group of m > 1 members.
Layer 1: imports only problem and errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memplan.errors import ProblemError
from memplan.problem import NO_OFFSET, Problem


def combine_congruences(first: tuple[int, int], second: tuple[int, int]) -> tuple[int, int] | None:
    """``x % m1 == r1`` and ``x % m2 == r2`` as one ``(residue, modulus)``, or None if none.

    The Chinese remainder theorem for moduli that need not be coprime: O(log m).
    """
    (r1, m1), (r2, m2) = first, second
    g = math.gcd(m1, m2)
    if (r2 - r1) % g:
        return None
    lcm = m1 // g * m2
    step = ((r2 - r1) // g * pow(m1 // g, -1, m2 // g)) % (m2 // g) if m2 // g > 1 else 0
    return (r1 + m1 * step) % lcm, lcm


def group_congruence(problem: Problem, members, rel) -> tuple[int, int]:
    """``(residue, modulus)``: ``base % modulus == residue`` aligns every member.

    ``members`` are buffer indices, ``rel`` their offsets above the base.
    Raises `ProblemError` naming the member whose alignment cannot hold.
    """
    congruence = (0, 1)
    for idx, r in zip(members, rel, strict=True):
        align = int(problem.alignments[idx])
        congruence = combine_congruences(congruence, (-int(r) % align, align))
        if congruence is None:
            raise ProblemError(f"no offset aligns every buffer of its alias group (alignment "
                               f"{align} at {int(r)} bytes above the group's base)",
                               file=problem.source, buffer=problem.ids[idx])
    return congruence


@dataclass(frozen=True, eq=False)
class AliasUnits:
    """The problem seen as alias groups; arrays are indexed by unit or by buffer as named."""

    problem: Problem
    unit_of: np.ndarray  # per buffer: its unit
    rel: np.ndarray  # per buffer: offset - its unit's base (>= 0)
    member_ptr: np.ndarray  # CSR over units into member_buffers
    member_buffers: np.ndarray  # the buffers of each unit, unit by unit, in index order
    extent: np.ndarray  # per unit: bytes from the base to the highest member top
    residue: np.ndarray  # per unit: base % modulus must equal residue (alignment)
    modulus: np.ndarray  # per unit
    pinned_base: np.ndarray  # per unit: its fixed base, or NO_OFFSET

    def __len__(self) -> int:
        return len(self.extent)

    def members(self, unit: int) -> np.ndarray:
        """The buffers of ``unit``."""
        return self.member_buffers[self.member_ptr[unit]:self.member_ptr[unit + 1]]

    @property
    def first_member(self) -> np.ndarray:
        """Per unit: its lowest-numbered buffer."""
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


def alias_units(problem: Problem) -> AliasUnits:
    """The units of ``problem``; see the module docstring. Raises `ProblemError` naming
    a buffer whose group cannot be aligned or whose pin puts the group below 0 or off it."""
    root, delta = problem.alias_groups
    roots, unit_of = np.unique(root, return_inverse=True)
    count = len(roots)
    low = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(low, unit_of, delta)
    rel = delta - low[unit_of]
    extent = np.zeros(count, np.int64)
    np.maximum.at(extent, unit_of, rel + problem.sizes)
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
    for arr in (unit_of, rel, member_ptr, member_buffers, extent, residue, modulus,
                pinned_base):
        arr.flags.writeable = False
    return AliasUnits(problem, unit_of, rel, member_ptr, member_buffers, extent, residue,
                      modulus, pinned_base)
