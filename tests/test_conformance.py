"""One conformance test for every registered planner, run over the whole registry.

Each planner runs on the same shared problems; every plan it returns must pass
the independent validator and never claim less than the lower bound.
Heuristics that cannot fit a capacity say ``infeasible``; none is silently invalid.
A hint that is no valid layout of the problem (overlapping buffers, another
problem's plan) is set aside with a warning by every planner, never returned.
"""

import numpy as np
import pytest

import memplan
from memplan import (
    Alias,
    Buffer,
    HintWarning,
    Plan,
    Problem,
    ProblemError,
    lower_bound,
    plan_with,
    planners,
    validate,
)
from memplan.formats import minimalloc_csv
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


def check_plan(name: str, problem: Problem, plan: Plan) -> None:
    """The plan passes the validator (capacity aside for an honest ``infeasible``) and
    claims nothing below the lower bound."""
    violations = validate(problem, plan)
    if plan.status == "infeasible":  # allowed only for a capacity it could not meet
        assert problem.capacity is not None and plan.arena_size > problem.capacity
        violations = [v for v in violations if v.kind != "capacity"]
    assert violations == [], f"{name} on {problem.name}: {violations[:3]}"
    assert plan.arena_size >= plan.lower_bound == lower_bound(problem)
    assert plan.best_bound <= plan.arena_size or plan.status == "infeasible"
    assert plan.status in ("optimal", "feasible", "infeasible")


@pytest.mark.parametrize("name", sorted(planners()))
@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_every_planner_returns_a_valid_plan(name, problem):
    check_plan(name, problem, plan_with(name, problem, seed=0, **SLOW_OPTIONS))


def bad_hints(problem: Problem) -> dict[str, Plan]:
    """Hints no planner may trust: every buffer at offset 0 (overlapping), the plan of a
    one-buffer problem, and that of another problem with as many buffers, all at 0."""
    other = Problem([Buffer(f"z{i}", 8, i, i + 1) for i in range(len(problem))])
    return {"overlapping": Plan.from_offsets(problem, [0] * len(problem), planner="mine"),
            "one offset": plan_with("naive", Problem([Buffer("z", 8, 0, 1)])),
            "another problem": plan_with("greedy_by_size", other)}


HINTED = [p for p in PROBLEMS if p.name in ("chain", "conflict-graph", "pinned", "aliased")]


@pytest.mark.parametrize("name", sorted(planners()))
@pytest.mark.parametrize("problem", HINTED, ids=[p.name for p in HINTED])
def test_every_planner_sets_an_invalid_hint_aside(name, problem):
    for label, hint in bad_hints(problem).items():
        with pytest.warns(HintWarning, match=name):
            plan = plan_with(name, problem, seed=0, hint=hint, time_limit=0.5)
        check_plan(name, problem, plan)
        assert "hint_rejected" in plan.stats, label


def test_a_hint_that_is_no_plan_is_refused():
    problem = PROBLEMS[0]
    with pytest.raises(ProblemError, match="must be a Plan"):
        plan_with("canonical", problem, hint=[0] * len(problem))


def test_registry_knows_the_planners():
    assert planners(), "no planner is registered"


@pytest.mark.parametrize("name", sorted(planners()))
def test_every_planner_takes_a_numpy_seed(name):
    problem = PROBLEMS[0]
    check_plan(name, problem, plan_with(name, problem, seed=np.int64(3), time_limit=0.2))
    with pytest.raises(ProblemError, match="seed"):
        plan_with(name, problem, seed=1.5)


def test_solve_takes_a_numpy_seed():
    problem = PROBLEMS[0]
    plan = memplan.solve(problem, seed=np.int64(3), time_limit=1)
    check_plan("solve", problem, plan)
    with pytest.raises(ProblemError, match="seed"):
        memplan.solve(problem, seed="3")
