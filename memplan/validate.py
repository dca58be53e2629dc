"""The independent checker: does a plan keep every promise its problem asks for?

Written without any planner code, so that a planner bug cannot hide behind a
shared helper. It reports every violation with the buffer ids involved:

- ``missing`` / ``extra``: the plan has no offset for a buffer, or one for an unknown id;
- ``negative``: an offset below 0;
- ``misaligned``: ``offset % alignment != 0``;
- ``pinned``: a pinned buffer moved;
- ``alias``: a mandatory alias ``offset[dst] == offset[src] + delta`` not honoured;
- ``region``: a buffer in a region it may not use;
- ``capacity``: ``offset + size`` above the capacity (the problem's or its region's);
- ``overlap``: two buffers whose lifetimes intersect share bytes;
- ``conflict``: two explicitly conflicting buffers share bytes;
- ``arena``: the plan's stated arena size is not ``max(offset + size)``.

- ``offset``: an offset that is not a whole number within ``±2^53`` (then
  nothing else is checked).

Aliased buffers may share bytes exactly as their aliases say: two buffers
joined by a chain of honoured mandatory aliases (a tensor, its views, a
Concat and its slices) never count as overlapping, and neither do the two
sides of an honoured optional alias (an in-place write: the two mandatory
groups it joins). A chain of optional aliases does not let its ends share:
a -> b and a -> c both taken put b and c on the same bytes, an overlap when
they are live together (an in-place write serves one output). Explicit
conflicts hold whatever the aliases say.

The overlap check has two routes to the same answer:

- first, in numpy, when it is cheap: two buffers that are live together and
  share bytes overlap both in time and in address, so they are among the
  pairs that overlap in *one* of the two: whichever has fewer such pairs
  (counted in O(n log n) by a sort) lists them, in chunks (one sorted run per
  buffer, as for any interval overlap), and checks the other; in address, the
  buffers at one same offset (many, over time) are listed by (offset, start),
  only those live together; a zero-size buffer counts as one byte wide there
  (the sweep below may call it touching).
  No pair of the list that overlaps in both and may not share bytes: no
  overlap, proven, in O(n log n + P) for P pairs (taken when P is small
  beside the sweep's cost, which grows with the live set; at most
  `PAIR_CHECK`);
- otherwise (too many pairs, or a pair found), the sweep over time: in C
  (``_validate_kernel.c``, its own code, shared with no planner) when it is
  built, which only says whether there is a violation (a third of the
  Python sweep's time at 10^6 buffers: BENCHMARKS.md), then, only if there
  is one or the kernel is not built, in Python, which reports each
  violation: O(n log n + n * a) for at most a simultaneously
  live buffers that overlap on purpose (aliases) or by mistake; it keeps the
  live buffers that do not overlap sorted by offset, where a new buffer can
  only touch its neighbours.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from memplan.errors import InvalidPlanError
from memplan.limits import MAX_BYTES, problem_with
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Problem

try:
    from memplan._validate_kernel import any_overlap as _compiled_any_overlap
except ImportError:  # the extension is optional: the Python sweep gives the same verdict
    _compiled_any_overlap = None

PAIR_CHECK = 16_000_000  # at most this many pairs go through the numpy check, else the sweep
PAIR_CHUNK = 1 << 21  # pairs listed at once (memory: a few dozen bytes each)
SWEEP_PAIRS = 64  # listed pairs that cost what one buffer costs the sweep (measured)


@dataclass(frozen=True)
class Violation:
    """One broken promise: its kind, the buffer ids involved and what is wrong."""

    kind: str
    buffers: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.kind} ({', '.join(self.buffers)}): {self.message}"


def _sharing(problem: Problem, offsets: np.ndarray) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """Who may share bytes: ``(label, links)``.

    ``label`` per buffer: buffers joined by honoured *mandatory* aliases (one
    piece of memory: a tensor, its views, a Concat and its slices) share a
    label. ``links``: the pairs of labels ``(low, high)`` that an honoured
    *optional* alias joins directly. Two live buffers may share bytes when
    their labels are equal or linked; a chain of two optional aliases (a -> b
    and a -> c taken) does not let b and c share: an in-place write serves
    one output.
    """
    src, dst = problem.alias_src, problem.alias_dst
    honoured = offsets[dst] == offsets[src] + problem.alias_delta
    mandatory = honoured & ~problem.alias_optional
    label = _components(len(problem), src[mandatory], dst[mandatory])
    optional = honoured & problem.alias_optional
    links = {(min(x, y), max(x, y)) for x, y in zip(label[src[optional]].tolist(),
                                                    label[dst[optional]].tolist(), strict=True)
             if x != y}
    return label, links


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per item of ``n``, the smallest item joined to it by the edges ``(a[k], b[k])``.

    Rounds over all edges at once: each tree's root is hooked under the smallest root
    it meets (always a smaller item: no cycle), then every pointer jumps to its root.
    A tree that meets another merges in each round, so their number halves: O(log n)
    rounds of O(n + e) numpy, where a Python loop took 1 us an item (0.4 CPU-s at
    10^6 buffers). The validator's own (no planner's union-find), to stay independent."""
    label = np.arange(n, dtype=np.int64)
    while True:
        ra, rb = label[a], label[b]
        apart = ra != rb
        if not apart.any():
            return label
        ra, rb = ra[apart], rb[apart]
        low = np.minimum(ra, rb)
        np.minimum.at(label, ra, low)
        np.minimum.at(label, rb, low)
        while True:  # every pointer to its root
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up


