"""CP-SAT's parameters and the planners' time shares, in one place.

Every CP-SAT run of memplan gets its solver from `cp_solver` (workers, seed,
time limit, deterministic mode, log, Ctrl-C), and the exact planner's runs
from `exact_solver`, which adds the NoOverlap2D reasoning and subsolvers of
`ExactOptions`. The constants below say how a time limit is split between
the stages of the exact and the deployment planners (the warm start's share
is in `memplan.solver.exact`: it runs before CP-SAT is imported).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from memplan.solver.exact_options import ExactOptions

# exact planner (memplan.solver.exact, memplan.solver.cp_search)
DESCENT_SHARE = 0.75  # minimise: of a part's time spent bisecting by fit races
DESCENT_STEP_SECONDS = 16.0  # minimise: most seconds one fit race of the bisection takes
DETERMINISTIC_SLICE = 0.5  # deterministic seconds of the first round-robin slice

# deployment planners (memplan.deploy.regions_exact, memplan.deploy.scratch_exact)
STAGE_SHARE = 0.5  # of the time limit given to stage 1 (regions, or the peak); stage 2 the rest
MIN_STAGE_SECONDS = 0.1  # the shortest time limit one of their CP-SAT runs gets


def cp_solver(*, workers: int, seed: int, seconds: float | None, deterministic: bool = False,
              log: bool = False, ctrl_c: bool = True) -> cp_model.CpSolver:
    """A CP-SAT solver for one run of at most ``seconds`` (None: until proven).

    ``deterministic``: interleaved workers and ``seconds`` in CP-SAT's
    deterministic time, so that a run repeats itself. ``ctrl_c=False`` when
    the caller runs the solver in a helper thread and handles Ctrl-C itself.
    """
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = workers
    params.random_seed = seed
    params.log_search_progress = log
    if not ctrl_c:
        params.catch_sigint_signal = False
    if deterministic:
        params.interleave_search = True
        if seconds is not None:
            params.max_deterministic_time = max(seconds, 0.0)
    elif seconds is not None:
        params.max_time_in_seconds = max(seconds, 0.0)
    return solver


def exact_solver(options: ExactOptions, *, workers: int,
                 seconds: float | None) -> cp_model.CpSolver:
    """`cp_solver` with the exact planner's options: seed, mode, log, NoOverlap2D reasoning
    (timetabling, energetic, try-edge, pairwise pairs) and named subsolvers."""
    solver = cp_solver(workers=workers, seed=options.seed, seconds=seconds,
                       deterministic=options.deterministic, log=options.log, ctrl_c=False)
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
