"""Shrink a problem before CP-SAT sees it, and put the plans of the pieces back together.

CP-SAT's speed depends on the magnitude of the values it reasons about and on
the size of the model, so the exact planner never hands it a problem as read:

- **scale**: divide sizes, alias deltas, pinned offsets and alignments by their
  greatest common divisor ``g`` (the capacity is floored to ``capacity // g``, at
  least 1: a capacity below ``g`` is below every size, and the planner reports
  it infeasible from the lower bound before any search);
- **renumber time** to the ranks of the distinct start and end points (only
  the order of the points matters for half-open lifetimes);
- **split** into independent *parts*: buffers joined by a chain of lifetime
  overlaps, aliases or explicit conflicts stay together, everything else is
  solved apart; the arena of the whole is the largest part's arena::

      address                       two parts: nothing spans the cut at t,
        ^  +---+  +-+  :  +----+    so each is laid out from offset 0 on its
        |  |   +--+ |  :  |    |    own and the peak is the higher part's
        +--+--------+--:--+----+--> time
                       t

- **sink** (`sink_spanning`, on the large parts that the neighbourhood search
  improves): the buffers live over the whole part go to the bottom of the
  warm start, so that the search meets the buffers that set the peak.

Why scaling is exact: take any valid plan and floor every offset to a multiple
of ``g``. Because every size and delta is a multiple of ``g``, ``a + size_a <=
b`` implies ``floor(a) + size_a <= floor(b)``, honoured aliases stay honoured,
pinned offsets stay put, and the alignments are chosen so that ``g`` divides
them or they divide ``g``. So some optimal plan lives on the multiples of ``g``.

Cost: O(n log n + a + c) for n buffers, a aliases and c conflicts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from memplan.problem import NO_OFFSET, Alias, Problem, union_find


@dataclass(frozen=True)
class Part:
    """One independent piece of a problem, scaled and with time renumbered."""

    buffers: np.ndarray  # indices of its buffers in the original problem
    problem: Problem  # the piece: sizes / scale, time as ranks, ids as in the original
    scale: int  # bytes per unit of the piece's sizes and offsets


def scale_of(problem: Problem) -> int:
    """The largest ``g`` that divides every size, delta and pinned offset, and fits alignments.

    An alignment ``a`` is compatible with ``g`` when one divides the other; the
    loop lowers ``g`` to ``gcd(g, a)`` until every alignment is compatible.
    """
    g = 0
    for values in (problem.sizes, np.abs(problem.alias_delta),
                   problem.pinned[problem.pinned != NO_OFFSET]):
        if len(values):
            g = math.gcd(g, int(np.gcd.reduce(values)))
    if g == 0:
        return 1
    alignments = [int(a) for a in np.unique(problem.alignments) if a > 1]
    changed = True
    while changed:
        changed = False
        for a in alignments:
            if g % a and a % g:
                g = math.gcd(g, a)
                changed = True
    return g


def components(problem: Problem) -> list[np.ndarray]:
    """Groups of buffers joined by lifetime overlaps, aliases or explicit conflicts.

    A sweep in start order cuts time wherever no buffer spans a point; a
    union-find then joins the time blocks that an alias or a conflict links.
    Each group is sorted; groups come in order of their first buffer.
    """
    n = len(problem)
    if n == 0:
        return []
    order = np.argsort(problem.starts, kind="stable")
    ends_so_far = np.maximum.accumulate(problem.ends[order])
    new_block = np.r_[True, problem.starts[order][1:] >= ends_so_far[:-1]]
    block = np.empty(n, np.int64)
    block[order] = np.cumsum(new_block) - 1
    pairs = itertools.chain(zip(problem.alias_src.tolist(), problem.alias_dst.tolist(),
                                strict=True), problem.conflicts.tolist())
    at = block.tolist()
    root, _, _ = union_find(int(block.max()) + 1, ((at[a], at[b], 0) for a, b in pairs))
    label = np.asarray(root, np.int64)[block]
    by_label = np.argsort(label, kind="stable")  # each group's members in index order
    _, first = np.unique(label[by_label], return_index=True)
    return sorted(np.split(by_label, first[1:]), key=lambda members: int(members[0]))


def _piece(problem: Problem, members: np.ndarray, scale: int) -> Problem:
    """The sub-problem of ``members``: sizes, offsets and capacity in units of ``scale``."""
    inside = np.zeros(len(problem), bool)
    inside[members] = True
    _, ranks = np.unique(np.r_[problem.starts[members], problem.ends[members]],
                         return_inverse=True)
    m = len(members)
    ids = problem.ids
    aliases = [Alias(ids[s], ids[d], int(delta) // scale, bool(optional))
               for s, d, delta, optional in zip(problem.alias_src.tolist(),
                                                problem.alias_dst.tolist(),
                                                problem.alias_delta.tolist(),
                                                problem.alias_optional.tolist(), strict=True)
               if inside[s]]
    conflicts = [(ids[a], ids[b]) for a, b in problem.conflicts.tolist() if inside[a]]
    alignments = problem.alignments[members]
    pinned = problem.pinned[members]
    return Problem.from_arrays(
        problem.sizes[members] // scale, ranks[:m], ranks[m:],
        ids=[ids[i] for i in members.tolist()],
        alignments=np.where(alignments % scale == 0, alignments // scale, 1),
        pinned=np.where(pinned == NO_OFFSET, NO_OFFSET, pinned // scale),
        aliases=aliases, conflicts=conflicts,
        capacity=None if problem.capacity is None else max(problem.capacity // scale, 1),
        name=problem.name, source=problem.source)


def split(problem: Problem) -> list[Part]:
    """The independent parts of ``problem``, scaled and renumbered, smallest first."""
    scale = scale_of(problem)
    parts = [Part(members, _piece(problem, members, scale), scale)
             for members in components(problem)]
    return sorted(parts, key=lambda part: len(part.buffers))


def part_offsets(part: Part, offsets: np.ndarray) -> np.ndarray:
    """A plan's offsets (bytes, whole problem) as the part's scaled offsets (floored)."""
    return np.asarray(offsets, np.int64)[part.buffers] // part.scale


def assemble(problem: Problem, parts: list[Part], offsets: list[np.ndarray]) -> np.ndarray:
    """The whole problem's offsets in bytes from each part's scaled offsets."""
    whole = np.zeros(len(problem), np.int64)
    for part, part_offset in zip(parts, offsets, strict=True):
        whole[part.buffers] = np.asarray(part_offset, np.int64) * part.scale
    return whole


def sink_spanning(problem: Problem, offsets: np.ndarray) -> np.ndarray:
    """``offsets`` with the buffers live over the whole horizon stacked at the bottom.

    Such a buffer meets every other, so each other buffer lies wholly below or
    above it; moving it under all of them and the ones it was above up by its
    size keeps the plan valid and its peak as it was::

        address                          address
          ^  +---+ +----+                  ^  +---+ +----+
          |  ====spanning=====     ->      |  |   | +----+
          |  |   | +----+                  |  ====spanning=====
          +-------------------> time       +-------------------> time

    A large-neighbourhood search then finds the peak among the buffers that
    can move. Unchanged on problems with aliases or pinned buffers, or when a
    spanning size is not a multiple of every alignment. O(n log n).
    """
    offsets = np.asarray(offsets, np.int64)
    span = (problem.starts == problem.starts.min()) & (problem.ends == problem.ends.max()) \
        if len(problem) else np.zeros(0, bool)
    aligned = np.lcm.reduce(np.unique(problem.alignments)) if len(problem) else 1
    if span.all() or not span.any() or len(problem.alias_src) or \
            (problem.pinned != NO_OFFSET).any() or (problem.sizes[span] % aligned).any():
        return offsets
    spanning = np.flatnonzero(span)[np.argsort(offsets[span], kind="stable")]
    below = np.concatenate([[0], np.cumsum(problem.sizes[spanning])])  # stacked, in order
    sunk = offsets.copy()
    sunk[spanning] = below[:-1]
    rest = np.flatnonzero(~span)
    # the spanning buffers that start below a buffer's top lie below it: the others go under
    under = np.searchsorted(offsets[spanning], offsets[rest] + problem.sizes[rest], "left")
    sunk[rest] += below[-1] - below[under]
    return sunk
