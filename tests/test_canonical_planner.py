"""The planner ``canonical`` (the canonical descent without CP-SAT) and ``best``'s use of it:
valid plans never worse than their start, the live-load optimum on a packing built to meet
it, the fallback on problems the search does not take, and a repeatable deterministic mode.

Every plan goes through the independent validator; no assert on wall time.
"""

from __future__ import annotations

import numpy as np
import pytest

from memplan import Alias, Buffer, Problem, lower_bound, plan_with, validate
from memplan.bounds import time_overlap_count
from memplan.formats import minimalloc_csv
from memplan.solver import canonical
from tests.conftest import CHALLENGING

needs_kernel = pytest.mark.skipif(not canonical.available(),
                                  reason="the compiled canonical search is not built")


def packed(seed: int, columns: int = 6, rows: int = 5) -> Problem:
    """A perfect packing, shuffled: its optimum is its live load (the arena's full height)."""
    rng = np.random.default_rng(seed)
    buffers = []
    for column in range(columns):
        cuts = np.sort(rng.choice(np.arange(1, 64), rows - 1, replace=False))
        edges = [0, *cuts.tolist(), 64]
        start = column * 3 + int(rng.integers(0, 2))
        for row in range(rows):
            buffers.append(Buffer(f"c{column}r{row}", edges[row + 1] - edges[row], start,
                                  start + 2 + int(rng.integers(0, 3))))
    order = rng.permutation(len(buffers))
    return Problem([buffers[i] for i in order], name=f"packed-{seed}")


@needs_kernel
@pytest.mark.parametrize("seed", range(4))
def test_the_descent_is_valid_and_never_worse_than_its_hint(seed):
    problem = packed(seed)
    start = plan_with("best_fit", problem)
    plan = plan_with("canonical", problem, time_limit=2, hint=start)
    assert validate(problem, plan) == []
    assert lower_bound(problem) <= plan.arena_size <= start.arena_size
    assert plan.status == ("optimal" if plan.arena_size == lower_bound(problem) else "feasible")


@needs_kernel
def test_a_minimalloc_problem_reaches_its_live_load():
    problem = minimalloc_csv.read_problem(CHALLENGING / "C.1048576.csv", capacity=None)
    plan = plan_with("canonical", problem, time_limit=10)
    assert validate(problem, plan) == []
    assert plan.arena_size == lower_bound(problem) and plan.status == "optimal"


def test_problems_it_does_not_take_get_the_hint_or_best():
    problem = Problem([Buffer("a", 32, 0, 3), Buffer("b", 32, 1, 4), Buffer("c", 16, 2, 5)],
                      aliases=[Alias("a", "c", 8)])
    start = plan_with("naive", problem)
    plan = plan_with("canonical", problem, time_limit=1, hint=start)
    assert validate(problem, plan) == []
    assert plan.stats["fallback"] == "hint" and list(plan.offsets) == list(start.offsets)
    alone = plan_with("canonical", problem, time_limit=1)
    assert validate(problem, alone) == [] and alone.stats["fallback"] == "best"


@needs_kernel
def test_deterministic_mode_repeats_itself():
    problem = packed(7, columns=9, rows=6)
    plans = [plan_with("canonical", problem, time_limit=1, deterministic=True)
             for _ in range(2)]
    for plan in plans:
        assert validate(problem, plan) == []
    if not any(plan.stats["clock_cuts"] for plan in plans):
        assert list(plans[0].offsets) == list(plans[1].offsets)


@needs_kernel
def test_best_runs_the_descent_in_a_timed_search_only():
    problem = minimalloc_csv.read_problem(CHALLENGING / "C.1048576.csv", capacity=None)
    timed = plan_with("best", problem, time_limit=5)
    assert validate(problem, timed) == []
    assert "canonical" in timed.stats["arenas"]
    assert timed.arena_size == lower_bound(problem)
    budget = plan_with("best", problem, time_limit=5, search_evaluations=50)
    assert "canonical" not in budget.stats["arenas"]
    none = plan_with("best", problem, time_limit=5, descent=0)
    assert "canonical" not in none.stats["arenas"]


@needs_kernel
def test_ctrl_c_in_the_descent_ends_best_with_the_plans_so_far(monkeypatch):
    problem = minimalloc_csv.read_problem(CHALLENGING / "D.1048576.csv", capacity=None)
    waits = []
    wait = canonical.wait

    def interrupted_at_the_second_probe(race, seconds, stop):
        waits.append(seconds)
        if len(waits) == 2:
            race.settled.wait(0.2)
            return True  # as `wait` says when Ctrl-C came
        return wait(race, seconds, stop)

    monkeypatch.setattr(canonical, "wait", interrupted_at_the_second_probe)
    plan = plan_with("best", problem, time_limit=30)
    assert plan.stats["interrupted"] and validate(problem, plan) == []
    assert "canonical" in plan.stats["arenas"] and "anneal" not in plan.stats["arenas"]
    assert plan.seconds < 20


def test_max_pairs_sets_which_problems_it_takes():
    problem = packed(0)
    pairs = time_overlap_count(problem.starts, problem.ends)
    start = plan_with("best_fit", problem)
    refused = plan_with("canonical", problem, time_limit=1, hint=start, max_pairs=pairs - 1)
    assert refused.stats["fallback"] == "hint" and list(refused.offsets) == list(start.offsets)
    taken = plan_with("canonical", problem, time_limit=1, hint=start, max_pairs=pairs)
    assert "fallback" not in taken.stats and validate(problem, taken) == []
