"""Alias groups: the buffers that mandatory aliases tie to one base offset.

Every planner places alias groups, not buffers: a group moves as one block
(its members at fixed distances ``rel`` above the group's base). This module
holds what every planner needs of a group beyond `Problem.alias_groups` (the
weighted union-find): the congruence ``base % modulus == residue`` that
aligns every member at once. Layer 1: imports only problem and errors.
"""

from __future__ import annotations

import math

from memplan.errors import ProblemError
from memplan.problem import Problem


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
