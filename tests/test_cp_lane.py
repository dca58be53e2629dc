"""CP-SAT's lane beside the canonical descent (`memplan.solver.cp_lane`).

The descent takes the lane's plans and bounds between its probes once it has
stalled; the lane stops when the descent ends; a minimisation the descent
stalls on ends no worse than the descent alone, and every plan is valid.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memplan import Plan, Problem, lower_bound, plan_with, validate
from memplan.solver import canonical
from memplan.solver.cp_lane import CpLane
from memplan.solver.outcome import Outcome

from .test_canonical import exhaustive_optimum, random_problem

pytestmark = pytest.mark.skipif(not canonical.available(),
                                reason="the compiled kernel is not built (no C compiler)")


def test_the_lane_passes_on_its_plans_and_bound_and_stops_when_closed():
    seen = {}

    def search(best, floor, stop, on_plan):
        seen["floor"] = floor
        on_plan(best + 1)
        stop.wait(10)
        return Outcome("feasible", best, floor + 2)

    lane = CpLane(search, lambda: 0)
    assert lane.news() == (None, 0)  # not joined yet
    lane.join(np.zeros(3, np.int64), 5)
    for _ in range(200):
        plan, _ = lane.news()
        if plan is not None:
            break
        threading.Event().wait(0.01)
    assert plan.tolist() == [1, 1, 1] and seen["floor"] == 5
    lane.close()
    plan, bound = lane.news()
    assert plan.tolist() == [0, 0, 0] and bound == 7


def test_the_lanes_error_is_raised_by_close():
    def search(best, floor, stop, on_plan):
        raise RuntimeError("broken")

    lane = CpLane(search, lambda: 0)
    lane.join(np.zeros(1, np.int64), 0)
    with pytest.raises(RuntimeError, match="broken"):
        lane.close()


class _Oracle:
    """A lane that knows the optimum: its layout and its bound, once joined."""

    def __init__(self, offsets, optimum):
        self.offsets, self.optimum, self.joined, self.closed = offsets, optimum, False, False

    def join(self, best, floor):
        self.joined = True

    def news(self):
        return (self.offsets, self.optimum) if self.joined else (None, 0)

    def close(self):
        self.closed = True


def test_a_stalled_descent_takes_the_lanes_plan_and_bound(monkeypatch):
    problem = random_problem(201, 6)
    optimum = exhaustive_optimum(problem)
    layout = canonical.fit(problem, optimum, threads=1).offsets
    monkeypatch.setattr(canonical, "PROBE_SECONDS", 0.0)  # every probe gives up: a stall
    oracle = _Oracle(layout, optimum)
    outcome = canonical.descend(problem, lower_bound(problem), None, seconds=30, threads=1,
                                helper=oracle)
    assert oracle.joined and oracle.closed and outcome.stats["cp_sat_joined"]
    assert outcome.status == "optimal" and outcome.bound == optimum
    plan = Plan.from_offsets(problem, outcome.offsets, planner="canonical")
    assert validate(problem, plan) == [] and plan.arena_size == optimum


def test_a_minimisation_with_cp_sat_beside_the_descent_is_valid_and_proven(monkeypatch):
    monkeypatch.setattr(canonical, "PROBE_SECONDS", 0.0)  # probes give up: CP-SAT joins
    joined = []
    for seed in range(4):
        problem = random_problem(400 + seed, 6, aligned=seed % 2 == 1)
        optimum = exhaustive_optimum(problem)
        plan = plan_with("exact", problem, time_limit=20)
        assert validate(problem, plan) == []
        assert plan.status == "optimal" and plan.arena_size == optimum == plan.best_bound
        joined.append(plan.stats["parts_stats"][0]["cp_sat_joined"])
    assert any(joined)


def test_deterministic_mode_has_no_lane():
    problem = Problem.from_arrays([3, 3, 2], [0, 1, 0], [2, 3, 3], alignments=[4, 4, 1])
    plan = plan_with("exact", problem, time_limit=10, deterministic=True)
    assert plan.status == "optimal" and not plan.stats["parts_stats"][0]["cp_sat_joined"]
