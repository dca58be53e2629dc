"""Large-neighbourhood search: the exact planner's way through parts of 10k-100k buffers.

One CP-SAT model of a whole large part costs gigabytes to build and finds
nothing in a minute. Instead, keep the best plan and improve it a window at
a time, each window small enough for CP-SAT to solve to optimality in a
fraction of a second::

    address
      ^   A = arena  ..............................
      |          +--------+ +----+
      |   y0 ----|--F-----|-|-F--|------ free: the window's buffers above y0,
      |       +--+   O    | +----+               re-placed anywhere above y0
      |       |  obstacle +-----+                (below their old peak)
      +-------[----window-------)----------> time

Steps of `improve`, repeated until the time limit or the caller's CPU
budget (without either: until ``STALL`` windows in a row leave the arena as
it was), ``stop``, or the plan meets the part's floor (proven optimal):

- pick a *target*: a unit at the arena's top (its buffers set the peak), or
  now and then any unit, at random (seeded);
- the *window*: a time span around the target's lifetime; the *free* set F:
  the alias components (mandatory and optional aliases: taken whole; pinned
  ones and ones of more than ``START_SIZE`` buffers never move) whose
  lifetimes lie inside the window (widened until it holds enough), or, in a
  *band* window, every component live in it however long it lives, and whose
  every buffer lies above a line ``y0``, chosen so that F has about ``size``
  buffers (the highest ones: that is where the peak is), and the target;
- the sub-problem: F as free buffers (offsets >= y0), and as *obstacles*,
  pinned where they are, every other buffer that meets an F buffer in time
  and reaches above ``y0`` (with the aliases and explicit conflicts among
  them). Its model is `memplan.solver.model.build_model`'s, with one more
  variable: the peak of F alone, minimised, hinted with the current plan;
- CP-SAT solves it for at most ``WINDOW_CPU`` seconds of CPU (per worker: a
  busy machine slows the clock, not the work a window gets; CP-SAT's own
  deterministic time leaves out its presolve, most of a window's time) and never
  past the time left, or until ``stop``; the plan changes only when F's peak
  does not rise (it never does: the hint is a solution), so the arena never
  grows and every accepted plan is valid (the model is exact);
- the neighbourhood grows when windows are solved to optimality within their
  CPU seconds and shrink when they run out of them: the sizes, and so the
  windows, follow from the seed, not the load; the wall clock only ends the
  search at the caller's limit.

Cost per iteration: O(n) numpy to pick the window, and a model of
O(size + obstacles) boxes; memory O(n + size + obstacles), never quadratic.
Known limits: it proves no bound above the part's floor (the live-load lower
bound): a plan that meets the floor is proven optimal, any other has the
floor's gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from memplan.budget import CpuClock, Stopwatch, to_deadline
from memplan.problem import NO_OFFSET, Alias, Problem
from memplan.shares import LEAST_LEFT, LEAST_SECONDS, WINDOW_CPU
from memplan.solver.cp_params import cp_solver
from memplan.solver.cpu_budget import CpuCap
from memplan.solver.exact_options import ExactOptions
from memplan.solver.model import build_model

START_SIZE = 250  # buffers in the first neighbourhoods
MIN_SIZE, MAX_SIZE = 40, 2000  # neighbourhood sizes stay within these
STALL = 30  # without a time limit: stop after this many windows in a row without progress
EXPLORE = 0.15  # chance of a window around any unit rather than one at the peak
OBSTACLES = 3  # a window may hold this many times its size in buffers, obstacles included
BAND_CHANCE = 0.5  # chance of a band window (all live components) rather than a contained one
CLIQUE_MOST = 64  # more free buffers all live at one step: CP-SAT's one-dimensional packing
# of them overruns its time limit by seconds (OR-Tools 9.15): such a window is skipped


@dataclass
class LnsResult:
    """What the search ended with (sizes in the part's units)."""

    offsets: np.ndarray  # the best plan: never worse than the start
    stats: dict = field(default_factory=dict)
    interrupted: bool = False


def _components(problem: Problem) -> np.ndarray:
    """Per buffer: a label shared by all buffers joined by aliases (mandatory or optional)."""
    parent = np.arange(len(problem))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(problem.alias_src.tolist(), problem.alias_dst.tolist(), strict=True):
        parent[find(a)] = find(b)
    return np.array([find(i) for i in range(len(problem))]) if len(problem.alias_src) \
        else parent


class _Neighbourhoods:
    """Picks windows of one part and turns them into sub-problems; keeps the current plan."""

    def __init__(self, problem: Problem, offsets: np.ndarray, seed: int):
        self.problem = problem
        self.offsets = np.asarray(offsets, np.int64).copy()
        self.rng = np.random.default_rng(seed)
        self.label = _components(problem)
        self.has_aliases = bool(len(problem.alias_src))
        # per component: lowest offset, first start and last end of its members
        _, self.comp = np.unique(self.label, return_inverse=True)
        count = int(self.comp.max()) + 1 if len(problem) else 0
        self.comp_start = np.full(count, np.iinfo(np.int64).max)
        np.minimum.at(self.comp_start, self.comp, problem.starts)
        self.comp_end = np.zeros(count, np.int64)
        np.maximum.at(self.comp_end, self.comp, problem.ends)
        self.movable = np.bincount(self.comp, minlength=count) <= START_SIZE
        np.logical_and.at(self.movable, self.comp, problem.pinned == NO_OFFSET)
        self.horizon = int(problem.ends.max()) if len(problem) else 0
        self.comp_size = np.bincount(self.comp, minlength=count)

    def comp_low(self, comps) -> np.ndarray:
        """The lowest offset of each of ``comps`` (components)."""
        if not self.has_aliases:  # each buffer its own component, labelled in order
            return self.offsets[np.asarray(comps)]
        low = np.full(len(self.comp_start), np.iinfo(np.int64).max)
        np.minimum.at(low, self.comp, self.offsets)
        return low[np.asarray(comps)]

    @property
    def tops(self) -> np.ndarray:
        return self.offsets + self.problem.sizes

    def pick(self, size: int) -> tuple[np.ndarray, int] | None:
        """(free buffers, y0) of a new neighbourhood of about ``size`` buffers, or None."""
        tops = self.tops
        arena = int(tops.max())
        candidates = np.flatnonzero(self.movable[self.comp])
        if not len(candidates):
            return None
        at_top = candidates[tops[candidates] == arena]
        if len(at_top) and self.rng.random() >= EXPLORE:
            target = int(self.rng.choice(at_top))
        else:
            target = int(self.rng.choice(candidates))
        c = self.comp[target]
        start, end = int(self.comp_start[c]), int(self.comp_end[c])
        widen = max(end - start, 1) * self.rng.uniform(0.5, 2.0) + self.rng.integers(1, 8)
        band = self.rng.random() < BAND_CHANCE
        want = size * self.rng.uniform(1.0, 2.5)  # near 1: a whole column, y0 near 0
        while True:  # widen until the window holds enough components (or all of time)
            w0 = max(0, start - int(widen * self.rng.random()))
            w1 = min(self.horizon, end + int(widen))
            if band:  # every component live in the window, however long it lives
                inside = (self.comp_start < w1) & (self.comp_end > w0)
            else:  # only components whose whole lifetime lies in the window
                inside = (self.comp_start >= w0) & (self.comp_end <= w1)
            contained = np.flatnonzero(inside & self.movable)
            sizes = self.comp_size[contained]
            if sizes.sum() >= want or (w0 == 0 and w1 == self.horizon):
                break
            widen *= 2
        # a component is free when all of it lies above y0: take the highest ones
        lows = self.comp_low(contained)
        order = np.argsort(-lows, kind="stable")
        take = int(np.searchsorted(np.cumsum(sizes[order]), size, side="right")) + 1
        chosen = contained[order[:take]]
        if not len(chosen):
            return None
        y0 = int(lows[order[min(take, len(order)) - 1]])
        if c not in chosen and self.comp_size[c] < size:  # the target moves too
            chosen = np.append(chosen, c)
            y0 = min(y0, int(self.comp_low([c])[0]))
        free_comp = np.zeros(len(self.comp_start), bool)
        free_comp[chosen] = True
        free = np.flatnonzero(free_comp[self.comp])
        return free, y0

    def members(self, free: np.ndarray, y0: int) -> np.ndarray:
        """The window's buffers: ``free`` first, then the obstacles (O(n) numpy; counted
        before a sub-problem is built, which costs seconds at 10^5 members)."""
        problem, tops = self.problem, self.tops
        starts, ends = problem.starts, problem.ends
        is_free = np.zeros(len(problem), bool)
        is_free[free] = True
        # obstacles: buffers reaching above y0 that meet a free buffer in time
        order = np.argsort(starts[free], kind="stable")
        f_starts, f_ends = starts[free][order], np.maximum.accumulate(ends[free][order])
        reach = ~is_free & (tops > y0)
        cand = np.flatnonzero(reach)
        # a candidate meets some free buffer: one starting before its end, ending after its start
        k = np.searchsorted(f_starts, ends[cand], side="left")  # free buffers starting before
        meets = (k > 0) & (f_ends[np.maximum(k - 1, 0)] > starts[cand])
        obstacles = cand[meets]
        obstacles = self._with_conflict_partners(free, obstacles, is_free)
        return np.concatenate([free, obstacles])

    def sub_problem(self, members: np.ndarray, n_free: int) -> Problem:
        """The window's sub-problem over ``members`` (`members`: the first ``n_free`` free,
        the others pinned where they are)."""
        problem, starts, ends = self.problem, self.problem.starts, self.problem.ends
        where = np.full(len(problem), -1)
        where[members] = np.arange(len(members))
        ids = [problem.ids[i] for i in members.tolist()]
        pinned = np.where(np.arange(len(members)) < n_free, NO_OFFSET, self.offsets[members])
        aliases = []
        if self.has_aliases:
            for s, d, delta, optional in zip(problem.alias_src.tolist(),
                                             problem.alias_dst.tolist(),
                                             problem.alias_delta.tolist(),
                                             problem.alias_optional.tolist(), strict=True):
                if where[s] >= 0 and where[d] >= 0:
                    aliases.append(Alias(problem.ids[s], problem.ids[d], delta, optional))
        conflicts = [(problem.ids[a], problem.ids[b]) for a, b in problem.conflicts.tolist()
                     if where[a] >= 0 and where[b] >= 0]
        sub = Problem.from_arrays(problem.sizes[members], starts[members], ends[members],
                                  ids=ids, alignments=problem.alignments[members],
                                  pinned=pinned, aliases=aliases, conflicts=conflicts,
                                  name=f"{problem.name}/window", pins_from_plan=True)
        return sub

    def _with_conflict_partners(self, free, obstacles, is_free) -> np.ndarray:
        """Obstacles plus the buffers in explicit conflict with a free one (anywhere)."""
        conflicts = self.problem.conflicts
        if not len(conflicts):
            return obstacles
        a, b = conflicts[:, 0], conflicts[:, 1]
        partners = np.r_[b[is_free[a] & ~is_free[b]], a[is_free[b] & ~is_free[a]]]
        return np.union1d(obstacles, partners)


def _dedupe_hints(cp: cp_model.CpModel) -> None:
    """Keep one hint per variable: pinned obstacles at the same offset share one constant."""
    hint = cp.proto.solution_hint
    seen: dict[int, int] = {}
    for var, value in zip(hint.vars, hint.values, strict=True):
        seen.setdefault(var, value)
    if len(seen) < len(hint.vars):
        cp.clear_hints()
        for var, value in seen.items():
            cp.add_hint(cp.get_int_var_from_proto_index(var), value)


def _solve_window(sub: Problem, n_free: int, y0: int, arena: int, offsets: np.ndarray,
                  options: ExactOptions, seconds: float,
                  cpu: float | None = None) -> tuple[np.ndarray | None, bool, dict]:
    """(new offsets of the sub-problem or None, proven optimal, stats) for one window:
    `WINDOW_CPU` CPU seconds a worker (`cpu_budget.CpuCap`; fewer when the caller's ``cpu``
    budget has less left), and never past ``seconds`` (wall, the caller's limit; None:
    none) from the call (building the model counts: none left, no solve)."""
    watch = Stopwatch()
    if n_free > CLIQUE_MOST and sub.starts[:n_free].max() < sub.ends[:n_free].min():
        return None, False, {"built": 0.0, "clique": True}
    model = build_model(sub, lower_bound=0, upper_bound=arena, minimize=False,
                        by_section=False)  # sections: slower on windows, measured
    built = watch.elapsed()
    if seconds is not None and seconds - built <= LEAST_SECONDS:
        return None, False, {"built": built}
    cp = model.cp
    free_units = sorted({int(model.geometry.unit_of[i]) for i in range(n_free)})
    old_peak = int((offsets[:n_free] + sub.sizes[:n_free]).max())
    peak = cp.new_int_var(y0, old_peak, "window_peak")
    for u in free_units:
        unit = model.geometry.units[u]
        cp.add(model.base[u] + unit.extent <= peak)
        cp.add(model.base[u] >= y0)  # every member of a free unit lies above y0
    cp.minimize(peak)
    model.hint(offsets)
    cp.add_hint(peak, old_peak)
    _dedupe_hints(cp)
    solver = cp_solver(threads=options.threads or 1, seed=options.seed, ctrl_c=False,
                       seconds=None if seconds is None else seconds - built, log=options.log)
    budget = WINDOW_CPU if cpu is None else min(WINDOW_CPU, cpu)
    with CpuCap(solver, options.threads or 1, budget, options.stop) as cap:
        status = solver.solve(cp)
    stats = {"branches": solver.num_branches, "conflicts": solver.num_conflicts,
             "built": built, "cpu": cap.spent}
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False, stats
    return model.offsets(solver), status == cp_model.OPTIMAL, stats


def improve(problem: Problem, offsets: np.ndarray, *, floor: int, seconds: float | None,
            options: ExactOptions, on_solution: Callable[[np.ndarray], None],
            cpu: float | None = None) -> LnsResult:
    """The part's plan improved window by window (see the module doc); never worse.
    ``seconds``: wall seconds (the caller's limit); ``cpu``: CPU seconds per worker of the
    whole search, windows and the work between them (a caller's share; None: none)."""
    watch, clock = Stopwatch(), CpuClock(options.threads or 1, process=True).start()
    hood = _Neighbourhoods(problem, offsets, options.seed)
    size = START_SIZE
    stats = {"windows": 0, "improved": 0, "solved": 0, "start_arena": int(hood.tops.max()),
             "cpu": 0.0}  # CPU seconds of the windows' CP-SAT runs, per worker
    result = LnsResult(hood.offsets, stats)
    deadline = math.inf if seconds is None else watch.began + seconds
    stalled = 0  # windows in a row that did not lower the arena
    build = 0.0  # seconds the last window's sub-problem and model took to build
    try:
        while int(hood.tops.max()) > floor and (seconds is not None or cpu is not None
                                                 or stalled < STALL):
            left = to_deadline(deadline)
            cpu_left = None if cpu is None else cpu - clock.spent()
            stopped = options.stop is not None and options.stop.is_set()
            if left <= max(LEAST_LEFT, build) or stopped or \
                    (cpu_left is not None and cpu_left <= LEAST_LEFT):
                result.interrupted = options.stop is not None and options.stop.is_set()
                break
            picking = Stopwatch()
            for attempt in range(3):  # a window with too many obstacles: a smaller one
                picked = hood.pick(size >> attempt)
                if picked is None:
                    break
                free, y0 = picked
                members = hood.members(free, y0)
                if len(members) <= OBSTACLES * max(size >> attempt, MIN_SIZE):
                    break
            else:  # every window had too many obstacles (a model of them: gigabytes)
                stalled += 1
                continue
            if picked is None:
                break
            n_free = len(free)
            sub = hood.sub_problem(members, n_free)
            picked_seconds = picking.elapsed()  # choosing the window, its problem
            arena = int(hood.tops.max())
            window_seconds = None if seconds is None else left - picked_seconds
            if window_seconds is not None and window_seconds <= 0:
                break
            new, proven, window_stats = _solve_window(sub, n_free, y0, arena,
                                                      hood.offsets[members], options,
                                                      window_seconds, cpu_left)
            stats["windows"] += 1
            stats["cpu"] += window_stats.get("cpu", 0.0)
            # the next window's sub-problem and model take about as long as this one's
            build = window_stats["built"] + picked_seconds
            if new is None:
                size = max(MIN_SIZE, int(size * 0.7))
                continue
            old_peak = int((hood.offsets[free] + problem.sizes[free]).max())
            new_peak = int((new[:n_free] + sub.sizes[:n_free]).max())
            before = int(hood.tops.max())
            if new_peak <= old_peak:  # the hint is a solution: this always holds
                hood.offsets[free] = new[:n_free]
                if new_peak < old_peak:
                    stats["improved"] += 1
                    on_solution(hood.offsets.copy())
            stalled = 0 if int(hood.tops.max()) < before else stalled + 1
            if proven:
                stats["solved"] += 1
                size = min(MAX_SIZE, int(size * 1.25) + 1)
            else:
                size = max(MIN_SIZE, int(size * 0.7))
    except KeyboardInterrupt:
        result.interrupted = True
    stats["size"] = size
    stats["arena"] = int(hood.tops.max())
    result.offsets = hood.offsets
    return result