def _offsets_of(problem: Problem, plan, found: list[Violation], limit: int) -> np.ndarray | None:
    """The offsets as an array in problem order, noting missing and extra buffers."""
    if isinstance(plan, Plan):
        offsets = np.asarray(plan.offsets, dtype=np.int64)
        if len(offsets) != len(problem):
            found.append(Violation("missing" if len(offsets) < len(problem) else "extra", (),
                                   f"the plan has {len(offsets)} offsets for "
                                   f"{len(problem)} buffers"))
            return None
        far = np.flatnonzero(np.abs(offsets) > MAX_BYTES)
        for i in far[:limit].tolist():
            reason = problem_with(int(offsets[i]), lowest=-MAX_BYTES)
            found.append(Violation("offset", (problem.ids[i],), f"the offset {reason}"))
        return None if len(far) else offsets
    if not isinstance(plan, Mapping):
        raise TypeError(f"expected a Plan or a mapping id -> offset, got {type(plan).__name__}")
    extra = sorted(set(plan) - set(problem.ids))
    for id in extra:
        found.append(Violation("extra", (id,), "the plan places a buffer the problem lacks"))
    offsets = np.full(len(problem), NO_OFFSET, np.int64)
    missing, unreadable = [], []
    for idx, id in enumerate(problem.ids):
        if id not in plan:
            missing.append(id)
            continue
        reason = problem_with(plan[id], lowest=-MAX_BYTES)
        if reason is None:
            offsets[idx] = int(plan[id])
        else:
            unreadable.append((id, reason))
    for id in missing:
        found.append(Violation("missing", (id,), "the plan has no offset for this buffer"))
    for id, reason in unreadable:
        found.append(Violation("offset", (id,), f"the offset {reason}"))
    return None if missing or extra or unreadable else offsets


