"""Exact memory regions: choose a region per buffer and plan every region, in CP-SAT.

The objectives are the heuristic's (`memplan.deploy.regions`), within each
region's capacity: the cost (every buffer's bytes, times its weight, times its
region's cost per byte), or the arena cost (every region's top times its cost
per byte; then the cost at that arena); then, at that choice, each region as
small as it can be::

    stage 1   cost:  minimise  sum(size[u] * w[u] * weight[r] * in[u, r])   one model
              arena: minimise  sum(weight[r] * top[r]), then the cost with every
                     top[r] of a dear region kept at most where it ended
    stage 2   per region: `memplan.deploy.scratch_exact` (the exact planner's smallest
              top, then the most variable scratch at that top)

The stage-1 model, built on the solver's geometry (`memplan.solver.geometry`):

- one ``offset`` variable per unit (buffers tied by mandatory aliases move
  together), relative to its region, with the unit's alignment congruence;
- a Boolean ``in[u, r]`` per region the unit may use, exactly one true;
- per region, one ``add_no_overlap_2d`` over the units' boxes, each box an
  optional interval present when ``in[u, r]``: boxes of different regions
  never meet;
- ``in[u, r] => offset + extent <= capacity[r]``;
- explicit conflicts beyond the lifetimes: one below the other when both
  units sit in the same region;
- ``top[r] >= offset + extent`` when ``in[u, r]`` (the arena objective only);
- costs become integer weights (cost / smallest positive cost, to 1/1000);
  buffer reads to 1/1000 too.

Stage 1 leaves optional aliases out (never taken: sound, so the region
choice is feasible, though a choice that only fits by sharing is missed, and
the bounds it proves are dropped when there are any);
stage 2 plans each region with the full exact planner, aliases included,
hinted with the stage-1 layout. The result is never worse than the
heuristic plan it starts from, which is kept when better (the objective,
then total top, then granted scratch). Size of stage 1: O(b * R) optional
intervals and Booleans for b boxes and R regions. INFEASIBLE in stage 1 is a
proof that no region choice fits (``stats["proven_infeasible"]``).

Time: the stages share a budget of CPU seconds per worker, ``cpu`` (by
default the time limit's worth). Stage 1 ends once its CP-SAT runs have taken
`STAGE_SHARE` of it (`memplan.solver.cpu_budget.CpuCap`; the arena objective:
half of that for the arenas, half for the cost; a relaxation `RELAX_SHARE` of
a stage, all of a short one up to `RELAX_LEAST`; once a plan fits, no full
model with less than `FULL_MODEL_LEAST` left), and each region in turn gets an
equal part of the CPU left (`plan_scratch_exact`'s ``cpu``): a busy machine
slows the stages down but hands over at the same points. The time limit
itself is kept on the wall clock from the call: no stage runs past it.

A ``ceiling`` (a plan that fits; for ExecuTorch's banks, BankedGreedy's)
caps the slow bytes and the slow arena (`memplan.deploy.regions.slow_measures`).
Stage 1 runs first without it, hinted as usual; when its choice exceeds
either, stage 1 runs again (in the stage share of the CPU left) with
``sum(size[u] * in[u, r], r slow) <= its slow bytes`` and
``sum(top[r], r slow) <= its slow arena``, hinted with the hint when it
fits within the ceiling, else the ceiling (a solution of the model, and
the plan kept when better or when CP-SAT finds none); stage 2 only lowers
each region's top at the same choice.
What that second run proves holds within the ceiling only: the plan's
bounds (its gap, ``cost_optimal``, ``arena_optimal``) are the first run's,
which hold for every plan; ``stats["ceiling"]`` has the second run's statuses
and the bounds it proved (``cost_bound``, ``arena_bound``: lower bounds among
the plans within the ceiling, the set the plan was chosen from). The second
run's first stage starts from the first run's bound (a lower bound within the
ceiling too): its own relaxation, capped, is a knapsack over every step that
CP-SAT seldom closes in its share. It also reuses the first run's sweep of the
relaxation at the same kept tops (`_swept`) and its layouts of the same choice
(`_laid_out`), and the first run leaves out a tie-break whose plans all end over the
ceiling (`_beyond`): the same plans and bounds, less of the export's CPU. The first
run's arena stage keeps, of two plans of one value, the one within the ceiling, and
its tie-break keeps within it (a plan over it would go to the ceiling's run anyway):
a plan at the bound within the ceiling needs no second run. The second run keeps at
least `RELAX_LEAST` for its relaxations, whatever the first took.

The arena stage with two banks (the slow one the only costing region) aims the
layout sweep (`memplan.deploy.regions_layout`) at its bound when the
relaxation's choice laid out is not within the gap: the slow loads of every
state within the gap of it, so a plan the sweep finds and the slow bank's
layout reaches is proven (`_laid_out`). With a ceiling, the sweep's states keep
within its slow bytes and slow arena in both runs, so the first run's plan
mostly stays within it and the second run is not needed. When the arena plan is
over the ceiling all the same, the cost's tie-break (the first run's last stage)
keeps only plans within it; where every choice at the arena plan's tops is over
it too (or the sweep cannot tell), or none of them laid out fits, the tie-break's
relaxation runs again capped by the ceiling, every kept top raised to a slow
arena within the gap of the bound (`_loosened`): a plan within the ceiling,
proven within the gap, for one relaxation (on a KV-cache decoder's 1 MiB bank,
0.1 CPU-s against the second run's 0.3).

Bounds: beside NoOverlap2D, every region's bytes at each step where the
live set is maximal are at most its capacity and at most its top
(`RegionModel._loads`): the per-step knapsacks, coupled through the region
choices, make CP-SAT's linear relaxation, so its objective bound is that of
the fractional assignment rather than nearly zero. With ``relative_gap``
every run stops once its objective is proven within that share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from memplan.budget import Budget, Stopwatch
from memplan.deploy.regions import (
    OBJECTIVES,
    allowed_matrix,
    arena_cost,
    checked_reads,
    plan_each,
    plan_regions,
    region_cost,
    region_plan,
    region_tops,
    slow_measures,
    slow_regions,
    within,
)
from memplan.deploy.regions_layout import MAX_WORK as MAX_LAYOUT_WORK
from memplan.deploy.regions_layout import sweep_layout, work_per_cpu
from memplan.deploy.regions_sweep import sweep_relaxation
from memplan.deploy.scratch import subproblem
from memplan.deploy.scratch_exact import plan_scratch_exact
from memplan.errors import ProblemError, renamed_keyword
from memplan.plan import Plan, plan_rank
from memplan.problem import NO_OFFSET, Problem
from memplan.shares import (
    AIM_CPU,
    FULL_MODEL_LEAST,
    MIN_STAGE_SECONDS,
    NARROW_CPU,
    RELAX_LEAST,
    RELAX_SHARE,
    STAGE_SHARE,
)
from memplan.solver.cp_params import cp_solver
from memplan.solver.cpu_budget import CpuCap
from memplan.solver.geometry import build_geometry
from memplan.validate import validate

_SOLVED = (cp_model.OPTIMAL, cp_model.FEASIBLE)
NARROW_STATES = 1 << 6  # the layout sweep before the wide one: its beam (of 32, 64
# and 128 states, 64 proved the most of the decoders' slow arenas: wider is not surer)


def region_weights(problem: Problem) -> list[int]:
    """Integer cost weights per region: cost over the smallest positive cost, to 1/1000."""
    costs = [r.cost for r in problem.regions]
    unit = min((c for c in costs if c > 0), default=1.0)
    return [round(1000 * c / unit) for c in costs]


class RegionModel:
    """The CP-SAT model of the region choice and the layout of every region.

    The model itself (``cp`` and its variables ``offset``, ``inside``, ``blocks``,
    ``top``; its expressions ``cost`` and ``arena``) is built on first use: the sweeps
    (`memplan.deploy.regions_sweep`, `memplan.deploy.regions_layout`) read the plain
    columns alone, and where they solve the relaxation the export never pays for the
    model (15-20 ms of Python on a transformer's few hundred buffers). `cap` and
    `keep_tops` before it are replayed in their order, so the model is the same."""

    _BUILT = frozenset({"cp", "offset", "inside", "blocks", "top", "cost", "arena"})

    def __init__(self, problem: Problem, reads=None, *, packed: bool = True,
                 pack_last: bool = True):
        """``packed=False``: the relaxation, without the packing (`_pack`, `_separate`):
        the region choice under the per-step loads alone; its optimum is a lower bound.
        ``pack_last=False``: every region packed but the last (the roomiest, which keeps its
        per-step loads alone and is laid out afterwards): the aimed search's model
        (`_aimed`), a relaxation too, much lighter than the full model."""
        self.packed, self.pack_last, self.reads = packed, pack_last, reads
        mandatory = [a for a in problem.aliases if not a.optional]
        self.problem = core = problem.replace(aliases=mandatory)
        self.geometry = geometry = build_geometry(core)
        self.allowed = allowed_matrix(core)
        ceiling = int(core.sizes.sum())
        self.limit = [min(r.capacity or ceiling, core.capacity or ceiling)
                      for r in core.regions]
        # per unit, the regions it may use
        self.unit_regions = [np.flatnonzero(self.allowed[unit.members[0]]).tolist()
                             for unit in geometry.units]
        self.weight = weight = region_weights(core)
        self.costly = [k for k, w in enumerate(weight) if w > 0]  # the regions with a top
        scaled = np.round(1000 * checked_reads(core, reads)).astype(np.int64)
        self.unit_bytes = [int((core.sizes * scaled)[list(unit.members)].sum())
                           for unit in geometry.units]
        self.capped: tuple[int, int] | None = None  # `cap`'s slow bytes and slow arena
        # the slow arena and slow bytes the layout sweep keeps within (a ceiling's): aims,
        # no constraints
        self.aim: int | None = None
        self.aim_bytes: int | None = None
        self.kept: dict[int, int] = {}  # `keep_tops`'s tops
        self._top_limits: dict = {}  # per region, the constraint that keeps its top
        self._added: list = []  # `cap` and `keep_tops` calls before the model is built

    def __getattr__(self, name: str):
        if name not in RegionModel._BUILT:
            raise AttributeError(name)
        self._build()
        return self.__dict__[name]

    def _build(self) -> None:
        """The CP-SAT model: per unit its offset and region literals, the packing (unless
        the relaxation), the tops, the loads; then the constraints added before."""
        core, geometry, limit = self.problem, self.geometry, self.limit
        cp = self.cp = cp_model.CpModel()
        regions, ids = core.regions, core.ids
        self.offset, self.inside, self.blocks = [], [], {}
        groups = geometry.groups
        for u, unit in enumerate(geometry.units):
            name = ids[unit.members[0]]
            if groups.pinned_base[u] != NO_OFFSET:
                offset = cp.new_constant(int(groups.pinned_base[u]))
            else:
                offset = cp.new_int_var(0, max(0, max(limit) - unit.extent), f"offset[{name}]")
                residue, modulus = int(groups.residue[u]), int(groups.modulus[u])
                if modulus > 1:
                    blocks = cp.new_int_var(0, max(limit) // modulus, f"blocks[{name}]")
                    cp.add(offset == modulus * blocks + residue)
                    self.blocks[u] = (blocks, modulus)
            inside = {}
            for k in self.unit_regions[u]:
                inside[k] = cp.new_bool_var(f"in[{name},{regions[k].name}]")
                cp.add(offset + unit.extent <= limit[k]).only_enforce_if(inside[k])
            cp.add_exactly_one(inside.values())
            self.offset.append(offset)
            self.inside.append(inside)
        if self.packed:
            self._pack()
            self._separate()
        weight = self.weight
        priced = [(self.unit_bytes[u] * weight[k], literal)
                  for u, inside in enumerate(self.inside) for k, literal in inside.items()]
        self.cost = cp_model.LinearExpr.weighted_sum([literal for _, literal in priced],
                                                     [price for price, _ in priced])
        self.top = {k: cp.new_int_var(0, limit[k], f"top[{regions[k].name}]")
                    for k in self.costly}
        for unit, offset, inside in zip(geometry.units, self.offset, self.inside, strict=True):
            for k, literal in inside.items():
                if k in self.top:
                    cp.add(offset + unit.extent <= self.top[k]).only_enforce_if(literal)
        self.arena = sum(weight[k] * top for k, top in self.top.items())
        self._loads(limit)
        for add, arguments in self._added:
            add(*arguments)

    def _loads(self, limit: list[int]) -> None:
        """Redundant, for the bound: at each step where the live set is maximal, the bytes a
        region holds are at most its capacity, and at most its top (its boxes are disjoint
        and all below the top). The knapsack of every step at once, coupled through the
        region choices, is the LP relaxation CP-SAT bounds the objective with; without it
        the optional boxes of NoOverlap2D leave the LP nearly empty. O(steps * live)."""
        boxes = self.geometry.boxes
        if not boxes:
            return
        for live in maximal_live_sets(boxes):
            held: dict[int, int] = {}  # unit -> its bytes live at the step
            for n in live:
                box = boxes[n]
                held[box.unit] = held.get(box.unit, 0) + box.high - box.low
            for k, capacity in enumerate(limit):
                units = [u for u in held if k in self.inside[u]]
                weights = [held[u] for u in units]
                if k not in self.top and sum(weights) <= capacity:
                    continue  # the capacity cannot bind here
                # one weighted sum, not a Python sum of products: a third of the build
                literals = [self.inside[u][k] for u in units]
                if k in self.top:  # load - top <= 0
                    self.cp.add(cp_model.LinearExpr.weighted_sum(
                        [*literals, self.top[k]], [*weights, -1]) <= 0)
                else:
                    self.cp.add(cp_model.LinearExpr.weighted_sum(literals, weights) <= capacity)

    def _pack(self) -> None:
        """Per region, one NoOverlap2D over the optional boxes of the units that may go there."""
        cp = self.cp
        times: dict[int, list] = {k: [] for k in self._packed_regions()}
        addresses: dict[int, list] = {k: [] for k in self._packed_regions()}
        for n, box in enumerate(self.geometry.boxes):
            for k, literal in self.inside[box.unit].items():
                if k not in times:
                    continue
                times[k].append(cp.new_optional_fixed_size_interval_var(
                    box.start, box.end - box.start, literal, f"time{n}@{k}"))
                addresses[k].append(cp.new_optional_fixed_size_interval_var(
                    self.offset[box.unit] + box.low, box.high - box.low, literal,
                    f"address{n}@{k}"))
        for k in times:
            cp.add_no_overlap_2d(times[k], addresses[k])

    def _separate(self) -> None:
        """Explicit conflicts the lifetimes do not imply: apart when in one region."""
        cp, geometry, sizes = self.cp, self.geometry, self.problem.sizes
        rel = {i: r for unit in geometry.units for i, r in zip(unit.members, unit.rel,
                                                                strict=True)}
        for a, b in geometry.separations:
            ua, ub = int(geometry.unit_of[a]), int(geometry.unit_of[b])
            at_a, at_b = self.offset[ua] + rel[a], self.offset[ub] + rel[b]
            a_below, b_below = cp.new_bool_var(""), cp.new_bool_var("")
            cp.add(at_a + int(sizes[a]) <= at_b).only_enforce_if(a_below)
            cp.add(at_b + int(sizes[b]) <= at_a).only_enforce_if(b_below)
            for k in self.inside[ua].keys() & self.inside[ub].keys() & \
                    set(self._packed_regions()):
                cp.add_bool_or([a_below, b_below, ~self.inside[ua][k], ~self.inside[ub][k]])

    def relaxation(self) -> RegionModel:
        """This model without the packing (``packed=False``), with its cap and kept tops."""
        relaxed = RegionModel(self.problem, self.reads, packed=False)
        if self.capped is not None:
            relaxed.cap(*self.capped)
        relaxed.keep_tops(self.kept)
        return relaxed

    def _packed_regions(self) -> range:
        """The regions whose layout the model holds (all, or all but the last)."""
        return range(len(self.problem.regions) - (not self.pack_last))

    def cap(self, slow_bytes: int, slow_arena: int) -> None:
        """At most ``slow_bytes`` in the slow regions, their tops at most ``slow_arena``
        summed (`memplan.deploy.regions.slow_measures`)."""
        self.capped = (slow_bytes, slow_arena)
        self.aim, self.aim_bytes = slow_arena, slow_bytes
        self._add(self._cap, slow_bytes, slow_arena)

    def _cap(self, slow_bytes: int, slow_arena: int) -> None:
        sizes, slow = self.problem.sizes, slow_regions(self.problem)
        unit_bytes = [int(sizes[list(unit.members)].sum()) for unit in self.geometry.units]
        self.cp.add(sum(unit_bytes[u] * literal for u, inside in enumerate(self.inside)
                        for k, literal in inside.items() if slow[k]) <= slow_bytes)
        self.cp.add(sum(self.top.values()) <= slow_arena)

    def keep_tops(self, tops: dict[int, int]) -> None:
        """Every top of a region that costs something at most ``tops[region]``, in place of
        what an earlier call kept there (a tie-break may loosen them: `_choose`)."""
        self.kept.update(tops)
        self._add(self._keep_tops, dict(tops))

    def _keep_tops(self, tops: dict[int, int]) -> None:
        for k, top in self.top.items():
            if k in tops and k in self._top_limits:  # top <= kept: its domain's upper end
                self._top_limits[k].proto.linear.domain[1] = tops[k]
            elif k in tops:
                self._top_limits[k] = self.cp.add(top <= tops[k])

    def _add(self, add, *arguments) -> None:
        """``add(*arguments)`` on the model now if it is built, else when it is."""
        if "cp" in self.__dict__:
            add(*arguments)
        else:
            self._added.append((add, arguments))

    def tops(self, offsets: np.ndarray, regions: np.ndarray) -> dict[int, int]:
        """The top of each region that costs something, in a layout at the minimum sizes."""
        ends = offsets + self.problem.sizes
        return {k: int(ends[regions == k].max(initial=0)) for k in self.costly}

    def value(self, offsets: np.ndarray, regions: np.ndarray, stage: str) -> int:
        """The objective of ``stage`` ("arena" or "cost") of a layout, in the model's units."""
        if stage == "arena":
            return sum(self.weight[k] * top for k, top in self.tops(offsets, regions).items())
        first = [unit.members[0] for unit in self.geometry.units]
        return sum(b * self.weight[int(regions[i])]
                   for b, i in zip(self.unit_bytes, first, strict=True))

    def admits(self, plan: Plan) -> bool:
        """Whether a region plan meets every constraint added so far (capacities, `cap`,
        `keep_tops`), its variable scratch at the sizes it was granted."""
        if plan.stats["over_capacity"]:
            return False
        sizes = plan.stats["region_sizes"]
        names = [r.name for r in self.problem.regions]
        if any(sizes[names[k]] > top for k, top in self.kept.items()):
            return False
        return self.capped is None or all(
            mine <= cap for mine, cap in zip(slow_measures(self.problem, plan), self.capped,
                                             strict=True))

    def hint(self, offsets: np.ndarray, regions: np.ndarray) -> None:
        """Hint the unit offsets, regions and tops from a plan over regions."""
        cp = self.cp
        cp.clear_hints()
        for k, top in self.top.items():
            members = regions == k
            cp.add_hint(top, int((offsets + self.problem.sizes)[members].max())
                        if members.any() else 0)
        for u, (unit, offset, inside) in enumerate(zip(self.geometry.units, self.offset,
                                                       self.inside, strict=True)):
            first = unit.members[0]
            base = int(offsets[first]) - unit.rel[0]
            cp.add_hint(offset, base)
            if u in self.blocks:
                blocks, modulus = self.blocks[u]
                cp.add_hint(blocks, base // modulus)
            for k, literal in inside.items():
                cp.add_hint(literal, int(regions[first]) == k)

    def solve(self, deadline: float | None, cpu: float | None, seed: int, threads: int,
              gap: float = 0.0):
        """``(solver, status, CPU seconds per worker)`` of one run: at most ``cpu`` CPU
        seconds per worker, and not past ``deadline`` (a `time.perf_counter` value); it
        stops once the objective is proven within ``gap`` (a share) of its bound."""
        seconds, cap_seconds = Budget(cpu, deadline).cp_limits()
        # probing optional boxes takes seconds on a few hundred buffers (ExecuTorch's
        # llama: 6 s of presolve, no solution, the hint unread): none
        solver = cp_solver(threads=threads, seed=seed, seconds=seconds, relative_gap=gap,
                           probing=False)
        with CpuCap(solver, threads, cap_seconds) as cap:
            status = solver.solve(self.cp)
        return solver, status, cap.spent

    def read(self, solver) -> tuple[np.ndarray, np.ndarray]:
        """Offsets (within regions) and region indices of the solution."""
        n = len(self.problem)
        offsets, regions = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for unit, offset, inside in zip(self.geometry.units, self.offset, self.inside,
                                        strict=True):
            members = list(unit.members)
            offsets[members] = solver.value(offset) + np.array(unit.rel)
            regions[members] = next(k for k, lit in inside.items() if solver.boolean_value(lit))
        return offsets, regions


def maximal_live_sets(boxes) -> list[list[int]]:
    """The boxes live at each step where the live set is maximal (no later step's holds it):
    a step where a box starts and, before the next such step, one ends. O(b log b)."""
    starts = np.array([b.start for b in boxes], np.int64)
    ends = np.array([b.end for b in boxes], np.int64)
    steps = np.unique(starts)
    after = np.append(steps[1:], np.iinfo(np.int64).max)
    ends_sorted = np.sort(ends)
    ending = np.searchsorted(ends_sorted, after, side="right") - \
        np.searchsorted(ends_sorted, steps, side="right")
    order = np.argsort(starts, kind="stable").tolist()
    live: set[int] = set()
    found, nxt = [], 0
    by_end = sorted(range(len(boxes)), key=lambda n: int(ends[n]))
    gone = 0
    for t, keep in zip(steps.tolist(), (ending > 0).tolist(), strict=True):
        while nxt < len(order) and starts[order[nxt]] <= t:
            live.add(order[nxt])
            nxt += 1
        while gone < len(by_end) and ends[by_end[gone]] <= t:
            live.discard(by_end[gone])
            gone += 1
        if keep:
            found.append(sorted(live))
    return found


def objective_rank(problem: Problem, plan: Plan, reads, objective: str) -> tuple:
    """Region plans compare by this, lower is better: fitting, the ``objective`` (the arena
    cost then the cost, or the cost), then `plan_rank`'s arena and granted scratch."""
    cost = region_cost(problem, plan.regions, reads)
    if objective == "arena":
        return plan_rank(problem, plan, cost=(arena_cost(problem, plan.stats["region_sizes"]),
                                              cost))
    return plan_rank(problem, plan, cost=cost)


def plan_regions_exact(problem: Problem, *, time_limit: float | None = 10.0, seed: int = 0,
                       hint: Plan | None = None, threads: int = 2, reads=None,
                       objective: str = "cost", ceiling: Plan | None = None,
                       relative_gap: float = 0.0, cpu: float | None = None,
                       budget: Budget | None = None, weights=None) -> Plan:
    """The exact region choice and layout (module doc); ``hint`` replaces the heuristic's
    (with a ceiling: in the first stage-1 run, unless it fits within the ceiling);
    ``reads`` per buffer (how often it is read; ``weights``: their old name) multiply its
    bytes in the cost; ``objective``: one of
    `OBJECTIVES`; ``ceiling``: a plan that fits, whose slow bytes and slow arena
    (`slow_measures`) the result never exceeds (module doc); ``relative_gap``: each stage
    stops once proven within this share of its bound (0: the optimum, or the limit);
    ``cpu``: the CPU seconds per worker the stages share (default: ``time_limit``'s worth),
    within ``time_limit`` on the wall clock; ``budget``: a caller's budget (its allowance
    per worker) instead of both."""
    if objective not in OBJECTIVES:
        raise ProblemError(f"unknown objective {objective!r}; valid: {', '.join(OBJECTIVES)}")
    reads = renamed_keyword("weights", weights, "reads", reads, where="plan_regions_exact")
    clock = Budget.of_limit(time_limit, cpu=cpu) if budget is None else budget
    deadline = clock.deadline
    heuristic = hint if hint is not None else plan_regions(problem, reads=reads)
    first = heuristic  # the first stage-1 run's hint; ``heuristic``: the plan kept when better
    if ceiling is not None:
        wrong = ceiling.stats.get("over_capacity", ["not a region plan"]) or \
            validate(problem, ceiling)
        if wrong:
            raise ProblemError(f"a ceiling must be a valid region plan that fits: "
                               f"{'; '.join(map(str, wrong[:3]))}", file=problem.source)
        if heuristic.stats.get("over_capacity") or not within(problem, heuristic, ceiling):
            heuristic = ceiling
    allowance = clock.allowance()  # CPU seconds per worker, all stages
    share = None if allowance is None else allowance * STAGE_SHARE
    stats: dict = {"objective": objective, "stage_cpu": 0.0}
    capped_at = None if ceiling is None else slow_measures(problem, ceiling)  # bytes, arena
    shared = _Shared(over=capped_at)

    def build(packed: bool, **options) -> RegionModel:
        model = RegionModel(problem, reads, packed=packed, **options)
        if capped_at is not None:
            model.aim_bytes, model.aim = capped_at
        return model

    chosen = _choose(build, first,
                     heuristic, objective, (share, deadline, relative_gap), seed, threads,
                     stats, shared)
    if chosen is None:
        return _infeasible(problem, heuristic, clock, stats, reads)
    offsets, regions, proven_cost, proven_arena = chosen
    sharing = any(a.optional for a in problem.aliases)  # the model's bounds ignore it
    if sharing:
        proven_cost = proven_arena = None
    if ceiling is not None and not within(
            problem, Plan.from_offsets(problem, offsets, planner="stage 1", regions=regions),
            ceiling):
        def capped(packed: bool, **options) -> RegionModel:
            model = RegionModel(problem, reads, packed=packed, **options)
            model.cap(*capped_at)
            return model

        # at least `RELAX_LEAST`: its relaxations, capped, give its proof (a first run that
        # took its share and more, its narrow sweep searching within the ceiling, leaves none)
        left = None if allowance is None else \
            max((allowance - stats["stage_cpu"]) * STAGE_SHARE, RELAX_LEAST)
        # the run's statuses; its bounds hold within the ceiling only
        stats["ceiling"] = {"stage_cpu": 0.0}
        shared.over = None  # its plans are all within the ceiling
        chosen = _choose(capped, heuristic, heuristic, objective,
                         (left, deadline, relative_gap), seed, threads, stats["ceiling"],
                         shared)
        offsets, regions = chosen[:2] if chosen is not None else \
            (heuristic.offsets.copy(), heuristic.regions.copy())
        for key, bound in zip(("cost_bound", "arena_bound"), chosen[2:] if chosen else (),
                              strict=True):
            if bound is not None and not sharing:  # a bound among the plans within it
                stats["ceiling"][key] = bound
    sizes = problem.sizes.copy()
    used = [k for k in range(len(problem.regions)) if (regions == k).any()]
    # CPU seconds per worker of the CP-SAT runs so far
    spent = stats["stage_cpu"] + stats.get("ceiling", {}).get("stage_cpu", 0.0)
    for n, k in enumerate(used):
        members = regions == k
        part = subproblem(problem, members, one_arena=True)
        start = Plan.from_offsets(part, offsets[members], planner="regions_exact")
        part_cpu = None if allowance is None else \
            max(MIN_STAGE_SECONDS, (allowance - spent) / (len(used) - n))
        plan = plan_scratch_exact(part, budget=clock.stage(part_cpu), seed=seed,
                                  hint=start, threads=threads, relative_gap=relative_gap)
        offsets[members], sizes[members] = plan.offsets, plan.sizes
        spent += plan.stats["peak_cpu"] + plan.stats["scratch_cpu"]
        stats[f"{problem.regions[k].name}_status"] = plan.status
    plan = region_plan(problem, offsets, regions, planner="regions_exact",
                       seconds=clock.elapsed(), sizes=sizes, reads=reads,
                       best_cost=proven_cost, best_arena=proven_arena, stats=stats)
    # the start (within the ceiling) is kept when better, and were stage 2 to leave the ceiling
    if not within(problem, plan, ceiling) or \
            objective_rank(problem, heuristic, reads, objective) < \
            objective_rank(problem, plan, reads, objective):
        return region_plan(problem, heuristic.offsets, heuristic.regions,
                           planner=heuristic.planner, seconds=plan.seconds,
                           sizes=heuristic.sizes, reads=reads, best_cost=proven_cost,
                           best_arena=proven_arena, stats=dict(stats, kept="heuristic"))
    return plan


def _choose(build, hint: Plan, fallback: Plan, objective: str,
            limits: tuple[float | None, float | None, float], seed: int, threads: int,
            stats: dict, shared: _Shared) -> tuple | None:
    """Stage 1 on ``build(True)`` (a `RegionModel`, ``build(False)`` its relaxation,
    ``build(True, pack_last=False)`` the aimed search's model),
    hinted with ``hint``: the offsets and regions chosen (the ``fallback``'s when no
    search found any), and the proven lower bounds on the cost and the arena cost (None:
    none proven); None when CP-SAT proved that no choice fits.

    Each stage (the arena, for that objective; then the cost) first solves the
    relaxation (`RELAX_SHARE` of the stage's CPU, all of it up to `RELAX_LEAST`): its
    bound holds for the model, and
    its region choice, each region laid out by the heuristic planners (`lay_out`), is a
    plan when it fits. When the best plan so far is within ``gap`` of that bound, the
    stage ends there; else the full model runs, its objective at least the bound. With a
    gap (> 0), the cost stage that follows the arenas' only breaks their ties: it ends
    after its relaxation whatever the distance (the gap reported on the cost says it), and
    is left out when its plan would end over the ceiling anyway (`_beyond`).
    ``limits``: CPU seconds per worker, the deadline (a `time.perf_counter` value; None:
    none) and the relative gap; the CPU the runs took is added to ``stats["stage_cpu"]``;
    ``shared``: what the runs share (`_Shared`), read and written."""
    seconds, deadline, gap = limits
    relaxed, model = build(False), None  # the full model, built when the relaxation is short
    problem = relaxed.problem
    cost_unit = min((r.cost for r in problem.regions if r.cost > 0), default=1.0)
    best = (hint.offsets, hint.regions) if relaxed.admits(hint) else None
    stages = ["arena", "cost"] if objective == "arena" and relaxed.costly else ["cost"]
    proven = {}
    for n, stage in enumerate(stages):
        share = None if seconds is None else seconds / (len(stages) - n)
        began = stats["stage_cpu"]
        breaking = gap > 0 and n > 0  # with a gap, the cost after the arenas breaks ties
        # a tie-break after an arena plan over the first run's ceiling (which goes anyway):
        # within it, at any slow arena within the gap of the bound when need be (`_loosened`)
        within_gap = None if not breaking else _arena_aim(relaxed, proven["arena"], gap)
        outside = within_gap is not None and best is not None and \
            not _inside(problem, best, shared.over)
        relaxing = (stage, best, None if share is None else
                    max(share * RELAX_SHARE, min(share, RELAX_LEAST)), deadline, seed, threads)
        status, bound, chosen = _relaxation(relaxed, relaxing, stats, shared.sweeps,
                                            swept_only=outside)
        if status == cp_model.INFEASIBLE and n == 0:
            return None  # not even the loads of every step fit the capacities
        if n == 0:
            bound = max(bound, shared.floors.get(stage, 0.0))
            if chosen is not None:
                shared.choices.setdefault(stage, chosen)
        loosened = outside and (chosen is None or _beyond(relaxed, best, chosen, shared.over))
        if loosened:  # every choice at the arena plan's tops is over the ceiling too
            status, bound, chosen = _loosened(relaxed, within_gap, shared.over, relaxing,
                                              stats, shared.sweeps)
        if breaking and _beyond(relaxed, best, chosen, shared.over):
            stats[f"{stage}_status"] = "relaxation"  # its plan ends over the ceiling anyway
            proven[stage] = bound
            continue
        searched = stage == "cost" and not breaking
        laying = Stopwatch()
        left = None if share is None else share - (stats["stage_cpu"] - began)
        # a tie-break keeps within the ceiling (`RegionModel.admits`): a plan over it goes
        # anyway, to the ceiling's run, which then reuses its layouts (`_Shared.layouts`)
        staying = breaking and shared.over is not None
        if staying:
            relaxed.capped = shared.over
        try:
            found = _laid_out(relaxed, chosen, None if outside else best, stage,
                              (bound, gap, deadline, left), searched,
                              shared.over if stage == "arena" else None, shared.layouts)
            if outside and found is None and not loosened:  # none within it at those tops
                stats["stage_cpu"] += laying.cpu_elapsed()
                tight = chosen
                status, bound, chosen = _loosened(relaxed, within_gap, shared.over, relaxing,
                                                  stats, shared.sweeps)
                laying = Stopwatch()
                if chosen is not None and not np.array_equal(chosen, tight):
                    found = _laid_out(relaxed, chosen, None, stage,
                                      (bound, gap, deadline, left), searched, None,
                                      shared.layouts)
            best = best if found is None else found
        finally:
            if staying:
                relaxed.capped = None
        stats["stage_cpu"] += laying.cpu_elapsed()
        value = None if best is None else relaxed.value(*best, stage)
        # with a gap, the cost after the arenas only breaks ties: its relaxation suffices
        tie_break = breaking and best is not None
        left = None if share is None else share - (stats["stage_cpu"] - began)
        aim = None if value is None or _close(value, bound, gap) else \
            _arena_aim(relaxed, bound, gap) if stage == "arena" else None
        if best is not None and left is not None and left < FULL_MODEL_LEAST and \
                aim is not None and seconds > 0 and (stage, aim) not in shared.aimed:
            shared.aimed.add((stage, aim))  # the first run's is capped as the second's
            aimed = build(True, pack_last=False)
            if shared.over is not None:  # the first run: a plan within the ceiling ends it
                aimed.cap(*shared.over)
            best, bound, spent = _aimed(aimed, relaxed,
                                        (chosen, shared.choices.get(stage)), best,
                                        (bound, aim), (deadline, AIM_CPU, seed, threads))
            stats[f"{stage}_status"] = "aimed"
            stats["stage_cpu"] += spent
        elif best is not None and left is not None and left < FULL_MODEL_LEAST:
            stats[f"{stage}_status"] = "budget"  # a plan, and no CPU left to search on
        elif not tie_break and (value is None or not _close(value, bound, gap)):
            if model is None:
                model = build(True)
                model.keep_tops(relaxed.kept)
            expression = model.arena if stage == "arena" else model.cost
            model.cp.minimize(expression)
            model.cp.add(expression >= int(np.ceil(bound - 1e-6)))
            if best is not None:
                model.hint(*best)
            # without a plan, the search for one that fits gets its floor whatever is left
            solver, status, spent = model.solve(
                deadline, left if left is None or best is not None else
                max(MIN_STAGE_SECONDS, left), seed, threads, gap)
            stats[f"{stage}_status"] = solver.status_name(status).lower()
            stats["stage_cpu"] += spent
            if status == cp_model.INFEASIBLE and n == 0:
                return None
            if status in _SOLVED:
                best = model.read(solver)
                bound = max(bound, solver.best_objective_bound)
        else:  # proven within the gap by its bound, or a tie-break left at its relaxation
            stats[f"{stage}_status"] = "relaxation"
        if n == 0:
            shared.floors[stage] = bound
        proven[stage] = bound
        if stage == "arena" and best is not None:  # keep the arenas, then lower the cost
            for kept in (relaxed, model):
                if kept is not None:
                    kept.keep_tops(relaxed.tops(*best))
    if best is None:
        return fallback.offsets.copy(), fallback.regions.copy(), None, \
            None if "arena" not in proven else proven["arena"] / 1000 * cost_unit
    offsets, regions = (np.array(a, np.int64) for a in best)
    proven_arena = proven["arena"] / 1000 * cost_unit if "arena" in proven else None
    proven_cost = proven["cost"] / 1000 / 1000 * cost_unit if objective == "cost" else None
    return offsets, regions, proven_cost, proven_arena


def _loosened(relaxed: RegionModel, within_gap: int, over: tuple[int, int], limits: tuple,
              stats: dict, sweeps: dict) -> tuple[int, float, np.ndarray | None]:
    """The tie-break's relaxation (`_relaxation`, ``limits`` its) once more, capped by the
    first run's ceiling ``over`` and every kept top at least ``within_gap`` (a slow arena
    within the gap of the arena's bound): the first run's last stage, after an arena plan
    over the ceiling, which goes anyway."""
    relaxed.cap(*over)
    relaxed.keep_tops({k: max(top, within_gap) for k, top in relaxed.kept.items()})
    return _relaxation(relaxed, limits, stats, sweeps)


def _relaxation(relaxed: RegionModel, limits: tuple, stats: dict, sweeps: dict, *,
                swept_only: bool = False) -> tuple[int, float, np.ndarray | None]:
    """The relaxation of a stage solved: the cost's by the sweep where it can (`_swept`),
    else in CP-SAT hinted with the best plan. ``limits``: the stage, the best plan (offsets
    and regions, or None), CPU seconds per worker, the deadline, the seed and threads.
    Its status (`cp_model.OPTIMAL` when swept), bound and choice (None: none found); the
    status's name goes to ``stats[stage + "_relaxed"]``, the CPU to ``stats["stage_cpu"]``."""
    stage, best, cpu, deadline, seed, threads = limits
    # a cap left out, the sweep's bound is a lower one: it holds within the cap too
    swept = None if stage != "cost" else _swept(
        relaxed, None if best is None else relaxed.value(*best, stage), sweeps)
    if swept is not None and (relaxed.capped is None or _slow_bytes(
            relaxed.problem, swept[1]) <= relaxed.capped[0]):  # solved exactly by the sweep
        stats[f"{stage}_relaxed"] = "swept"
        return cp_model.OPTIMAL, *swept
    if swept_only:
        stats[f"{stage}_relaxed"] = "unknown"
        return cp_model.UNKNOWN, 0.0, None
    relaxed.cp.minimize(relaxed.arena if stage == "arena" else relaxed.cost)
    if best is not None:
        relaxed.hint(*best)
    solver, status, spent = relaxed.solve(deadline, cpu, seed, threads)
    stats[f"{stage}_relaxed"] = solver.status_name(status).lower()
    stats["stage_cpu"] += spent
    if status not in _SOLVED:
        return status, 0.0, None
    return status, solver.best_objective_bound, relaxed.read(solver)[1]


@dataclass
class _Shared:
    """What the two stage-1 runs share: the relaxation's sweeps by their kept tops
    (`_swept`), the choices laid out (`_laid_out`), the first stage's bounds; in the
    first run, the ceiling's slow bytes and slow arena (`_beyond`, `_laid_out`)."""

    over: tuple[int, int] | None
    sweeps: dict = field(default_factory=dict)
    # the first stage's bound by its name (the model's units): a run without the ceiling's
    # cap proves one that holds within the cap too, often more than the capped relaxation
    # proves in its share (CP-SAT on a knapsack of every step)
    floors: dict = field(default_factory=dict)
    # the first stage's relaxation's choice by its name, in the first run: the aimed search's
    # last hint in the ceiling's run, whose relaxation mostly gets no CPU (`_aimed`)
    choices: dict = field(default_factory=dict)
    aimed: set = field(default_factory=set)  # the stages and aims `_aimed` searched at
    layouts: dict = field(default_factory=dict)  # `_laid_out`'s choices laid out


def _beyond(relaxed: RegionModel, best, chosen: np.ndarray | None,
            over: tuple[int, int] | None) -> bool:
    """Whether a tie-break can only end over the ceiling (``over``: its slow bytes and slow
    arena; None: no ceiling): ``best`` (offsets and regions) has more of either, and the
    relaxation's ``chosen`` regions more slow bytes, however they are laid out. The tie-break
    keeps one of the two, the ceiling's run then plans anew and the first run's plan goes;
    its bound on the cost counts for the cost objective only, which has no tie-break."""
    if over is None or best is None or chosen is None:
        return False
    problem = relaxed.problem
    return not _inside(problem, best, over) and _slow_bytes(problem, chosen) > over[0]


def _slow_bytes(problem: Problem, regions: np.ndarray) -> int:
    """The bytes a region choice puts in the slow regions."""
    return int(problem.sizes[slow_regions(problem)[regions]].sum())


def _inside(problem: Problem, best, over: tuple[int, int] | None) -> bool:
    """Whether ``best`` (offsets and regions) has at most ``over``'s slow bytes and slow
    arena (True without ``over``)."""
    if over is None:
        return True
    now = slow_measures(problem, Plan.from_offsets(problem, best[0], planner="stage 1",
                                                   regions=best[1]))
    return all(mine <= cap for mine, cap in zip(now, over, strict=True))


def _swept(relaxed: RegionModel, ceiling: int | None, sweeps: dict
           ) -> tuple[int, np.ndarray] | None:
    """`sweep_relaxation` of ``relaxed`` within ``ceiling``, its cap left out, or what an
    earlier sweep of the same problem and kept tops (``sweeps``) found: its optimum and
    choice, none when that optimum is above ``ceiling``. A new sweep would find the same
    (a ceiling prunes only states dearer than it), or give up past its states with a
    higher ceiling (CP-SAT would then solve it). The ceiling's run of stage 1 asks again
    for what the first swept."""
    key = tuple(sorted(relaxed.kept.items()))
    if key not in sweeps:
        found = sweep_relaxation(relaxed, ceiling, uncapped=True)
        if found is None:
            return None
        sweeps[key] = found
    found = sweeps[key]
    return found if ceiling is None or found[0] <= ceiling else None


def _close(value: float, bound: float, gap: float) -> bool:
    """Whether ``value`` is proven within ``gap`` (a share of it) of ``bound``."""
    return value - bound <= gap * value


def _searched(relaxed: RegionModel, quick: Plan, stage: str, bound: float, gap: float) -> Plan:
    """``quick`` (a region choice laid out by the heuristics' greedy passes alone, `lay_out`)
    when it meets every constraint of ``relaxed`` and, for the arena stage, is within ``gap``
    of ``bound`` (the cost depends on the choice alone); else the regions at fault (over
    their capacity; those whose top counts) laid out again with the order search, kept
    when better: the search costs more than the passes, and the passes mostly suffice."""
    problem, regions = relaxed.problem, quick.regions
    fits = relaxed.admits(quick)
    if fits and (stage == "cost" or _close(relaxed.value(quick.offsets, quick.regions, stage),
                                           bound, gap)):
        return quick
    names = [r.name for r in problem.regions]
    at_fault = {names.index(name) for name in quick.stats["over_capacity"]}
    if stage == "arena" or not fits:
        at_fault |= set(relaxed.costly)
    searched = lay_out(problem, regions, at_fault, offsets=quick.offsets, sizes=quick.sizes)
    if fits and (not relaxed.admits(searched) or relaxed.value(
            quick.offsets, quick.regions, stage) <= relaxed.value(
            searched.offsets, searched.regions, stage)):
        return quick
    return searched


def relaxed_bound(problem: Problem, *, reads=None, objective: str = "cost",
                  cpu: float = 1.0, seed: int = 0, threads: int = 2) -> float:
    """A lower bound on ``objective`` (`OBJECTIVES`; in the units of
    `memplan.deploy.regions.region_cost` and `arena_cost`) from the relaxation without
    the packing (`RegionModel`), solved for at most ``cpu`` CPU seconds per worker; 0
    when the problem has optional aliases (the model leaves out the sharing they allow)."""
    if any(a.optional for a in problem.aliases):
        return 0.0
    relaxed = RegionModel(problem, reads, packed=False)
    if objective == "arena" and not relaxed.costly:
        return 0.0
    cost_unit = min((r.cost for r in problem.regions if r.cost > 0), default=1.0)
    swept = sweep_relaxation(relaxed) if objective == "cost" else None
    if swept is not None:
        return swept[0] / (1000 * 1000) * cost_unit
    relaxed.cp.minimize(relaxed.arena if objective == "arena" else relaxed.cost)
    solver, status, _ = relaxed.solve(None, cpu, seed, threads)
    if status not in _SOLVED:
        return 0.0
    return solver.best_objective_bound / (1000 if objective == "arena" else 1000 * 1000) * \
        cost_unit


def _laid_out(relaxed: RegionModel, chosen: np.ndarray | None, best, stage: str,
              limits: tuple[float, float, float | None, float | None], search: bool,
              over: tuple[int, int] | None = None, layouts: dict | None = None):
    """The best of ``best`` (offsets and regions, or None) and the relaxation's choice laid
    out by the heuristics (`lay_out`, then `_searched`); then, while that is not within the
    gap of the bound (``limits``: the bound, the gap, the deadline and the stage's CPU
    seconds left, None: no allowance) and ``search``, the plans of the layout sweep
    (`memplan.deploy.regions_layout`) forwards, then backwards in time, their last region
    laid out here; each sweep's work `memplan.deploy.regions_layout.work_per_cpu` entries
    a CPU second left.

    With ``search``, and in the arena stage where the sweep can aim at the bound
    (`_arena_aim`: its slow loads within the gap of it), a narrow sweep forwards
    (`NARROW_STATES`, at least `NARROW_CPU` seconds' worth of entries) runs before the wide ones
    (`MAX_STATES` of `memplan.deploy.regions_layout`, in the CPU left): on the decoders'
    banks the narrow beam reached the bound in 0.1-0.5 CPU-s where the wide one had no
    CPU left to finish.

    ``over`` (the first stage-1 run's ceiling: its slow bytes and slow arena, `_Shared`):
    of two plans of one value, the one within it is kept, and a plan over it is not
    close enough to end the search: the narrow sweep, whose states keep within it, then
    mostly finds one at the same value, and the ceiling's run is not needed. ``layouts``:
    the choices laid out so far (`_Shared`), read and written: the ceiling's run breaks
    the arena's ties on the first run's choice, within the same cap."""
    bound, gap, deadline, cpu_left = limits
    layouts = {} if layouts is None else layouts
    problem, watch = relaxed.problem, Stopwatch()

    def rank(best) -> tuple[int, bool]:
        return relaxed.value(*best, stage), not _inside(problem, best, over)

    def kept(laid: Plan, best):
        if relaxed.admits(laid) and (best is None or rank((laid.offsets, laid.regions)) <
                                     rank(best)):
            return laid.offsets, laid.regions
        return best

    def close(best) -> bool:
        return best is not None and _close(relaxed.value(*best, stage), bound, gap) and \
            _inside(problem, best, over)

    def swept(reverse: bool, least: float, **options):
        work = MAX_LAYOUT_WORK if cpu_left is None else min(MAX_LAYOUT_WORK, int(max(
            least, cpu_left - watch.cpu_elapsed()) * work_per_cpu()))
        found = None if not work else sweep_layout(
            relaxed, None if stage == "arena" or best is None else relaxed.value(*best, stage),
            deadline=deadline, reverse=reverse, max_work=work, **options)
        return None if found is None else lay_out(problem, found[1], [len(problem.regions) - 1],
                                                   offsets=found[2])

    aim = _arena_aim(relaxed, bound, gap) if stage == "arena" else None
    # what `_searched` does with a choice depends on it, the stage, the kept tops and the cap
    key = None if chosen is None else (stage, chosen.tobytes(), tuple(sorted(
        relaxed.kept.items())), relaxed.capped, bound if stage == "arena" else None)
    quick = None if chosen is None else layouts[key][0] if key in layouts else \
        lay_out(problem, chosen, range(len(problem.regions)), search_evaluations=0)
    if quick is not None:
        layouts.setdefault(key, [quick, None])
        best = kept(quick, best)
    if quick is not None and not close(best):
        if layouts[key][1] is None:
            layouts[key][1] = _searched(relaxed, quick, stage, bound, gap)
        best = kept(layouts[key][1], best)
    if (search or aim is not None) and not close(best):
        before = relaxed.aim
        relaxed.aim = before if aim is None else aim if before is None else min(before, aim)
        try:
            laid = swept(False, NARROW_CPU, max_states=NARROW_STATES)
            best = best if laid is None else kept(laid, best)
        finally:
            relaxed.aim = before
    for reverse in (False, True) if search else ():
        if close(best):
            break
        laid = swept(reverse, 0)
        best = best if laid is None else kept(laid, best)
    return best


def _aimed(model: RegionModel, relaxed: RegionModel, hints: tuple, best,
           aims: tuple[float, int], limits: tuple[float | None, float, int, int]):
    """The arena stage's last search when the stage has too little CPU left for the full
    model: ``model`` (every region packed but the slow one, which keeps its loads alone)
    with the slow top at most ``aims[1]`` (`_arena_aim`: within the gap of the bound
    ``aims[0]``), hinted with a region choice, the fast bank laid out by the heuristics:
    ``hints[0]``, the relaxation's, else (None: it had no CPU, or more slow bytes than
    ``model``'s cap) the cheapest choice at the aim (`sweep_relaxation`, its cap left out:
    few slow bytes, so mostly within a ceiling's; where the sweep gives up or its choice
    is over the cap, the capped relaxation's in CP-SAT), else ``hints[1]`` (the first
    run's relaxation's, `_Shared`; or None); ``limits``: the deadline, the CPU seconds per
    worker of each CP-SAT run (`AIM_CPU`: what the stage has left is mostly less than the
    search needs), the seed and threads. Its plan, the slow bank laid out here, is kept
    when better (``best``: offsets and regions, or None): at the aim, then within the cap,
    then the smaller slow arena. A hint that, laid out, is already at the aim within the
    cap is the plan: the search is left out.

    Why: on the small decoders' banks the relaxation's bound is the optimum (a long CP-SAT
    run of the full model proves it) and its choice, laid out, overflows the fast bank by
    a few hundred bytes; the full model needs 0.7-3 CPU-s to reach the bound, this one,
    without the slow bank's packing and with the aim as a constraint, 0.02-0.1 on CLIP's,
    Mistral's, Phi-3's and (within BankedGreedy's slow bytes, hinted with the cheapest
    choice) Gemma-2's. Where the hint, laid out, already is a plan at the aim within the
    cap, the search is not needed (DeiT-tiny's 50 % bank: the export's planning took 0.15
    CPU-s without it, 0.35 with it); a relaxation's choice over the cap's slow bytes never
    is one, hence the capped relaxation. INFEASIBLE proves every plan's slow arena above
    the aim (the model is a relaxation of the full one), unless ``model`` has a cap
    ``relaxed`` has not (the first run's, a ceiling's: its plans within the ceiling, the
    run's bounds for every plan): the bound rises to it. Returns the best plan (offsets
    and regions), the bound and the CPU seconds per worker it took."""
    bound, aim = aims
    deadline, cpu, seed, threads = limits
    problem, slow, watch = relaxed.problem, len(relaxed.limit) - 1, Stopwatch()
    model.keep_tops({**relaxed.kept, slow: min(aim, relaxed.kept.get(slow, aim))})
    chosen, fallback = hints
    laying = spent = 0.0  # CPU seconds in Python; per worker in CP-SAT

    def over(choice) -> bool:  # more slow bytes than the cap allows
        return model.capped is not None and _slow_bytes(problem, choice) > model.capped[0]

    if chosen is None or over(chosen):  # the cheapest choice at the aim
        swept = sweep_relaxation(model, uncapped=True)
        if swept is not None and not over(swept[1]):
            chosen = swept[1]
        elif model.capped is not None:  # within the cap: its relaxation in CP-SAT
            cheapest = model.relaxation()
            cheapest.cp.minimize(cheapest.cost)
            laying = watch.cpu_elapsed()
            solver, status, spent = cheapest.solve(deadline, cpu, seed, threads)
            watch = Stopwatch()
            chosen = cheapest.read(solver)[1] if status in _SOLVED else fallback
        else:
            chosen = fallback
    if chosen is None:
        return best, bound, laying + watch.cpu_elapsed() + spent

    def rank(offsets, regions) -> tuple[bool, bool, int]:  # at the aim, within the cap
        value = relaxed.value(offsets, regions, "arena")
        return value > relaxed.weight[slow] * aim, \
            not _inside(problem, (offsets, regions), model.capped), value

    def kept(laid: Plan, best):
        if relaxed.admits(laid) and (best is None or rank(laid.offsets, laid.regions) <
                                     rank(*best)):
            return laid.offsets, laid.regions
        return best

    quick = lay_out(problem, chosen, range(slow + 1), search_evaluations=0)
    if model.admits(quick):  # at the aim (a kept top) within the cap: no search
        return kept(quick, best), bound, laying + watch.cpu_elapsed() + spent
    model.hint(quick.offsets, chosen)
    laying += watch.cpu_elapsed()
    solver, status, searched = model.solve(deadline, cpu, seed, threads)
    spent += searched
    if status == cp_model.INFEASIBLE and model.capped == relaxed.capped:
        return best, max(bound, float(relaxed.weight[slow] * (aim + 1))), laying + spent
    if status in _SOLVED:
        watch = Stopwatch()
        offsets, regions = model.read(solver)
        best = kept(lay_out(problem, regions, [slow], offsets=offsets), best)
        laying += watch.cpu_elapsed()
    return best, bound, laying + spent


def _arena_aim(relaxed: RegionModel, bound: float, gap: float) -> int | None:
    """The slow arena (bytes) within ``gap`` of the arena ``bound`` (the model's units), which
    the layout sweep keeps the slow loads within (`RegionModel.aim`); None unless there are
    two regions and only the last (the one the sweep leaves to its caller) costs."""
    if len(relaxed.limit) != 2 or relaxed.costly != [1]:
        return None
    return int(bound / (1 - gap) / relaxed.weight[1] + 1e-9)


def lay_out(problem: Problem, regions: np.ndarray, chosen, *, offsets: np.ndarray | None = None,
            sizes: np.ndarray | None = None, **options) -> Plan:
    """A region choice laid out: the buffers of each ``chosen`` region planned by the
    heuristic planners (`memplan.deploy.regions.plan_each`, ``options`` are ``best``'s),
    those of the other regions kept at their ``offsets`` and granted ``sizes``; its stats
    say each region's top and which are over capacity (no bounds: `_choose` compares it,
    never returns it as is)."""
    offsets = np.zeros(len(problem), np.int64) if offsets is None else offsets.copy()
    sizes = problem.sizes.copy() if sizes is None else sizes.copy()
    plan_each(problem, regions, chosen, offsets, sizes, **options)
    region_sizes, over = region_tops(problem, offsets, regions, sizes)  # no bounds: internal
    return Plan.from_offsets(problem, offsets, planner="regions_exact", regions=regions,
                             sizes=sizes, stats={"region_sizes": region_sizes,
                                                 "over_capacity": over})


def _infeasible(problem: Problem, heuristic: Plan, watch: Stopwatch, stats: dict,
                reads) -> Plan:
    """The heuristic's plan, marked as proven not to fit when it does not: CP-SAT found no
    region choice (its model leaves optional aliases out: a heuristic plan that fits by
    sharing bytes is kept)."""
    if not heuristic.stats.get("over_capacity"):
        return heuristic
    plan = region_plan(problem, heuristic.offsets, heuristic.regions, planner="regions_exact",
                       seconds=watch.elapsed(), sizes=heuristic.sizes,
                       reads=reads, stats=dict(stats, proven_infeasible=True))
    plan.status = "infeasible"
    return plan
