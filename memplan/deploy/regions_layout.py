"""A region choice and its layout found together by a sweep over time: a search, no bound.

The relaxation (`memplan.deploy.regions_sweep`) chooses a region per unit under
the per-step loads alone; on a small fast bank its choice often fills the bank
to the byte at many steps, and laid out afterwards by the heuristics it no
longer fits (on Gemma-2's 10 KB bank: 12 KB), though a plan of that very cost
exists. This sweep chooses the region and the offset of each unit as it starts,
so every state it keeps is a layout that fits::

    time ->        t0     t1     t2
    fast  10240 |  a 8192 |      c 8192 |        a state at t1: (a: fast at 0,
                |  b 2048 ....... |              b: fast at 8192); c may not
    slow        |         d 4096 .......|        go fast at t1 (b is in its way)

Steps (`sweep_layout`):

- the units by the step they start; a *state* is, for each unit live at the
  step, its region and, in a *placed* region (every region but the last, the
  roomiest), its offset; its cost is that of the choices so far;
- a unit that starts branches every state over its regions and, in a placed
  region, over a few offsets: multiples of its own size (`GRID` at most),
  the region's top, right above or below a live unit of the region (each at
  the unit's alignment, within the capacity, apart from every live unit there);
- in the last region only the loads per step are kept within its capacity,
  as in the relaxation: the caller lays it out and checks it; with slow bytes
  aimed at (`RegionModel.aim_bytes`, a ceiling's; two regions, the last the
  slow one) a state whose bytes there pass them goes (they only grow);
- equal states merge at their least cost; then each state's cost plus what
  the units still to come cost at least (`Guide`: the relaxation swept the
  other way in time, its states kept) orders the states, ties to the widest
  free range left in the placed regions; the first ``max_states`` stay, those
  above a known plan's cost go. A beam search, not a proof.

``reverse`` runs it backwards in time: another search, which often finds what
the forward one misses (a unit's offset is chosen next to the units live at its
end rather than at its start).

Units are taken as their bounding rectangles (a unit of several boxes keeps
the room of all of them while it lives: sound, maybe not tight). Problems with
explicit conflicts beyond the lifetimes (``separations``) are left to CP-SAT.
Cost: O(units * states * live^2) array work, at most ``max_work`` entries (a
count, so a busy machine gets the same verdict). The beam runs compiled
(``_layout_kernel.c``: the same states, merges and ties, about 45 M entries a CPU
second against numpy's 12 M, and none of numpy's cost per step, which dominated the
narrow beams); the numpy loop below is its fallback where no C compiler was at
hand, and the tests hold the two equal. The guide's relaxation runs compiled too, and
hands over its states already as the kernel's columns (`regions_sweep.Record`).
"""

from __future__ import annotations

import numpy as np

from memplan.budget import past, to_deadline
from memplan.deploy.regions import slow_regions
from memplan.deploy.regions_sweep import (
    Record,
    choice_columns,
    compiled_relaxation,
    event_columns,
    hash_mix,
    merged,
    rows,
    sweep_relaxation,
    timeline,
    unit_choices,
)
from memplan.shares import LAYOUT_KERNEL_WORK_PER_CPU, LAYOUT_WORK_PER_CPU

try:
    from memplan.deploy._layout_kernel import sweep as _kernel_sweep
except ImportError:  # no C compiler at install time: the beam in numpy, below
    _kernel_sweep = None

MAX_STATES = 1 << 8  # states the beam keeps at one step
GRID = 8  # multiples of its own width a unit tries in a region
FAR = np.iinfo(np.int64).max // 4  # where an absent unit sits: apart from every offset
CROWD = 8  # times the beam the states may grow to while units start at one step
MAX_WORK = 1 << 28  # state entries it may touch in all (states x candidates x live, summed)