def _events(problem: Problem, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sweep's events over ``members``: (whether each starts, its buffer), in time
    order, ends before starts at one time point (lifetimes are half-open)."""
    order = np.lexsort((np.r_[np.ones(len(members)), np.zeros(len(members))],
                        np.r_[problem.starts[members], problem.ends[members]]))
    return order < len(members), np.r_[members, members][order]


def _any_overlap_compiled(problem: Problem, offsets: np.ndarray, sizes: np.ndarray,
                          members: np.ndarray,
                          sharing: tuple[np.ndarray, set[tuple[int, int]]]) -> bool:
    """Whether `_overlaps` would find a violation among ``members``, by the same sweep in C
    (see the module doc); the caller checks that the kernel is built."""
    group, links = sharing
    width = len(problem) + 1
    starting, buffers = _events(problem, members)
    column = np.ascontiguousarray
    return _compiled_any_overlap(
        column(offsets, np.int64), column(offsets + sizes, np.int64), column(group, np.int64),
        column(buffers, np.int64), column(starting, np.int8),
        np.array(sorted(a * width + b for a, b in links), np.int64), width)


def _overlaps(problem: Problem, offsets: np.ndarray, sizes: np.ndarray, members: np.ndarray,
              sharing: tuple[np.ndarray, set[tuple[int, int]]], found: list[Violation],
              limit: int):
    """Sweep over time for the buffers ``members`` (one region); see the module doc."""
    starts, ends, ids = problem.starts, problem.ends, problem.ids
    group, links = sharing
    starting, buffers = _events(problem, members)
    # plain Python lists from here on: indexing a numpy array per event costs more
    kinds = starting.tolist()  # True = start, False = end
    buffers = buffers.tolist()
    low, high, label = offsets.tolist(), (offsets + sizes).tolist(), group.tolist()
    tidy: list[tuple[int, int]] = []  # (offset, idx): live, pairwise disjoint, sorted
    tidy_ends: list[int] = []  # offset + size, parallel to `tidy`
    messy: set[int] = set()  # live buffers that overlap another live one
    in_tidy = bytearray(len(problem))
    for starting, b in zip(kinds, buffers, strict=True):
        lo, hi = low[b], high[b]
        if not starting:
            if in_tidy[b]:
                pos = bisect_left(tidy, (lo, b))
                del tidy[pos], tidy_ends[pos]
                in_tidy[b] = 0
            else:
                messy.discard(b)
            continue
        touching = []
        pos = bisect_left(tidy, (lo, b))
        left = pos - 1
        while left >= 0 and tidy_ends[left] > lo:  # disjoint: ends rise with offsets
            touching.append(tidy[left][1])
            left -= 1
        right = pos
        while right < len(tidy) and tidy[right][0] < hi:
            touching.append(tidy[right][1])
            right += 1
        if messy:
            touching += [m for m in messy if low[m] < hi and lo < high[m]]
        if not touching:
            tidy.insert(pos, (lo, b))
            tidy_ends.insert(pos, hi)
            in_tidy[b] = 1
            continue
        messy.add(b)
        for other in touching:
            g, h = label[other], label[b]
            if g != h and (min(g, h), max(g, h)) not in links and len(found) < limit:
                found.append(Violation(
                    "overlap", (ids[other], ids[b]),
                    f"live together during [{max(starts[b], starts[other])}, "
                    f"{min(ends[b], ends[other])}) and share bytes "
                    f"[{max(lo, low[other])}, {min(hi, high[other])})"))


def _runs(lo: np.ndarray, hi: np.ndarray, order: np.ndarray, begin: np.ndarray | None = None):
    """(order, begin, counts): intervals ``[lo, hi)`` listed in ``order`` (sorted by ``lo``);
    sorted position p meets the ``counts[p]`` positions from ``begin[p]`` (default p + 1)
    on, those that start before its end: one run each."""
    after = np.arange(1, len(order) + 1) if begin is None else begin
    last = np.searchsorted(lo[order], hi[order], side="left")
    return order, after, np.maximum(last - after, 0)


def _address_runs(time_lo, time_hi, space_lo, space_hi) -> list:
    """The runs of the pairs that overlap in address: a strictly higher start inside the
    interval (one run per buffer, by offset), and equal offsets (every pair of one offset
    overlaps) listed only when they overlap in time too, by (offset, start): many buffers
    at one offset over time are many pairs, but few of them live together."""
    by_offset = np.argsort(space_lo, kind="stable")
    low = space_lo[by_offset]
    horizon = int(time_hi.max(initial=0)) + 1
    rank = np.unique(space_lo, return_inverse=True)[1].reshape(-1)
    if (int(rank.max(initial=0)) + 1) * horizon >= 1 << 62:  # keys would overflow: plain runs
        return [_runs(space_lo, space_hi, by_offset)]
    by_tie = np.lexsort((time_lo, space_lo))
    key = rank * horizon
    return [_runs(space_lo, space_hi, by_offset, np.searchsorted(low, low, side="right")),
            _runs(key + time_lo, key + time_hi, by_tie)]


def _no_overlap_by_pairs(problem: Problem, offsets: np.ndarray, sizes: np.ndarray,
                         members: np.ndarray,
                         sharing: tuple[np.ndarray, set[tuple[int, int]]]) -> bool:
    """True when no two of ``members`` live together share bytes (but as aliases allow);
    False when some pair might, or the pairs are too many to list (see the module doc)."""
    time_lo, time_hi = problem.starts[members], problem.ends[members]
    space_lo = offsets[members]
    space_hi = space_lo + np.maximum(sizes[members], 1)
    listings = [[_runs(time_lo, time_hi, np.argsort(time_lo, kind="stable"))],
                _address_runs(time_lo, time_hi, space_lo, space_hi)]
    totals = [sum(int(counts.sum()) for _, _, counts in runs) for runs in listings]
    listed = int(np.argmin(totals))
    # a buffer costs the sweep about SWEEP_PAIRS listed pairs (its two events in Python:
    # ~3 us, a listed pair ~45 ns), plus about (time pairs / n) list slots moved, ~64 of
    # them the cost of one listed pair: the pairs win unless a buffer has many
    if totals[listed] > min(PAIR_CHECK, SWEEP_PAIRS * len(members) + totals[0] // 64):
        return False
    other_lo, other_hi = (space_lo, space_hi) if listed == 0 else (time_lo, time_hi)
    label, links = sharing
    label = label[members]
    width = len(problem) + 1
    linked = np.array(sorted(a * width + b for a, b in links), np.int64)
    for order, begin, counts in listings[listed]:
        ends = np.cumsum(counts)
        first = 0
        while first < len(order):
            done = int(ends[first - 1]) if first else 0
            last = min(max(int(np.searchsorted(ends, done + PAIR_CHUNK, side="right")),
                           first + 1), len(order))
            count = counts[first:last]
            a = np.repeat(np.arange(first, last), count)
            b = np.repeat(begin[first:last], count) + (
                np.arange(len(a)) - np.repeat(np.cumsum(count) - count, count))
            a, b = order[a], order[b]
            both = (other_lo[a] < other_hi[b]) & (other_lo[b] < other_hi[a])
            g, h = label[a[both]], label[b[both]]
            key = np.minimum(g, h) * width + np.maximum(g, h)
            if ((g != h) & ~np.isin(key, linked)).any():
                return False
            first = last
    return True


def validate(problem: Problem, plan: Plan | Mapping[str, int], *,
             limit: int = 10_000) -> list[Violation]:
    """Every violation of ``plan`` against ``problem`` (empty when the plan is valid).

    ``plan`` is a `Plan` or a mapping from buffer id to offset (a plan read
    from a file). At most ``limit`` violations are listed.
    """
    found: list[Violation] = []
    offsets = _offsets_of(problem, plan, found, limit)
    if offsets is None:
        return found
    ids = problem.ids
    granted = getattr(plan, "sizes", None)
    sizes = problem.sizes if granted is None else np.asarray(granted, np.int64)
    regions = getattr(plan, "regions", None)
    region_of = np.zeros(len(problem), np.int64) if regions is None else np.asarray(regions)

    def each(kind: str, bad: np.ndarray, message):
        for i in np.flatnonzero(bad)[: max(0, limit - len(found))].tolist():
            found.append(Violation(kind, (ids[i],), message(i)))

    if granted is not None:
        each("size", (sizes < problem.sizes) | (sizes > problem.max_sizes),
             lambda i: f"granted {sizes[i]} bytes outside [{problem.sizes[i]}, "
                       f"{problem.max_sizes[i]}]")
        sizes = np.clip(sizes, -MAX_BYTES, MAX_BYTES)  # reported; no int64 overflow below
    each("negative", offsets < 0, lambda i: f"offset {offsets[i]} is below 0")
    each("misaligned", offsets % problem.alignments != 0,
         lambda i: f"offset {offsets[i]} is not a multiple of {problem.alignments[i]}")
    pinned = problem.pinned
    each("pinned", (pinned != NO_OFFSET) & (offsets != pinned),
         lambda i: f"pinned at {pinned[i]} but placed at {offsets[i]}")
    src, dst, delta = problem.alias_src, problem.alias_dst, problem.alias_delta
    for k in np.flatnonzero(~problem.alias_optional & (offsets[dst] != offsets[src] + delta)):
        found.append(Violation("alias", (ids[src[k]], ids[dst[k]]),
                               f"{ids[dst[k]]} must sit at {ids[src[k]]} + {delta[k]} = "
                               f"{offsets[src[k]] + delta[k]}, but sits at {offsets[dst[k]]}"))
    tops = offsets + sizes
    if problem.regions:
        names = [r.name for r in problem.regions]
        for i, allowed in enumerate(problem.allowed_regions):
            r = int(region_of[i])
            if not 0 <= r < len(names):
                found.append(Violation("region", (ids[i],), f"no region numbered {r}"))
            elif allowed is not None and names[r] not in allowed:
                found.append(Violation("region", (ids[i],), f"placed in {names[r]!r}, allowed "
                                                             f"only {', '.join(allowed)}"))
        for r, region in enumerate(problem.regions):
            if region.capacity is not None:
                each("capacity", (region_of == r) & (tops > region.capacity),
                     lambda i, region=region: f"ends at {tops[i]}, above the capacity "
                                              f"{region.capacity} of region {region.name!r}")
    if problem.capacity is not None:
        each("capacity", tops > problem.capacity,
             lambda i: f"ends at {tops[i]}, above the capacity {problem.capacity}")
    if isinstance(plan, Plan) and len(problem) and plan.arena_size != tops.max() \
            and not problem.regions:
        found.append(Violation("arena", (), f"the plan states arena size {plan.arena_size}, "
                                            f"but its buffers reach {tops.max()}"))

    sharing = _sharing(problem, offsets)
    a, b = problem.conflicts[:, 0], problem.conflicts[:, 1]
    clash = (offsets[a] < tops[b]) & (offsets[b] < tops[a]) & (region_of[a] == region_of[b])
    for k in np.flatnonzero(clash)[: max(0, limit - len(found))].tolist():
        found.append(Violation("conflict", (ids[a[k]], ids[b[k]]),
                               "explicitly conflicting buffers share bytes"))
    for r in np.unique(region_of).tolist():
        members = np.flatnonzero(region_of == r)
        if _no_overlap_by_pairs(problem, offsets, sizes, members, sharing):
            continue
        if _compiled_any_overlap is None or _any_overlap_compiled(problem, offsets, sizes,
                                                                   members, sharing):
            _overlaps(problem, offsets, sizes, members, sharing, found, limit)
    return found[:limit]


def check(problem: Problem, plan: Plan | Mapping[str, int]) -> None:
    """Raise `InvalidPlanError` listing the violations, if there are any."""
    violations = validate(problem, plan)
    if violations:
        raise InvalidPlanError(violations)


def mark_valid(plan: Plan, problem: Problem) -> Plan:
    """Note that ``plan`` passed `validate` against ``problem`` (this very object; capacity
    aside: the plan's status says whether it fits), so that a
    later check of the same pair can be skipped (`known_valid`); a 100k-buffer check takes
    seconds. The note lives on the plan object only, never in its stats or files."""
    object.__setattr__(plan, "_valid_for", problem)
    return plan


def known_valid(plan: Plan, problem: Problem) -> bool:
    """Whether `mark_valid` noted ``plan`` as valid for this very ``problem`` object."""
    return getattr(plan, "_valid_for", None) is problem
