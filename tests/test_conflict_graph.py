"""Conflict-graph problems (buffers and explicit conflict pairs, no lifetimes).

Planned by the heuristics and the exact planner, bounded by conflict cliques,
and kept through a JSON round trip.
"""

from __future__ import annotations

import pytest

from benchmarks.generate import conflict_graph
from memplan.bounds import clique_bound, live_load_bound, lower_bound
from memplan.formats import memplan_json
from memplan.problem import Problem
from memplan.registry import plan_with, planners
from memplan.validate import check

HEURISTICS = ("greedy_by_size", "best_fit", "first_fit", "best")
needs_exact = pytest.mark.skipif("exact" not in planners(),
                                 reason="the exact planner is not registered")

# 5-cycle of unit buffers: every clique is an edge (bound 2), yet three colours are needed.
PENTAGON = Problem.from_conflicts({c: 1 for c in "abcde"},
                                  [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "a")])
# K4 {w, x, y, z} plus a pendant: the clique weighs 4 + 3 + 2 + 1 = 10.
K4 = Problem.from_conflicts({"w": 4, "x": 3, "y": 2, "z": 1, "tail": 9},
                            [("w", "x"), ("w", "y"), ("w", "z"), ("x", "y"), ("x", "z"),
                             ("y", "z"), ("tail", "z")])


def _lowest_offset_by_decreasing_size(problem: Problem) -> list[int]:
    """The issue's heuristic, written out plainly: O(n^2), a reference for the planners."""
    neighbours: dict[int, set[int]] = {i: set() for i in range(len(problem))}
    for a, b in problem.conflicts.tolist():
        neighbours[a].add(b)
        neighbours[b].add(a)
    sizes = problem.sizes.tolist()
    offsets: dict[int, int] = {}
    for i in sorted(range(len(problem)), key=lambda i: (-sizes[i], i)):
        taken = sorted((offsets[j], offsets[j] + sizes[j]) for j in neighbours[i] if j in offsets)
        offset = 0
        for lo, hi in taken:
            if offset + sizes[i] <= lo:
                break
            offset = max(offset, hi)
        offsets[i] = offset
    return [offsets[i] for i in range(len(problem))]


def test_lifetimes_alone_never_conflict():
    assert live_load_bound(PENTAGON) == 1
    assert clique_bound(PENTAGON) == 2 and lower_bound(PENTAGON) == 2
    assert clique_bound(K4) == 10 and lower_bound(K4) == 10


@pytest.mark.parametrize("planner", HEURISTICS)
@pytest.mark.parametrize("problem", [PENTAGON, K4], ids=["pentagon", "k4"])
def test_heuristics_plan_conflict_graphs(planner, problem):
    plan = plan_with(planner, problem)
    check(problem, plan)
    assert plan.arena_size >= clique_bound(problem)
    assert plan.lower_bound == lower_bound(problem)


def test_the_issue_heuristic_is_size_order_with_lowest_offset():
    """'Decreasing size, each at the lowest offset free of its conflicting buffers'."""
    for seed in range(5):
        problem = conflict_graph(25, 0.3, seed, unit=16)
        reference = _lowest_offset_by_decreasing_size(problem)
        plan = plan_with("greedy_by_size", problem, placement="first_fit")
        check(problem, plan)
        assert plan.offsets.tolist() == reference


@pytest.mark.parametrize("seed", range(3))
def test_random_conflict_graphs_against_the_clique_bound(seed):
    problem = conflict_graph(14, 0.4, seed, unit=16)
    bound = clique_bound(problem)
    for planner in HEURISTICS:
        plan = plan_with(planner, problem)
        check(problem, plan)
        assert plan.arena_size >= bound and plan.best_bound >= bound


@needs_exact
@pytest.mark.parametrize("problem", [PENTAGON, K4, conflict_graph(12, 0.4, 1, unit=16)],
                         ids=["pentagon", "k4", "random"])
def test_exact_is_never_worse_than_the_heuristics(problem):
    exact = plan_with("exact", problem, time_limit=10)
    check(problem, exact)
    assert exact.best_bound >= clique_bound(problem)
    for planner in HEURISTICS:
        assert exact.arena_size <= plan_with(planner, problem).arena_size


@needs_exact
def test_exact_proves_the_pentagon_needs_three():
    plan = plan_with("exact", PENTAGON, time_limit=10)
    check(PENTAGON, plan)
    assert plan.arena_size == 3 and plan.status == "optimal" and plan.best_bound == 3


def test_json_round_trip_keeps_the_conflicts(tmp_path):
    problem = conflict_graph(10, 0.5, 3, unit=8)
    plan = plan_with("greedy_by_size", problem)
    memplan_json.write_problem(tmp_path / "problem.json", problem)
    memplan_json.write_plan(tmp_path / "plan.json", problem, plan)
    back = memplan_json.read_problem(tmp_path / "problem.json")
    assert back.ids == problem.ids and back.conflicts.tolist() == problem.conflicts.tolist()
    assert clique_bound(back) == clique_bound(problem)
    back_plan = memplan_json.read_plan(tmp_path / "plan.json", back)
    check(back, back_plan)
    assert back_plan.offsets.tolist() == plan.offsets.tolist()
