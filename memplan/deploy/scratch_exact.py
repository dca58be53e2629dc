"""Exact variable scratch: the smallest peak first, then as much scratch as fits at that peak.

The order is lexicographic because the arena is paid for once and for all,
while larger scratch only makes some operators faster::

    minimise   peak                       (scratch at its minimum)
    then       maximise  sum(granted)     subject to  peak <= the peak found

Steps of `plan_scratch_exact`:

- warm start: the post-pass heuristic (`memplan.deploy.scratch.plan_scratch`);
- stage 1: the registered ``exact`` planner on the problem as it stands
  (every variable scratch at its minimum), hinted with the heuristic plan;
  left out when the hint's peak meets the lower bound (nothing to find: the
  region layouts of `memplan.deploy.regions_exact` mostly do);
- stage 2: the solver's own model (`memplan.solver.model.build_model`) with
  every top capped at the stage-1 peak, plus, per variable scratch buffer
  ``v``, a growth ``grow[v]`` in ``[0, max - min]`` and, for every buffer
  ``j`` live during v's lifetime, a Boolean ``above[v, j]``:
  ``above => offset[v] + min[v] + grow[v] <= offset[j]`` and
  ``not above => offset[j] + size[j] <= offset[v]`` (with ``j``'s own growth
  when it is variable too); maximise the sum of the growths, hinted with the
  best stage-1 plan (or the heuristic's, when it reached that peak);
- keep whichever of that plan and the heuristic's is better (peak, then
  granted bytes), so the result is never worse than the heuristic.

Size of stage 2: the model of the problem plus O(v * L) Booleans for v
variable scratch buffers and L buffers live at a step. Stage 2 works in bytes
(no scaling), so the granted sizes are exact; only a variable scratch buffer
alone in its alias group and without explicit conflicts grows (any other
keeps its minimum). The stages share a budget of CPU seconds per worker
(``cpu``, by default the time limit): stage 1 ends once it has taken
`STAGE_SHARE` of it (`memplan.solver.cpu_budget.CpuCap` sets the exact
planner's stop event), stage 2 takes the rest; on a busy machine both do the
work they do on a quiet one, unless the time limit, kept on the wall clock
from the call, ends them first.
"""

from __future__ import annotations

import threading

import numpy as np
from ortools.sat.python import cp_model

from memplan.budget import Budget
from memplan.deploy.scratch import plan_scratch, scratch_stats
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.registry import plan_with
from memplan.shares import MIN_STAGE_SECONDS, STAGE_SHARE
from memplan.solver.cp_params import cp_solver
from memplan.solver.cpu_budget import CpuCap
from memplan.solver.model import build_model

_STATUS = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible"}


def growable(problem: Problem) -> np.ndarray:
    """Variable scratch buffers that stage 2 may grow: alone in their alias group, no conflict."""
    mask = problem.max_sizes > problem.sizes
    for tied in (problem.alias_src, problem.alias_dst, problem.conflicts.ravel()):
        mask[tied] = False
    return mask


