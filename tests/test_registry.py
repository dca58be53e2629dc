"""The registry's door: every planner gets a Budget, whatever its caller gives."""

from __future__ import annotations

import pytest

import memplan
from memplan import registry
from memplan.budget import Budget
from memplan.plan import Plan
from memplan.problem import Problem


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(registry, "_PLANNERS", dict(registry._PLANNERS))


def _problem() -> Problem:
    return Problem.from_arrays([64, 32], [0, 1], [2, 3])


def _stack(problem: Problem, planner: str) -> Plan:
    return Plan.from_offsets(problem, [0, 64], planner=planner)


def test_a_planner_gets_a_budget_of_the_edges_keywords(table):
    seen = []

    @registry.register("door_budget")
    def planner(problem, *, budget, seed=0, hint=None, **options):
        seen.append((budget, options))
        return _stack(problem, "door_budget")

    memplan.plan_with("door_budget", _problem(), time_limit=5.0, cpu=2.0)
    budget, options = seen[-1]
    assert (budget.limit, budget.cpu, options) == (5.0, 2.0, {})
    memplan.plan_with("door_budget", _problem())
    assert (seen[-1][0].limit, seen[-1][0].cpu) == (None, None)
    given = Budget.of_limit(3.0)
    memplan.plan_with("door_budget", _problem(), budget=given)
    assert seen[-1][0] is given
    with pytest.raises(TypeError, match="not both"):
        memplan.plan_with("door_budget", _problem(), budget=given, time_limit=1.0)


def test_a_planner_of_the_old_signature_gets_seconds_with_a_warning(table):
    seen = []
    with pytest.warns(DeprecationWarning, match="takes time_limit="):
        @registry.register("door_seconds")
        def planner(problem, *, time_limit=None, seed=0, hint=None, **options):
            seen.append((time_limit, options))
            return _stack(problem, "door_seconds")

    memplan.plan_with("door_seconds", _problem(), time_limit=5.0)
    assert seen[-1] == (5.0, {})
    memplan.plan_with("door_seconds", _problem(), budget=Budget.of_limit(60.0, cpu=2.0))
    assert seen[-1] == (2.0, {})  # its allowance, as wall seconds: it counts no CPU
