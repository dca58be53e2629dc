"""CP-SAT's parameters, in one place.

Every CP-SAT run of memplan gets its solver from `cp_solver` (threads, seed,
time limit, deterministic mode, log, Ctrl-C), and the exact planner's runs
from `exact_solver`, which adds the NoOverlap2D reasoning and subsolvers of
`ExactOptions`. How a time limit is split between the stages of the exact
and the deployment planners is in `memplan.shares`; what a run gets of it,
in `memplan.budget` (`Budget.cp_limits`).
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from memplan.shares import CLOCK_CUT_SHARE
from memplan.solver.exact_options import ExactOptions


def cp_solver(*, threads: int, seed: int, seconds: float | None, deterministic: bool = False,
              log: bool = False, ctrl_c: bool = True, wall_seconds: float | None = None,
              relative_gap: float = 0.0, probing: bool = True) -> cp_model.CpSolver:
    """A CP-SAT solver for one run of at most ``seconds`` (None: until proven).

    ``deterministic``: interleaved threads and ``seconds`` in CP-SAT's
    deterministic time, so that a run repeats itself; ``wall_seconds``
    (default ``seconds``) caps it on the wall clock as well, because CP-SAT's
    deterministic time can stall while the clock runs (a run cut by the clock
    does not repeat itself: `cut_by_clock` tells). ``ctrl_c=False`` when the
    caller runs the solver in a helper thread and handles Ctrl-C itself. ``relative_gap``:
    stop once the objective is proven within this share of its bound; ``probing=False``:
    no probing in presolve (it takes seconds on models of a few hundred optional boxes).
    """
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = threads
    params.random_seed = seed
    params.log_search_progress = log
    # CP-SAT's detection of "x >= y_i + c_i for at least one i" (from the enforced
    # inequalities of explicit conflicts) proves wrong optima and calls solvable models
    # infeasible once sizes pass about 2^32 (OR-Tools 9.15): never let it in.
    params.auto_detect_greater_than_at_least_one_of = False
    if not ctrl_c:
        params.catch_sigint_signal = False
    if relative_gap:
        params.relative_gap_limit = relative_gap
    if not probing:
        params.cp_model_probing_level = 0
    if deterministic:
        params.interleave_search = True
        if seconds is not None:
            params.max_deterministic_time = max(seconds, 0.0)
        wall = seconds if wall_seconds is None else wall_seconds
        if wall is not None:
            params.max_time_in_seconds = max(wall, 0.0)
    elif seconds is not None:
        params.max_time_in_seconds = max(seconds, 0.0)
    return solver


def limit_of(solver: cp_model.CpSolver) -> float:
    """A built solver's wall limit, seconds (``max_time_in_seconds``)."""
    return solver.parameters.max_time_in_seconds


def retime(solver: cp_model.CpSolver, seconds: float) -> None:
    """Set a built solver's wall limit to ``seconds``: a check run in steps (a short solve
    first, then one of the time left) reuses its solver."""
    solver.parameters.max_time_in_seconds = max(seconds, 0.0)


def exact_solver(options: ExactOptions, *, threads: int, seconds: float | None,
                 wall_seconds: float | None = None) -> cp_model.CpSolver:
    """`cp_solver` with the exact planner's options: seed, mode, log, NoOverlap2D reasoning
    (timetabling, energetic, try-edge, pairwise pairs) and named subsolvers."""
    solver = cp_solver(threads=threads, seed=options.seed, seconds=seconds,
                       deterministic=options.deterministic, log=options.log, ctrl_c=False,
                       wall_seconds=wall_seconds)
    params = solver.parameters
    params.use_timetabling_in_no_overlap_2d = options.timetabling
    params.use_energetic_reasoning_in_no_overlap_2d = options.energetic
    params.use_area_energetic_reasoning_in_no_overlap_2d = options.energetic
    params.use_try_edge_reasoning_in_no_overlap_2d = options.try_edge
    params.max_pairs_pairwise_reasoning_in_no_overlap_2d = options.pairwise_pairs
    for name in options.subsolvers:
        params.subsolvers.append(name)
    if options.relative_gap or options.absolute_gap:  # CP-SAT then says OPTIMAL: the search
        params.relative_gap_limit = options.relative_gap  # takes its bound, not that word
        params.absolute_gap_limit = options.absolute_gap
    return solver


def cut_by_clock(solver: cp_model.CpSolver) -> bool:
    """Whether a deterministic run ended at its wall-clock cap before its deterministic
    budget (so another run may not repeat it)."""
    params = solver.parameters
    return (params.interleave_search and params.max_time_in_seconds < float("inf")
            and solver.wall_time >= CLOCK_CUT_SHARE * params.max_time_in_seconds
            and solver.deterministic_time < params.max_deterministic_time)


def bound_of(value: float) -> int:
    """The integer an objective bound reported as a double proves, never more.

    CP-SAT reports bounds (``best_bound_callback``) in doubles, which can sit a
    few ulps above the integer they stand for at large magnitudes
    (6597069766656.001 for 6597069766656 = 6 x 2^40): rounding that up would
    claim one byte too many. A few ulps come off first; at most a few bytes of
    bound are lost, near 2^53 only.
    """
    return math.ceil(value - max(1e-6, 8 * math.ulp(value)))


def proven_bound(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int:
    """The bound a finished run proved on ``model``'s integer objective, exactly.

    The response's integer bound, mapped through the objective's offset and
    scaling when it has them (`bound_of` then); never the rounded double.
    """
    objective = model.proto.objective
    inner = solver.response_proto.inner_objective_lower_bound
    if objective.offset == 0 and objective.scaling_factor in (0, 1):
        return int(inner)
    return bound_of(solver.best_objective_bound)