def sweep_layout(model, ceiling: int | None = None, max_states: int = MAX_STATES,
                 max_work: int = MAX_WORK, deadline: float | None = None,
                 reverse: bool = False) -> tuple[int, np.ndarray, np.ndarray] | None:
    """The cheapest plan the beam finds for ``model`` (a packed-free
    `memplan.deploy.regions_exact.RegionModel`): its cost (`RegionModel.cost`'s units),
    the region of every buffer and its offset in its region (0 in the last region, which
    the caller lays out); None when no state survives, the work passes ``max_work``, the
    guide's relaxation gives up, the model has explicit conflicts, or the wall clock
    passes ``deadline`` (a `time.perf_counter` value: the caller's limit). ``ceiling``: a
    known plan's cost. ``reverse``: the sweep runs backwards in time (another search,
    often finding what the forward one misses). With two regions, the model's ``aim`` (a
    slow arena) bounds the slow region's loads, and its ``aim_bytes`` (slow bytes) the
    bytes put there (the slow arena laid out is the caller's to check)."""
    geometry, problem = model.geometry, model.problem
    if geometry.separations or len(model.limit) < 2:
        return None
    guide = Guide(model, ceiling, not reverse)
    if not guide.steps.size and len(geometry.units):
        return None
    limits, choices, prices = unit_choices(model)
    placed = len(limits) - 1  # regions below this index get offsets
    if model.aim is not None and placed == 1:  # the slow arena aimed at bounds its loads
        limits[placed] = min(limits[placed], model.aim)
    # the slow bytes aimed at (a ceiling's) bound the bytes each state puts in the last region
    most = model.aim_bytes if placed == 1 and slow_regions(problem).tolist() == [False, True] \
        else None
    unit_size = np.array([int(problem.sizes[list(unit.members)].sum())
                          for unit in geometry.units], np.int64)
    line = timeline(model, reverse)
    ends = line.ends
    groups = geometry.groups
    extent = np.array([unit.extent for unit in geometry.units], np.int64)
    pinned = groups.pinned_base.astype(np.int64)
    modulus = np.maximum(groups.modulus.astype(np.int64), 1)
    residue = groups.residue.astype(np.int64) % modulus
    if _kernel_sweep is not None:
        found = _kernel_sweep(*kernel_columns(
            line, extent, unit_size, pinned, modulus, residue, choices, prices, limits,
            guide), placed, -1 if most is None else most, max_states,
            CROWD, max_work, guide.horizon, np.inf if ceiling is None else ceiling,
            np.inf if deadline is None else to_deadline(deadline))
        if found is None:
            return None
        cost, unit_regions, unit_offsets = found
        return (cost, *_members(geometry, len(problem), np.frombuffer(unit_regions, np.int64),
                                np.frombuffer(unit_offsets, np.int64)))
    box_starts = set(line.box_start.tolist())
    events, starting = line.events()
    column = np.zeros(len(geometry.units), np.int64)  # a live unit's column in the states
    live: list[int] = []
    region = np.zeros((1, 0), np.int64)  # per state and live unit: its region
    offset = np.zeros((1, 0), np.int64)  # and its offset there (0 in the last region)
    costs = np.zeros(1, np.int64)
    slow = np.zeros(1, np.int64)  # per state: the bytes its units put in the last region
    trail: list[tuple] = []  # (parents, unit, regions, offsets) per branching or cut
    work = 0
    for t in events:
        if past(deadline):
            return None
        keep = [n for n, u in enumerate(live) if ends[u] > t]
        if len(keep) < len(live):  # the states they leave equal merge before the beam
            live = [live[n] for n in keep]
            region, offset = region[:, keep], offset[:, keep]
        for u in starting.get(t, []):
            width = extent[u]
            lows = extent[live] if live else np.zeros(0, np.int64)
            parts = []
            for k, price in zip(choices[u].tolist(), prices[u].tolist(), strict=True):
                if k >= placed:
                    state = np.arange(len(costs)) if most is None else \
                        np.flatnonzero(slow + unit_size[u] <= most)
                    parts.append((state, np.full(len(state), k), np.zeros(len(state), np.int64),
                                  costs[state] + price, slow[state] + unit_size[u]))
                    continue
                mine = region == k  # the live units in region k, first in each row
                count = int(mine.sum(axis=1).max(initial=0))
                first = np.argsort(~mine, axis=1, kind="stable")[:, :count]
                there = np.take_along_axis(mine, first, 1)
                low = np.where(there, np.take_along_axis(offset, first, 1), FAR)
                high = np.where(there, low + lows[first], FAR)
                candidates = _candidates(low, high, width, limits[k], residue[u],
                                         modulus[u], pinned[u])
                work += candidates.size * (count + 1)
                if work > max_work:
                    return None
                clear = (candidates[:, :, None] + width <= low[:, None, :]) | \
                    (high[:, None, :] <= candidates[:, :, None])
                ok = clear.all(axis=2) & (candidates >= 0) & \
                    (candidates + width <= limits[k])
                state, at = np.nonzero(ok)
                parts.append((state, np.full(len(state), k), candidates[state, at],
                              costs[state] + price, slow[state]))
            parents = np.concatenate([p[0] for p in parts])
            regions = np.concatenate([p[1] for p in parts])
            offsets = np.concatenate([p[2] for p in parts])
            costs = np.concatenate([p[3] for p in parts])
            slow = np.concatenate([p[4] for p in parts])
            region = np.column_stack([region[parents], regions])
            offset = np.column_stack([offset[parents], offsets])
            live.append(u)
            trail.append((parents, u, regions, offsets))
            if len(costs) > CROWD * max_states:  # many units start at once: the cheapest
                _, least, chosen = merged(np.hstack([region, offset]), costs)
                kept = chosen[np.argsort(least, kind="stable")[:CROWD * max_states]]
                region, offset, costs, slow = region[kept], offset[kept], costs[kept], slow[kept]
                trail.append((kept, None, None, None))
        if starting.get(t):
            states, costs, chosen = merged(np.hstack([region, offset]), costs)
            region, offset, slow = states[:, :len(live)], states[:, len(live):], slow[chosen]
            trail.append((chosen, None, None, None))
        if t in box_starts and len(costs):
            column[live] = np.arange(len(live))
            held = line.held(t, column, len(live))
            fits = ((region == placed) * held).sum(axis=1) <= limits[placed]
            if not fits.all():
                kept = np.flatnonzero(fits)
                region, offset, costs, slow = region[kept], offset[kept], costs[kept], slow[kept]
                trail.append((kept, None, None, None))
        if starting.get(t) and len(costs):
            bound = costs + guide.rest(t, live, region)
            order = np.lexsort((-_widest_gap(region, offset, extent[live], limits, placed),
                                bound))
            order = order[bound[order] <= (np.inf if ceiling is None else ceiling)]
            kept = order[:max_states]
            region, offset, costs, slow = region[kept], offset[kept], costs[kept], slow[kept]
            trail.append((kept, None, None, None))
        if not len(costs):
            return None
    best = int(np.argmin(costs))
    cost = int(costs[best])
    regions = np.zeros(len(problem), np.int64)
    offsets = np.zeros(len(problem), np.int64)
    for parents, u, picked, at in reversed(trail):
        if u is not None:
            members = list(geometry.units[u].members)
            regions[members] = picked[best]
            offsets[members] = at[best] + np.array(geometry.units[u].rel)
        best = int(parents[best])
    return cost, regions, offsets


