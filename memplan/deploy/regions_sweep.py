"""The region choice's relaxation solved exactly by a sweep over time, when few units overlap.

`memplan.deploy.regions_exact.RegionModel` without the packing (``packed=False``)
chooses a region per unit under the per-step loads alone: at every step, the
bytes a region holds are at most its capacity. CP-SAT bounds that model with
its linear relaxation, which big tensors leave weak (on a ViT, a bank that holds
one attention map of the two live: the LP splits both, CP-SAT's bound stays at
half the optimum it has found). Yet the loads couple only the units live at one
step, and a compiler's graph keeps few of them live at once, so a sweep solves
it exactly::

    time ->      t0    t1    t2    t3
    unit a       [fast ......)              state at t1: (a: fast, b: slow)
    unit b             [slow ......)        state at t2: (b: slow, c: fast)
    unit c                   [fast ...)

Steps (`sweep_relaxation`):

- the units by the step they start; a *state* is the region of every unit live
  at the current step, with the least cost of any choice of the earlier units
  that leads to it;
- at each step where a unit starts or ends: units that ended leave the states
  (equal states merge at their least cost); each unit that starts branches
  every state over the regions it may use (its extent within the region's
  capacity, and within a kept top); the states whose loads at the step exceed
  a capacity (or a kept top) go;
- the cheapest state at the end is the relaxation's optimum, its choice
  read back along the parents.

Exact for the relaxation, so its optimum is a lower bound on every region
plan's cost; a state that already costs more than a plan known to fit goes
(the optimum is at most that plan's cost). Cost: O(events * states * live),
the states at most ``max_states`` and the entries touched at most
``max_work`` (a count, so a busy machine gets the same verdict); past either the
sweep gives up (None) and CP-SAT solves the relaxation. A model with a cap on the
slow bytes or arena (`RegionModel.cap`) couples every step; the sweep leaves it to
CP-SAT too.

The sweep runs compiled (``relax`` in ``_layout_kernel.c``: the same states, merges,
ties, work count and record), since numpy's cost per call, a few hundred events of
small arrays, made most of its time (on Phi-3's 50 % bank 34 ms a sweep, compiled 8); its
record comes as the compiled layout sweep's guide columns (`Record`), each step's rows
sorted. The numpy loop (`_numpy_sweep`) is its fallback where no C compiler was at
hand, and the tests hold the two equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memplan.problem import NO_OFFSET

try:
    from memplan.deploy._layout_kernel import relax as _kernel_relax
except ImportError:  # no C compiler at install time: the sweep in numpy (`_numpy_sweep`)
    _kernel_relax = None

MAX_STATES = 1 << 13  # states the sweep keeps at one step before it gives up
MAX_WORK = 1 << 23  # state entries it may touch in all (states x live units, summed)
LONG = (1 << 63) - 1  # the compiled sweep's largest integer: a ceiling or count is cut to it


def sweep_relaxation(model, ceiling: int | None = None, max_states: int = MAX_STATES,
                     max_work: int = MAX_WORK, *, reverse: bool = False,
                     record: dict | None = None, uncapped: bool = False
                     ) -> tuple[int, np.ndarray] | None:
    """The least cost (`RegionModel.cost`'s units) of the region choice of ``model`` (a
    `memplan.deploy.regions_exact.RegionModel`) under its per-step loads, and a choice
    reaching it (per buffer, the region index); None when a state count passes
    ``max_states``, the entries touched pass ``max_work``, the model has a cap, or no
    choice fits (CP-SAT then proves it). ``ceiling``: the cost of a choice known to
    meet the loads (a plan's): states above it go, the optimum being at most it.
    ``reverse``: the sweep runs backwards in time (`timeline`); ``record``, when given,
    gets after each event its step (in the sweep's time), the live units, the states
    and their costs: what the choices of the units seen so far cost at least (the
    compiled sweep gives each step's states sorted by row).
    ``uncapped``: a cap is left out (the bound then holds without it: a lower one)."""
    if model.capped is not None and not uncapped:
        return None
    if _kernel_relax is None:
        return _numpy_sweep(model, ceiling, max_states, max_work, reverse, record)
    found, steps = compiled_relaxation(model, ceiling, max_states, max_work, reverse=reverse,
                                       record=record is not None)
    if record is not None:
        record.update(steps.by_step())
    return found


def compiled_relaxation(model, ceiling: int | None = None, max_states: int = MAX_STATES,
                        max_work: int = MAX_WORK, *, reverse: bool = False,
                        record: bool = False
                        ) -> tuple[tuple[int, np.ndarray] | None, Record | None]:
    """`sweep_relaxation` run compiled (``relax`` in ``_layout_kernel.c``), a cap left
    out, and with ``record`` what it saw as the compiled layout sweep's guide columns
    (`Record`; up to the last step done when it gives up)."""
    geometry = model.geometry
    limits, choices, prices = unit_choices(model)
    line = timeline(model, reverse)
    found, kept = _kernel_relax(
        *(np.ascontiguousarray(a, np.int64) for a in (
            *event_columns(line), line.ends, *choice_columns(choices, prices), limits,
            line.box_start, line.box_end, line.box_bytes, line.box_unit,
            hash_mix(2 * len(geometry.units) + 2))),
        ceiling is not None, 0 if ceiling is None else min(max(math.floor(ceiling), -LONG), LONG),
        min(max_states, LONG), min(max_work, LONG), record)
    steps = None if kept is None else Record(*(np.frombuffer(c, np.int64) for c in kept))
    if found[0] is None:
        return None, steps
    regions = np.zeros(len(model.problem), np.int64)
    for u, region in enumerate(np.frombuffer(found[1], np.int64).tolist()):
        regions[list(geometry.units[u].members)] = region
    return (found[0], regions), steps


@dataclass(frozen=True)
class Record:
    """What the compiled sweep saw after each event, as flat columns (the compiled layout
    sweep's guide): the steps (in the sweep's time); for the ``i``-th, its live units
    (``seen[seen_ptr[i]:seen_ptr[i + 1]]``), its states (``states[cell_ptr[i]:...]``, a
    row per state, the rows sorted for a binary search) and their costs
    (``costs[state_ptr[i]:...]``)."""

    steps: np.ndarray
    seen_ptr: np.ndarray
    seen: np.ndarray
    state_ptr: np.ndarray
    cell_ptr: np.ndarray
    states: np.ndarray
    costs: np.ndarray

    @staticmethod
    def empty() -> Record:
        """No step recorded."""
        none, start = np.zeros(0, np.int64), np.zeros(1, np.int64)
        return Record(none, start, none, start, start, none, none)

    def by_step(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Step -> (live units, states, costs): `sweep_relaxation`'s ``record``."""
        seen, state, cell = (p.tolist() for p in (self.seen_ptr, self.state_ptr,
                                                   self.cell_ptr))
        return {t: (self.seen[seen[i]:seen[i + 1]],
                    self.states[cell[i]:cell[i + 1]].reshape(state[i + 1] - state[i],
                                                              seen[i + 1] - seen[i]),
                    self.costs[state[i]:state[i + 1]])
                for i, t in enumerate(self.steps.tolist())}


def event_columns(line: Timeline) -> tuple[np.ndarray, ...]:
    """The sweep's events as the compiled sweeps take them: the steps, whether a box
    starts at each, and the units starting at the ``i``-th (``units[ptr[i]:ptr[i + 1]]``)."""
    events, starting = line.events()
    box_starts = set(line.box_start.tolist())
    starts = [starting.get(t, []) for t in events]
    return (np.array(events, np.int64), np.array([t in box_starts for t in events], np.int64),
            np.cumsum([0] + [len(u) for u in starts]),
            np.array([u for at in starts for u in at], np.int64))


def choice_columns(choices: list[np.ndarray], prices: list[np.ndarray]
                   ) -> tuple[np.ndarray, ...]:
    """`unit_choices`' per unit regions and costs as flat columns: the ``u``-th unit's from
    ``ptr[u]`` to ``ptr[u + 1]``."""
    return (np.cumsum([0] + [len(c) for c in choices]),
            np.concatenate([np.zeros(0, np.int64), *choices]),
            np.concatenate([np.zeros(0, np.int64), *prices]))


def hash_mix(columns: int) -> np.ndarray:
    """`merged`'s hash: a random factor per column (any count of them: the first ones of a
    longer mix are a shorter one's)."""
    return np.random.default_rng(0).integers(1, 1 << 62, columns)


def _numpy_sweep(model, ceiling: int | None, max_states: int, max_work: int, reverse: bool,
                 record: dict | None) -> tuple[int, np.ndarray] | None:
    """`sweep_relaxation` in numpy: its fallback without the compiled kernel."""
    geometry, problem = model.geometry, model.problem
    limits, choices, prices = unit_choices(model)
    line = timeline(model, reverse)
    ends = line.ends
    box_starts = set(line.box_start.tolist())
    events, starting = line.events()
    position = np.zeros(len(geometry.units), np.int64)  # a live unit's column in the states
    live: list[int] = []
    states = np.zeros((1, 0), np.int64)  # one row per state: the live units' regions
    costs = np.zeros(1, np.int64)
    trail: list[tuple[np.ndarray, int | None, np.ndarray | None]] = []  # parents, unit, regions
    work = 0
    for t in events:
        work += len(states) * (len(live) + 1)
        if work > max_work:
            return None
        keep = [n for n, u in enumerate(live) if ends[u] > t]
        if len(keep) < len(live):
            live = [live[n] for n in keep]
            states, costs, parents = merged(states[:, keep], costs)
            trail.append((parents, None, None))
        for u in starting.get(t, []):
            options = len(choices[u])
            if options == 0:
                return None
            parents = np.repeat(np.arange(len(states)), options)
            picked = np.tile(choices[u], len(states))
            states = np.column_stack([states[parents], picked])
            costs = costs[parents] + np.tile(prices[u], len(costs))
            live.append(u)
            trail.append((parents, u, picked))
            if ceiling is not None:
                below = np.flatnonzero(costs <= ceiling)
                if len(below) < len(states):
                    states, costs = states[below], costs[below]
                    trail.append((below, None, None))
            if len(states) > max_states:
                return None
        if t in box_starts and len(states):
            position[live] = np.arange(len(live))
            held = line.held(t, position, len(live))
            fits = np.ones(len(states), bool)
            for k, limit in enumerate(limits):
                fits &= ((states == k) * held).sum(axis=1) <= limit
            if not fits.all():
                kept = np.flatnonzero(fits)
                states, costs = states[kept], costs[kept]
                trail.append((kept, None, None))
        if not len(states):
            return None
        if record is not None:
            record[t] = (np.array(live, np.int64), states, costs)
    best = int(np.argmin(costs))
    regions = np.zeros(len(problem), np.int64)
    for parents, u, picked in reversed(trail):
        if u is not None:
            regions[list(geometry.units[u].members)] = picked[best]
        best = int(parents[best])
    return int(costs.min()), regions


def unit_choices(model) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    """Each region's limit (its capacity, within a kept top), and per unit the regions it
    may use (its lowest offset plus its extent within the limit) and its cost in each."""
    groups = model.geometry.groups
    limits = [min(limit, model.kept.get(k, limit)) for k, limit in enumerate(model.limit)]
    choices, prices = [], []
    for u, unit in enumerate(model.geometry.units):
        lowest = int(groups.pinned_base[u]) if groups.pinned_base[u] != NO_OFFSET else \
            int(groups.residue[u]) if groups.modulus[u] > 1 else 0
        allowed = [k for k in model.unit_regions[u] if lowest + unit.extent <= limits[k]]
        choices.append(np.array(allowed, np.int64))
        prices.append(np.array([model.unit_bytes[u] * model.weight[k] for k in allowed],
                               np.int64))
    return limits, choices, prices


@dataclass(frozen=True)
class Timeline:
    """Per unit, the first step any member is live and the step after the last; per box
    of the geometry, its steps, bytes and unit. Backwards (``timeline(model, True)``),
    step ``t`` becomes ``horizon - t``: a unit live over ``[start, end)`` lives over
    ``[horizon - end + 1, horizon - start + 1)``, the same steps reversed."""

    starts: np.ndarray
    ends: np.ndarray
    box_start: np.ndarray
    box_end: np.ndarray
    box_bytes: np.ndarray
    box_unit: np.ndarray

    def events(self) -> tuple[list[int], dict[int, list[int]]]:
        """The steps where a unit starts or ends or a box starts, in order, and the units
        starting at each (by index)."""
        steps = set(self.starts.tolist()) | set(self.ends.tolist()) | \
            set(self.box_start.tolist())
        starting: dict[int, list[int]] = {}
        for u in np.argsort(self.starts, kind="stable").tolist():
            starting.setdefault(int(self.starts[u]), []).append(u)
        return sorted(steps), starting

    def held(self, t: int, column: np.ndarray, live: int) -> np.ndarray:
        """The bytes each of the ``live`` units (at ``column[unit]``) holds at step ``t``."""
        now = (self.box_start <= t) & (self.box_end > t)
        held = np.zeros(live, np.int64)
        np.add.at(held, column[self.box_unit[now]], self.box_bytes[now])
        return held


def timeline(model, reverse: bool = False) -> Timeline:
    """The `Timeline` of ``model``'s units and boxes, forwards or backwards in time."""
    problem, geometry = model.problem, model.geometry
    starts = np.array([min(int(problem.starts[i]) for i in unit.members)
                       for unit in geometry.units], np.int64)
    ends = np.array([max(int(problem.ends[i]) for i in unit.members)
                     for unit in geometry.units], np.int64)
    box_start = np.array([box.start for box in geometry.boxes], np.int64)
    box_end = np.array([box.end for box in geometry.boxes], np.int64)
    if reverse:
        last = int(problem.horizon) + 1
        starts, ends = last - ends, last - starts
        box_start, box_end = last - box_end, last - box_start
    return Timeline(starts, ends, box_start, box_end,
                    np.array([box.high - box.low for box in geometry.boxes], np.int64),
                    np.array([box.unit for box in geometry.boxes], np.int64))


def merged(states: np.ndarray, costs: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal rows merged at their least cost: the rows, costs and each one's source row.
    Rows are sorted by a hash, then cost; neighbours merge when the rows are equal (a
    collision of the hash only keeps a state twice)."""
    if not states.shape[1]:
        chosen = np.argsort(costs, kind="stable")[:1]
        return states[chosen], costs[chosen], chosen
    mix = hash_mix(states.shape[1])
    hashed = (states * mix).sum(axis=1)  # wraps around: only a sort key
    order = np.lexsort((costs, hashed))
    ordered = states[order]
    first = np.ones(len(order), bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    chosen = order[first]
    return states[chosen], costs[chosen], chosen


def rows(matrix: np.ndarray) -> np.ndarray:
    """Each row of an integer matrix as one value that compares by equality (its bytes)."""
    matrix = np.ascontiguousarray(matrix, np.int64)
    return matrix.view(np.dtype((np.void, 8 * matrix.shape[1]))).ravel()
