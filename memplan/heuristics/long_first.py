"""``long_first``: the long-lived units planned first as a small problem, the rest fitted in.

On a network's schedule of 10^6 buffers a thousand buffers live for 20-80 %
of it and carry 82 % of the peak; the other units live a few steps. A time
sweep (or `memplan.heuristics.peak_stack`, exact at one cut step) leaves
holes between the long-lived units at the other high steps, and a large
one-step workspace then lands on top. This planner plans the long-lived units
first, in a small problem where the short units of each stretch of time
between two long-unit events are one stand-in, a rectangle as high as their
own sweep needs::

    address
      ^   +---------+  +-------------+
      |   | room 1  |  |   room 2    |  stand-ins: the short units of each
      |   +----+----+--+--+----------+  stretch, swept alone, moved in whole
      |   | a  |    b  x  |    c     |  x: a short unit crossing a boundary,
      |   +----+----------+----------+     planned with the long ones
      +---+----+----------+----------+-----> time
          stretch boundaries: the long units' starts and ends

The long units are constant within a stretch, so the small problem's live
load is the whole problem's, less what the rooms waste. Steps:

- long units: free units whose span exceeds ``long_share`` of the schedule
  (and `MIN_SPAN` steps); pinned units are long units the small plan keeps
  where they are;
- stretches: between consecutive starts and ends of long units; a short unit
  that ends after its stretch (crosses a boundary) joins the small problem
  as itself;
- the other short units, one time sweep of them all from address 0
  (`time_sweep.run_sweep`, compiled when built; a stretch's units are all
  gone when the next begins, so each stretch is swept on its own), with both
  placements, the lower per stretch: a stretch's room is as high as its
  units reach;
- the rooms whose stretch the small problem's live load puts above the whole
  problem's bound (the sweep left holes there), the highest first, planned
  again by ``best`` as problems of their own (`memplan.shares.ROOMS_SHARE` of the time);
- the small problem (long units, crossing units, one room per stretch,
  aligned to its units' alignments) planned for ``share`` of the CPU time
  left by ``best``'s passes, then the canonical descent (both found by name
  in the registry; the descent up to `SMALL_PAIRS` pairs, past its own
  default: the small problem's units live a few steps each); each room's
  units moved up by its offset.

Every unit keeps its place in the small plan or in its room, so the arena is
the small plan's. Cost: the small problem's planner (its share of the time)
and O(n log n) besides. Memory O(n). Known limits: the rooms hold their
height over their whole stretch; the small problem of 10^6 network-like
buffers (4000 units, 1.59 M pairs) needs about 6 CPU-s of the descent to
come within 0.01 % of its bound (`best`'s other passes leave it 5 % above),
and `best` skips this pass beyond `SMALL_PAIRS`; optional aliases are never
taken; units in explicit conflict hold their bytes over the union of their
lifetimes (as in `time_sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.bounds import load_profile, lower_bound, time_overlap_count
from memplan.budget import Budget, Stopwatch, past, to_deadline
from memplan.errors import PairLimitError
from memplan.heuristics.time_sweep import Sweep, run_sweep, spans, unit_sweep_plan
from memplan.heuristics.units import Units
from memplan.options import option
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Alias, Problem
from memplan.registry import planners, register
from memplan.shares import ROOMS_SHARE

MIN_SPAN = 64  # steps: a unit living fewer is short, whatever the schedule's length
MAX_LONG_FRACTION = 0.01  # more long units than this share of the units: not taken
# more pairs in the small problem: `best` skips the pass (the canonical descent, which plans
# it near its bound, is given up to this many; the other passes leave it 5 % above at 10^6,
# where it has 1.59 M: 6.4 CPU-s of the descent and 0.7 GB in all bring it to 1.00004)
SMALL_PAIRS = 2_000_000
TIGHTEN_ROOMS = 16  # rooms planned again, at most, the highest first


@dataclass(frozen=True)
class LongFirstOptions:
    """Options of ``long_first``."""

    long_share: float = option(0.001, "a unit living over this share of the schedule is "
                                      "long-lived")
    share: float = option(0.8, "share of the CPU time left for planning the long units")


def long_units(units: Units, start: np.ndarray, end: np.ndarray,
               long_share: float = LongFirstOptions.long_share) -> np.ndarray:
    """The free units whose span exceeds ``long_share`` of the schedule and `MIN_SPAN`."""
    free = units.free
    return free[lived_long(start[free], end[free], int(end.max(initial=0)), long_share)]


def lived_long(start: np.ndarray, end: np.ndarray, horizon: int,
               long_share: float = LongFirstOptions.long_share) -> np.ndarray:
    """Which of these lifetimes exceed ``long_share`` of the ``horizon`` and `MIN_SPAN`."""
    return end - start > max(MIN_SPAN, long_share * horizon)


def few_long(count: int, total: int) -> bool:
    """Whether ``count`` long units of ``total`` are some, and few (`MAX_LONG_FRACTION`)."""
    return 0 < count <= MAX_LONG_FRACTION * total


def takes(units: Units, long_share: float = LongFirstOptions.long_share) -> bool:
    """Whether the problem has long units, and few of them (`MAX_LONG_FRACTION`). O(n)."""
    return few_long(len(long_units(units, *spans(units), long_share)), len(units))


def takes_buffers(problem: Problem) -> bool:
    """`takes`, counted on the buffers (not their alias units): O(n), without building
    units (`memplan.api` sizes the heuristics' time by it)."""
    free = problem.pinned == NO_OFFSET
    horizon = int(problem.ends.max(initial=0))
    count = int(lived_long(problem.starts[free], problem.ends[free], horizon).sum())
    return few_long(count, len(problem))


class Split:
    """The long units, the stretches, and which short units cross a stretch's end."""

    def __init__(self, units: Units, start: np.ndarray, end: np.ndarray, longs: np.ndarray):
        self.longs = longs
        shorts = np.setdiff1d(units.free, longs)
        self.edges = edges = stretch_edges(units, start, end, longs, shorts)
        stretch = np.searchsorted(edges, start[shorts], side="right") - 1
        crosses = end[shorts] > edges[stretch + 1]
        self.inner, self.stretch = shorts[~crosses], stretch[~crosses]
        # the small problem's own units: long, pinned and crossing
        self.group = np.concatenate([longs, units.pinned, shorts[crosses]])

    def small_spans(self, start: np.ndarray, end: np.ndarray,
                    rooms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Starts and ends of the small problem's units and of the ``rooms`` (default: a
        room per stretch)."""
        edges = self.edges
        rooms = np.arange(len(edges) - 1) if rooms is None else rooms
        return (np.concatenate([start[self.group], edges[rooms]]),
                np.concatenate([end[self.group], edges[rooms + 1]]))


def stretch_edges(units: Units, start: np.ndarray, end: np.ndarray, longs: np.ndarray,
                  shorts: np.ndarray) -> np.ndarray:
    """The stretches' boundaries: 0, the schedule's end, and per long unit's start (end) the
    step up to `MIN_SPAN` before (after) it where the short units alive across weigh least
    (they join the small problem as themselves). O(n log n); no array as long as the
    schedule."""
    horizon = int(end.max(initial=0))
    times = np.unique(np.concatenate([[0, horizon], start[shorts], end[shorts]]))
    extent = units.extent[shorts]
    born = np.zeros(len(times) + 1, np.int64)
    np.add.at(born, np.searchsorted(times, start[shorts]), extent)
    change = born.copy()
    np.add.at(change, np.searchsorted(times, end[shorts]), -extent)
    across = (np.cumsum(change) - born)[:-1]  # alive just before times[k] and at it
    # per long event, the lightest event time of its window (ties: the one nearest it)
    cuts = [[0, horizon]]
    for events, lo, hi in ((start[longs], -MIN_SPAN, 0), (end[longs], 0, MIN_SPAN)):
        first = np.searchsorted(times, events + lo)
        last = np.searchsorted(times, events + hi, side="right")
        chosen = events.copy()
        for k, (a, b) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
            if a == b:
                continue
            if lo:  # before a start: the latest of the lightest
                chosen[k] = times[b - 1 - int(np.argmin(across[a:b][::-1]))]
            else:  # after an end: the earliest
                chosen[k] = times[a + int(np.argmin(across[a:b]))]
        cuts.append(chosen)
    return np.unique(np.concatenate(cuts))


def rooms(units: Units, start: np.ndarray, end: np.ndarray, inner: np.ndarray,
          stretch: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Bases of the ``inner`` units within their stretch's room (one sweep of them all from
    address 0, the lower placement per stretch) and each of the ``count`` rooms' height."""
    order = inner[np.lexsort((inner, -units.extent[inner], start[inner]))]
    by_end = inner[np.argsort(end[inner], kind="stable")]
    chosen, height = None, None
    for best in (True, False):
        sweep = Sweep(units.extent, units.residue, units.modulus, order, start[order], by_end,
                      end[by_end], np.zeros((0, 2), np.int64), np.zeros(len(units), np.int64), 0)
        base = run_sweep(sweep, best, None)[0][inner]
        reach = np.zeros(count, np.int64)
        np.maximum.at(reach, stretch, base + units.extent[inner])
        if chosen is None:
            chosen, height = base, reach
            continue
        lower = reach < height
        take = lower[stretch]
        chosen[take], height[lower] = base[take], reach[lower]
    return chosen, height


def small_problem(units: Units, start: np.ndarray, end: np.ndarray, split: Split,
                  height: np.ndarray) -> tuple[Problem, np.ndarray, np.ndarray]:
    """The small problem: long, pinned and crossing units (by extent plus residue: any base
    raised to the unit's congruence stays inside), then the rooms of nonzero ``height``;
    the residues of the first, and the stretches of the rooms."""
    group, inner, stretch = split.group, split.inner, split.stretch
    used = np.flatnonzero(height)
    align = np.ones(len(height), np.int64)
    np.lcm.at(align, stretch, units.modulus[inner])
    pinned = units.pinned_base[group]
    residue = np.where(pinned == NO_OFFSET, units.residue[group], 0)
    small = Problem.from_arrays(
        np.concatenate([units.extent[group] + residue, height[used]]),
        *split.small_spans(start, end, used),
        alignments=np.concatenate([np.where(pinned == NO_OFFSET, units.modulus[group], 1),
                                   align[used]]),
        pinned=np.concatenate([pinned, np.full(len(used), NO_OFFSET, np.int64)]),
        aliases=shared_pins(units, group), name="long-first", pins_from_plan=True)
    return small, residue, used


def shared_pins(units: Units, group: np.ndarray) -> list[Alias]:
    """The optional aliases of the small problem: two pinned units that an optional alias
    the pins honour joins may share bytes (as the validator reads it), so the small
    problem keeps the alias between their stand-ins (indexed as in ``group``)."""
    problem, base = units.problem, units.pinned_base
    held = base != NO_OFFSET
    offsets = units.offsets(np.where(held, base, 0))
    src, dst = units.unit_of[problem.alias_src], units.unit_of[problem.alias_dst]
    joined = problem.alias_optional & (src != dst) & held[src] & held[dst] & (
        offsets[problem.alias_dst] == offsets[problem.alias_src] + problem.alias_delta)
    at = np.full(len(units), -1, np.int64)
    at[group] = np.arange(len(group))
    joined &= (at[src] >= 0) & (at[dst] >= 0)  # every pinned unit is in the group
    return [Alias(str(at[a]), str(at[b]), int(base[b] - base[a]), optional=True)
            for a, b in zip(src[joined].tolist(), dst[joined].tolist(), strict=True)]


def tighten(units: Units, start: np.ndarray, end: np.ndarray, split: Split, rel: np.ndarray,
            height: np.ndarray, seconds: float | None, cpu: float | None) -> int:
    """Lower, in place, the rooms whose stretch the small problem's live load puts above the
    whole's bound, the highest first (at most `TIGHTEN_ROOMS`, within ``seconds`` and
    ``cpu``, shared among them): each room's units planned by ``best`` as a problem of
    their own, kept when lower than the sweep's. The rooms lowered."""
    small, _, used = small_problem(units, start, end, split, height)
    times, loads = load_profile(small)
    edges, bound = split.edges, lower_bound(units.problem)
    first = np.searchsorted(times, edges[used], side="right") - 1
    last = np.searchsorted(times, edges[used + 1])
    high = np.array([loads[a:b].max() for a, b in zip(first.tolist(), last.tolist(),
                                                      strict=True)], np.int64)
    over = used[high > bound][np.argsort(-high[high > bound], kind="stable")][:TIGHTEN_ROOMS]
    watch, lowered = Stopwatch(), 0
    for tried, k in enumerate(over.tolist()):
        rooms_left = len(over) - tried
        wall = None if seconds is None else (seconds - watch.elapsed()) / rooms_left
        left = None if cpu is None else (cpu - watch.cpu_elapsed()) / rooms_left
        if (wall is not None and wall <= 0) or (left is not None and left <= 0):
            break
        member = np.flatnonzero(split.stretch == k)
        inner = split.inner[member]
        residue = units.residue[inner]
        room = Problem.from_arrays(units.extent[inner] + residue, start[inner], end[inner],
                                   alignments=units.modulus[inner], name="long-first-room")
        found = planners()["best"](room, budget=Budget.of_limit(wall, cpu=left),
                                   long_first=False)
        if found.arena_size < height[k]:
            rel[member], height[k] = found.offsets + residue, found.arena_size
            lowered += 1
    return lowered


def plan_small(small: Problem, seconds: float | None, cpu: float | None) -> tuple[Plan, float]:
    """The small problem's plan, and the CPU seconds its descent's probes took in threads of
    their own: ``best``'s passes, then the canonical descent (both found by name in the
    registry) for the CPU seconds left, up to `SMALL_PAIRS` pairs; where the descent does
    not take it (pins, more pairs), or untimed, ``best`` with its search."""
    watch = Stopwatch()

    def left() -> dict:  # the time limit and the CPU seconds left
        return {"time_limit": None if seconds is None else max(0.0, seconds - watch.elapsed()),
                "cpu": None if cpu is None else max(0.0, cpu - watch.cpu_elapsed())}

    if seconds is not None or cpu is not None:
        start = planners()["best"](small, **left(), long_first=False, search_evaluations=0)
        if start.arena_size <= lower_bound(small):
            return start, 0.0
        found = planners()["canonical"](small, **left(), hint=start, max_pairs=SMALL_PAIRS)
        if "fallback" not in found.stats:
            return found, found.stats.get("cpu_seconds", 0.0)
    return planners()["best"](small, **left(), long_first=False, descent=1.0), 0.0


def stacked(units: Units, split: Split, rel: np.ndarray,
            height: np.ndarray) -> tuple[np.ndarray, dict]:
    """Buffer offsets with the small problem's units and rooms one above another (the pinned
    units where they are, the rest above them): valid, and cut."""
    base = np.where(units.pinned_base == NO_OFFSET, 0, units.pinned_base)
    top = int((base[units.pinned] + units.extent[units.pinned]).max(initial=0))
    room = np.zeros(len(height), np.int64)
    for unit in split.group[units.pinned_base[split.group] == NO_OFFSET].tolist():
        base[unit] = units.aligned(unit, top)
        top = int(base[unit]) + int(units.extent[unit])
    align = np.ones(len(height), np.int64)
    np.lcm.at(align, split.stretch, units.modulus[split.inner])
    for k in np.flatnonzero(height).tolist():
        room[k] = top + (-top) % int(align[k])
        top = int(room[k]) + int(height[k])
    base[split.inner] = rel + room[split.stretch]
    return units.offsets(base), {"cut": len(split.group) + len(split.inner),
                                 "long_units": len(split.longs)}


def first_offsets(units: Units, deadline: float | None = None, cpu: float | None = None,
                  long_share: float = LongFirstOptions.long_share,
                  share: float = LongFirstOptions.share,
                  max_pairs: int | None = None) -> tuple[np.ndarray, dict]:
    """Buffer offsets: the long and crossing units by the small problem's plan, the others
    in their stretch's room (see the module doc); and stats. ``cpu``: CPU seconds left.
    `PairLimitError` when the small problem has over ``max_pairs`` pairs of units
    overlapping in time (None: any number)."""
    start, end = spans(units)
    if not len(units.free):
        base = np.where(units.pinned_base == NO_OFFSET, 0, units.pinned_base)
        return units.offsets(base), {"cut": 0, "long_units": 0}
    split = Split(units, start, end, long_units(units, start, end, long_share))
    if max_pairs is not None:
        pairs = time_overlap_count(*split.small_spans(start, end))
        if pairs > max_pairs:
            raise PairLimitError(f"long_first: the small problem has {pairs:,} pairs "
                                 f"overlapping in time, over {max_pairs:,}")
    edges, inner, stretch, group = split.edges, split.inner, split.stretch, split.group
    rel, height = rooms(units, start, end, inner, stretch, len(edges))
    if deadline is not None and past(deadline):  # no time for the small problem: its units
        return stacked(units, split, rel, height)  # stacked, as a cut sweep does
    seconds = None if deadline is None else max(0.0, to_deadline(deadline))
    if cpu is None and seconds is not None:  # no CPU allowance: a share of the clock's
        seconds *= share
    cpu = None if cpu is None else cpu * share
    watch = Stopwatch()
    tightened = tighten(units, start, end, split, rel, height,
                        None if seconds is None else seconds * ROOMS_SHARE,
                        None if cpu is None else cpu * ROOMS_SHARE)
    small, residue, used = small_problem(units, start, end, split, height)
    found, descent_cpu = plan_small(
        small, None if seconds is None else max(0.0, seconds - watch.elapsed()),
        None if cpu is None else max(0.0, cpu - watch.cpu_elapsed()))
    base = np.zeros(len(units), np.int64)
    base[group] = found.offsets[:len(group)] + residue
    room = np.zeros(len(edges), np.int64)
    room[used] = found.offsets[len(group):]
    base[inner] = rel + room[stretch]
    return units.offsets(base), {"cut": 0, "long_units": len(split.longs),
                                 "crossing_units": len(group) - len(split.longs) -
                                 len(units.pinned), "rooms": len(used),
                                 "tightened": tightened,
                                 "small_winner": found.stats.get("winner", found.planner),
                                 "descent_cpu": descent_cpu}


@register("long_first")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The long-first plan (see the module doc); ``seed`` and ``hint`` are not used."""
    return unit_sweep_plan("long_first", first_offsets, problem, budget, LongFirstOptions(),
                           options)


plan.options = LongFirstOptions()