def work_per_cpu() -> int:
    """The state entries `sweep_layout` touches a CPU second: compiled, or in numpy."""
    return LAYOUT_WORK_PER_CPU if _kernel_sweep is None else LAYOUT_KERNEL_WORK_PER_CPU


def kernel_columns(line, extent, unit_size, pinned, modulus, residue, choices, prices,
                   limits, guide) -> tuple[np.ndarray, ...]:
    """The sweep's columns as the compiled kernel takes them (``sweep`` in
    ``_layout_kernel.c``): the steps (a box starts at each or not), the units starting at
    each, the units' columns and choices, the boxes, and the guide's states by step, each
    step's rows sorted for a binary search (as the compiled relaxation recorded them)."""
    record = guide.columns
    return tuple(np.ascontiguousarray(a, np.int64) for a in (
        *event_columns(line), line.ends, extent, unit_size, pinned, modulus, residue,
        *choice_columns(choices, prices), limits, line.box_start, line.box_end,
        line.box_bytes, line.box_unit, record.steps, record.seen_ptr, record.seen,
        record.state_ptr, record.cell_ptr, record.states, record.costs,
        guide.price.reshape(-1), hash_mix(2 * len(extent) + 2)))


def _members(geometry, buffers: int, unit_regions: np.ndarray, unit_offsets: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each buffer's region and offset from its unit's."""
    regions = np.zeros(buffers, np.int64)
    offsets = np.zeros(buffers, np.int64)
    for u, unit in enumerate(geometry.units):
        members = list(unit.members)
        regions[members] = unit_regions[u]
        offsets[members] = unit_offsets[u] + np.array(unit.rel)
    return regions, offsets


class Guide:
    """What the units still to start cost at least, given the regions of the live ones:
    the relaxation swept backwards (`sweep_relaxation` with ``reverse``), its states
    kept at every step. Its cost at step ``t`` covers every unit live after ``t``: the
    live ones' own costs, taken off, leave the rest's least cost under the loads. With
    the compiled beam, ``columns`` (a `Record`, from the compiled relaxation) holds the
    same states as the beam's columns, ``record`` as views of them."""

    def __init__(self, model, ceiling: int | None, reverse: bool = True):
        self.horizon = int(model.problem.horizon)
        self.price = np.zeros((len(model.geometry.units), len(model.limit)), np.int64)
        for u, inside in enumerate(model.unit_regions):
            for k in inside:
                self.price[u, k] = model.unit_bytes[u] * model.weight[k]
        if _kernel_sweep is not None:  # the compiled beam takes the record as columns
            swept, record = compiled_relaxation(model, ceiling, reverse=reverse, record=True)
            self.columns = record if swept is not None else Record.empty()
            self.record = self.columns.by_step()
            self.steps = self.columns.steps
        else:
            self.record: dict = {}
            swept = sweep_relaxation(model, ceiling, reverse=reverse, record=self.record,
                                     uncapped=True)
            self.steps = np.array(sorted(self.record) if swept is not None else [], np.int64)

    def rest(self, t: int, live: list[int], region: np.ndarray) -> np.ndarray:
        """Per state (its ``live`` units' ``region``), the least cost of the units that
        start after step ``t``; inf where no choice of theirs meets the loads."""
        at = np.searchsorted(self.steps, self.horizon - t, side="right") - 1
        if at < 0:  # nothing starts after step t
            return np.zeros(len(region))
        seen, states, costs = self.record[int(self.steps[at])]
        if sorted(seen.tolist()) != sorted(live):
            return np.zeros(len(region))
        if not live:
            return np.full(len(region), float(costs.min()))
        columns = np.array([live.index(u) for u in seen.tolist()], np.int64)
        known, wanted = rows(states), rows(region[:, columns])
        order = np.argsort(known)
        found = np.minimum(np.searchsorted(known[order], wanted), len(order) - 1)
        hit = known[order][found] == wanted
        own = self.price[np.array(live)[None, :], region].sum(axis=1)
        return np.where(hit, costs[order][found] - own, np.inf)


def _widest_gap(region: np.ndarray, offset: np.ndarray, extents: np.ndarray,
                 limits: list[int], placed: int) -> np.ndarray:
    """Per state, the least over the placed regions of the widest free range of bytes
    at the step: what the next units can still take."""
    widest = np.full(len(region), FAR)
    for k in range(placed):
        mine = region == k
        low = np.where(mine, offset, limits[k])
        order = np.argsort(low, axis=1, kind="stable")
        low = np.take_along_axis(low, order, 1)
        high = np.take_along_axis(np.where(mine, offset + extents, limits[k]), order, 1)
        ceiling = np.maximum.accumulate(np.hstack([np.zeros((len(region), 1), np.int64),
                                                   high]), axis=1)
        gaps = np.hstack([low, np.full((len(region), 1), limits[k])]) - ceiling
        widest = np.minimum(widest, gaps.max(axis=1))
    return widest


def _candidates(low: np.ndarray, high: np.ndarray, width: int, limit: int, residue: int,
                modulus: int, pinned: int) -> np.ndarray:
    """Per state (the ``low`` and ``high`` ends of the units in the region), the offsets
    a unit of ``width`` bytes may try: the multiples of its width (`GRID` at most, from
    the floor), the region's top, right above or below each unit there (at the unit's
    alignment); its pinned offset."""
    states = len(low)
    if pinned >= 0:
        return np.full((states, 1), pinned)
    fixed = np.append(np.arange(min(limit // max(width, 1), GRID)) * width, limit - width)
    return np.hstack([np.tile(_aligned(fixed, residue, modulus, up=True), (states, 1)),
                      _aligned(high, residue, modulus, up=True),
                      _aligned(low - width, residue, modulus, up=False)])


def _aligned(values: np.ndarray, residue: int, modulus: int, *, up: bool) -> np.ndarray:
    """``values`` moved to the nearest offset at ``residue`` modulo ``modulus`` (up or down)."""
    if modulus == 1:
        return values
    shift = (residue - values) % modulus
    return values + shift if up else values + shift - modulus * (shift > 0)
