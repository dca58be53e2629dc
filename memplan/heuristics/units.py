"""Placement units: what the heuristics move, and which placed buffers each one must avoid.

A *unit* is a group of buffers tied together by mandatory aliases (a lone
buffer is a unit of one): `memplan.groups.AliasUnits` (members, ``rel``,
extent, alignment congruence, pinned base), which `Units` extends with what
placement needs.

Which placed buffers a unit must keep clear of is fixed by the problem:
buffers whose lifetimes intersect a member's, and explicit conflicts.
`Units` lists these *pairs* once, up front, as CSR arrays per unit (member,
other buffer), so that placing a unit looks only at the buffers it can touch
instead of every placed buffer (the all-pairs loop of TFLite-Micro's
planner).

Steps of `Units.build`:
- the alias units (`memplan.groups.alias_units`);
- per unit: lifetime span;
- lifetime pairs by a sort on start times: a buffer meets every buffer that
  starts inside its lifetime, one contiguous run of the sorted order, so the
  pairs come out of `np.repeat` without a loop; explicit conflicts appended.

Cost: O(n log n + E) time and memory for E conflicting pairs (about n times
the number of buffers live at once on network-like schedules; a problem
where everything overlaps everything needs O(n^2): training steps and
decoders of 100k buffers have 1-2 billion). About 200 ns and 90 bytes a pair
while they are built, so `Units.build` counts them first (O(n log n)) and
raises `PairLimitError` above ``MAX_PAIRS`` or when listing them would pass
the deadline (the caller's time limit, on the wall clock) or the listing
budget (`PAIR_SHARE` of the limit, in CPU seconds of the calling thread: a
busy machine does not turn a listing into a pair-free plan).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from memplan.bounds import time_overlap_count
from memplan.budget import ends_after
from memplan.errors import PairLimitError
from memplan.groups import AliasUnits, alias_units
from memplan.problem import Problem
from memplan.shares import PAIR_SECONDS, PAIR_SHARE

MAX_PAIRS = 20_000_000  # most overlapping pairs listed (~1.8 GB and ~4 s while built)


def listing_budget(cpu_began: float, time_limit: float | None) -> float | None:
    """The `time.thread_time` value by which the pair lists of a planner whose thread had
    taken ``cpu_began`` CPU seconds when it started with ``time_limit`` seconds must be
    listed (None: no limit)."""
    return None if time_limit is None else cpu_began + time_limit * PAIR_SHARE


def check_pairs(problem: Problem, deadline: float | None = None,
                cpu_deadline: float | None = None) -> int:
    """The count of pairs `Units.build` would list (time overlaps and explicit conflicts);
    `PairLimitError` when over ``MAX_PAIRS`` or when listing them would end past
    ``deadline`` (a `time.perf_counter` value) or ``cpu_deadline`` (a `time.thread_time`
    value, `listing_budget`). O(n log n)."""
    count = time_overlap_count(problem.starts, problem.ends) + len(problem.conflicts)
    if count > MAX_PAIRS:
        raise PairLimitError(f"{count} pairs of buffers overlap in time: more than the "
                             f"{MAX_PAIRS} memplan lists (about 90 bytes each)")
    listing = count * PAIR_SECONDS
    if ends_after(listing, deadline, cpu_deadline):
        raise PairLimitError(f"{count} pairs of buffers overlap in time: listing them "
                             f"(about {count * PAIR_SECONDS:.1f} s) would pass the time limit")
    return count


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
class Units(AliasUnits):
    """The alias units with their lifetimes, the pairs they must keep apart and their
    optional aliases; every array is indexed by unit or by buffer as named."""

    start: np.ndarray  # per unit: first step any member is live
    end: np.ndarray  # per unit: one past the last step any member is live
    pair_ptr: np.ndarray  # CSR over units into pair_member / pair_other
    pair_member: np.ndarray  # a member of the unit ...
    pair_other: np.ndarray  # ... and a buffer of another unit it must not share bytes with
    optional: list[list[tuple[int, int]]]  # per unit: (partner buffer, c): base = off[p] + c
    has_pairs: bool = True  # False: built without the pair lists (`build(pairs=False)`)

    @classmethod
    def build(cls, problem: Problem, *, pairs: bool = True,
              deadline: float | None = None, cpu_deadline: float | None = None) -> Units:
        """The units of ``problem``; ``pairs=False`` skips the pair lists (O(n log n) then),
        for planners that never ask which placed buffers a unit must avoid (`time_sweep`).
        `PairLimitError` (see `check_pairs`) when the lists do not fit."""
        if pairs:
            check_pairs(problem, deadline, cpu_deadline)
        groups = alias_units(problem)
        unit_of, rel, count = groups.unit_of, groups.rel, len(groups)
        start = np.full(count, np.iinfo(np.int64).max)
        np.minimum.at(start, unit_of, problem.starts)
        end = np.zeros(count, np.int64)
        np.maximum.at(end, unit_of, problem.ends)

        if pairs:
            a, b = time_overlap_pairs(problem.starts, problem.ends)
        else:
            a = b = np.zeros(0, np.int64)
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
        for arr in (start, end):
            arr.flags.writeable = False
        return cls(**{f.name: getattr(groups, f.name) for f in fields(AliasUnits)},
                   start=start, end=end, pair_ptr=pair_ptr, pair_member=pair_member,
                   pair_other=pair_other, optional=optional, has_pairs=pairs)