def grow_scratch(problem: Problem, offsets: np.ndarray, sizes: np.ndarray, peak: int, *,
                 budget: Budget, seed: int = 0, threads: int = 2
                 ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Stage 2: re-place the buffers under ``peak`` to grant the most variable scratch.

    ``offsets`` and ``sizes`` are a valid plan within ``peak`` (the hint); at most
    ``budget``'s wall seconds (its ``limit``) and CPU seconds per worker (its ``cpu``;
    None: no cap). Returns the new offsets, the granted sizes and the solver's statistics.
    """
    grows = np.flatnonzero(growable(problem))
    if len(grows) == 0:
        return offsets, sizes, {"scratch_status": "optimal", "scratch_cpu": 0.0}
    model = build_model(problem, lower_bound=0, upper_bound=peak, minimize=False)
    cp, geometry = model.cp, model.geometry
    offset = {}
    for unit, base in zip(geometry.units, model.base, strict=True):
        for idx, rel in zip(unit.members, unit.rel, strict=True):
            offset[idx] = base + rel
    minimum, maximum, ids = problem.sizes, problem.max_sizes, problem.ids
    grow = {int(v): cp.new_int_var(0, int(maximum[v] - minimum[v]), f"grow[{ids[v]}]")
            for v in grows}
    hints = [(grow[v], int(sizes[v] - minimum[v])) for v in grow]

    def top(i: int):
        return offset[i] + int(minimum[i]) + (grow[i] if i in grow else 0)

    done = set()
    for v in grow:
        cp.add(top(v) <= peak)
        live = np.flatnonzero((problem.starts < problem.ends[v])
                              & (problem.ends > problem.starts[v]))
        for j in live.tolist():
            pair = (min(v, j), max(v, j))
            if j == v or pair in done:
                continue
            done.add(pair)
            above = cp.new_bool_var(f"above[{ids[j]},{ids[v]}]")
            cp.add(top(v) <= offset[j]).only_enforce_if(above)
            cp.add(top(j) <= offset[v]).only_enforce_if(~above)
            hints.append((above, bool(offsets[v] + sizes[v] <= offsets[j])))
    cp.maximize(sum(grow.values()))
    model.hint(offsets)
    for variable, value in hints:
        cp.add_hint(variable, value)
    solver = cp_solver(threads=threads, seed=seed, seconds=None if budget.limit is None
                       else max(MIN_STAGE_SECONDS, budget.limit))
    with CpuCap(solver, threads, budget.cpu) as cap:
        status = solver.solve(cp)
    if status not in _STATUS:
        return offsets, sizes, {"scratch_status": "unknown", "scratch_cpu": cap.spent}
    granted = minimum.copy()
    for v, variable in grow.items():
        granted[v] += solver.value(variable)
    stats = {"scratch_status": _STATUS[status],
             "scratch_bound": int(minimum[grows].sum() + solver.best_objective_bound),
             "scratch_seconds": solver.wall_time, "scratch_cpu": cap.spent}
    return model.offsets(solver), granted, stats


def _key(sizes: np.ndarray, offsets: np.ndarray) -> tuple[int, int]:
    """Lexicographic rank of a plan: lower peak first, then more granted bytes."""
    return int((offsets + sizes).max()) if len(sizes) else 0, -int(sizes.sum())


def plan_scratch_exact(problem: Problem, *, time_limit: float | None = 10.0, seed: int = 0,
                       hint: Plan | None = None, threads: int = 2,
                       cpu: float | None = None, relative_gap: float = 0.0,
                       budget: Budget | None = None) -> Plan:
    """The lexicographic exact plan (see the module doc); ``hint`` replaces the heuristic's;
    ``cpu``: the CPU seconds per worker of both stages (default: ``time_limit``);
    ``relative_gap``: stage 1 stops once its peak is proven within this share;
    ``budget``: a caller's stage budget (its allowance: ``cpu``) instead of both."""
    clock = Budget.of_limit(time_limit, cpu=cpu) if budget is None else budget
    allowance = clock.seconds
    heuristic = hint if hint is not None else plan_scratch(problem)
    heuristic_sizes = problem.sizes if heuristic.sizes is None else heuristic.sizes
    start = Plan.from_offsets(problem, heuristic.offsets, planner="hint")
    peak_cpu = 0.0
    if start.status == "optimal":  # its peak meets the lower bound: stage 1 has nothing to find
        peak_plan = start
    else:
        stop = threading.Event()  # set by the cap: stage 1 hands over in CPU time
        with CpuCap(stop, threads,
                    None if allowance is None else allowance * STAGE_SHARE) as cap:
            peak_plan = plan_with("exact", problem, budget=clock.stage(), seed=seed,
                                  hint=start, minimize=True, threads=threads, stop=stop,
                                  relative_gap=relative_gap)
        peak_cpu = cap.spent
    if heuristic.arena_size <= peak_plan.arena_size:
        offsets, sizes, peak = heuristic.offsets, heuristic_sizes, heuristic.arena_size
    else:
        offsets, sizes, peak = peak_plan.offsets, problem.sizes, peak_plan.arena_size
    offsets, sizes, stats = grow_scratch(
        problem, offsets, sizes.copy(), peak, seed=seed, threads=threads,
        budget=clock.stage(None if allowance is None else
                           max(MIN_STAGE_SECONDS, allowance - peak_cpu)))
    if _key(heuristic_sizes, heuristic.offsets) < _key(sizes, offsets):
        offsets, sizes = heuristic.offsets, heuristic_sizes  # never worse than the heuristic
        stats["kept"] = "heuristic"
    stats.update(scratch_stats(problem, sizes), peak_status=peak_plan.status,
                 peak_cpu=peak_cpu)
    return Plan.from_offsets(problem, offsets, planner="scratch_exact",
                             seconds=clock.elapsed(),
                             best_bound=peak_plan.best_bound, sizes=sizes, stats=stats)
