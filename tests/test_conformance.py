"""One conformance test for every registered planner (STYLE.md 7).

Each planner runs on the same shared problems; every plan it returns must pass
the independent validator and never claim less than the lower bound.
Heuristics that cannot fit a capacity say ``infeasible``; none is silently invalid.
"""

import pytest

from memplan import Alias, Buffer, Problem, lower_bound, plan_with, planners, validate
from memplan.frontends import minimalloc_csv
from tests.conftest import CHALLENGING

SLOW_OPTIONS = {"time_limit": 2.0}  # keeps searching planners short in CI


def shared_problems():
    """Small problems that exercise every feature of the vocabulary."""
    chain = Problem([Buffer(f"t{i}", 16 * (1 + i % 3), i, i + 2) for i in range(12)],
                    name="chain")
    aliased = Problem(
        [Buffer("in", 64, 0, 2, kind="input", offset=0, alignment=16),
         Buffer("relu", 64, 1, 3, alignment=16),
         Buffer("view", 64, 2, 5, alignment=16),
         Buffer("a", 32, 3, 6, alignment=16), Buffer("b", 32, 3, 6, alignment=16),
         Buffer("cat", 64, 5, 8, alignment=16, kind="output")],
        aliases=[Alias("in", "relu", 0, optional=True), Alias("relu", "view", 0),
                 Alias("cat", "a", 0), Alias("cat", "b", 32)],
        name="aliased")
    conflicts = Problem.from_conflicts(
        {"1": 5, "2": 10, "3": 8, "4": 20, "5": 2, "6": 6, "7": 15, "8": 3},
        [tuple(p) for p in "12 23 24 25 34 35 36 45 46 47 56 57 58 67 78".split()],
        name="conflict-graph")
    mixed = Problem([Buffer("p", 24, 0, 4, offset=40), Buffer("q", 24, 1, 3, alignment=8),
                     Buffer("r", 8, 2, 6, alignment=8), Buffer("s", 40, 4, 7)],
                    conflicts=[("q", "s")], name="pinned")
    problems = [chain, aliased, conflicts, mixed]
    example = CHALLENGING / "example.12.csv"
    if example.exists():
        problems.append(minimalloc_csv.read_problem(example))
    return problems


PROBLEMS = shared_problems()


@pytest.mark.parametrize("name", sorted(planners()))
@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_every_planner_returns_a_valid_plan(name, problem):
    plan = plan_with(name, problem, seed=0, **SLOW_OPTIONS)
    violations = validate(problem, plan)
    if plan.status == "infeasible":  # allowed only for a capacity it could not meet
        assert problem.capacity is not None and plan.arena_size > problem.capacity
        violations = [v for v in violations if v.kind != "capacity"]
    assert violations == [], f"{name} on {problem.name}: {violations[:3]}"
    assert plan.arena_size >= plan.lower_bound == lower_bound(problem)
    assert plan.best_bound <= plan.arena_size or plan.status == "infeasible"
    assert plan.status in ("optimal", "feasible", "infeasible")


def test_registry_knows_the_planners():
    assert planners(), "no planner is registered"
