"""The search of one part's model (`memplan.solver.cp_search`): unit orders, fit races,
round robin, minimisation, deterministic repeats and stopping.

Every plan the search returns goes through `memplan.validate`; infeasibility
is checked against the exhaustive optimum.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memplan import Buffer, Problem, lower_bound, validate
from memplan.solver.cp_search import search, unit_order
from memplan.solver.exact_options import ExactOptions
from memplan.solver.model import build_model
from tests.test_solver import exhaustive_optimum


def fragmenting() -> Problem:
    """Live load 8, optimum above it: a and b (3 bytes, 4-aligned) overlap at step 1."""
    return Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                    Buffer("c", 2, 0, 3)])


def staircase(n: int = 14) -> Problem:
    return Problem([Buffer(f"t{i}", 1 + (7 * i) % 11, i % 5, i % 5 + 1 + i % 3)
                    for i in range(n)])


def run(problem: Problem, *, minimize: bool, **options):
    model = build_model(problem, lower_bound=lower_bound(problem), upper_bound=None,
                        minimize=minimize)
    seen, bounds = [], []
    outcome = search(model, ExactOptions(**{"threads": 2, **options}), seconds=30.0,
                     on_solution=seen.append, on_bound=bounds.append)
    if outcome.offsets is not None:
        plan = dict(zip(problem.ids, outcome.offsets.tolist(), strict=True))
        assert validate(problem, plan) == []
    return outcome, seen, bounds


def test_unit_order_sorts_by_each_key_heaviest_first():
    problem = Problem([Buffer("long", 2, 0, 9), Buffer("big", 8, 0, 1), Buffer("mid", 4, 0, 3),
                       Buffer("late", 5, 4, 8)])
    model = build_model(problem, lower_bound=0, upper_bound=None, minimize=True)
    assert unit_order(model, "lifetime") == [0, 3, 2, 1]  # 9, 4, 3, 1 steps
    assert unit_order(model, "size") == [1, 3, 2, 0]  # 8, 5, 4, 2 bytes
    assert unit_order(model, "area") == [3, 0, 2, 1]  # 20, 18, 12, 8
    assert unit_order(model, "total") == [0, 2, 1, 3]  # 14 bytes live at step 0; then area


@pytest.mark.parametrize("threads,deterministic", [(2, False), (1, False), (2, True)])
def test_a_fit_race_finds_a_plan_at_a_feasible_capacity(threads, deterministic):
    problem = fragmenting()
    optimum = exhaustive_optimum(problem)
    outcome, seen, _ = run(problem.replace(capacity=optimum), minimize=False, threads=threads,
                           deterministic=deterministic)
    assert outcome.status == "feasible" and not outcome.interrupted
    assert int((outcome.offsets + problem.sizes).max()) <= optimum
    assert seen and outcome.stats["runs"] >= 1 and "settled_by" in outcome.stats


@pytest.mark.parametrize("threads,deterministic", [(2, False), (1, False), (2, True)])
def test_a_fit_race_proves_an_infeasible_capacity(threads, deterministic):
    problem = fragmenting()
    optimum = exhaustive_optimum(problem)
    outcome, seen, _ = run(problem.replace(capacity=optimum - 1), minimize=False,
                           threads=threads, deterministic=deterministic)
    assert outcome.status == "infeasible" and outcome.offsets is None and seen == []


@pytest.mark.parametrize("strategy", ["lowest_offset", "none"])
def test_minimise_proves_the_exhaustive_optimum(strategy):
    problem = fragmenting()
    outcome, seen, _ = run(problem, minimize=True, strategy=strategy)
    assert outcome.status == "optimal"
    assert outcome.bound == int((outcome.offsets + problem.sizes).max())
    assert outcome.bound == exhaustive_optimum(problem)
    assert seen and np.array_equal(seen[-1], outcome.offsets)


def test_deterministic_mode_repeats_its_plan():
    problem = staircase()
    first, _, _ = run(problem, minimize=True, deterministic=True)
    again, _, _ = run(problem, minimize=True, deterministic=True)
    assert first.status == again.status == "optimal"
    assert np.array_equal(first.offsets, again.offsets)


def test_stop_ends_the_search_with_what_it_has():
    stop = threading.Event()
    stop.set()
    outcome, _, _ = run(staircase(40), minimize=True, stop=stop)
    assert outcome.interrupted and outcome.status in ("unknown", "feasible", "optimal")
    assert outcome.bound >= lower_bound(staircase(40))
