"""Scratch buffers: the post-pass heuristic and the exact lexicographic planner."""

from __future__ import annotations

import numpy as np
import pytest

from memplan.budget import Budget
from memplan.deploy.scratch import place_scratch, plan_scratch, post_pass_scratch
from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.problem import Alias, Buffer, Problem, Region
from memplan.registry import planners
from memplan.validate import check

needs_exact = pytest.mark.skipif("exact" not in planners(),
                                 reason="the exact planner is not registered")


def _scratch(id: str, step: int, size: int, max_size: int | None = None) -> Buffer:
    return Buffer(id, size, step, step + 1, kind="scratch", max_size=max_size)


#  address at step 1 (activations fixed by hand):
#   100 +---------+ arena top
#       |    C    |
#    50 +---------+
#       | gap 10  |  <- v1, v2 share it
#    40 +---------+
#       |    B    |
#    30 +---------+
#       | gap 20  |  <- f2 (12) then f1 (8): the smallest gaps that fit
#    10 +---------+
#       |    A    |
#     0 +---------+
ACTIVATIONS = [Buffer("A", 10, 0, 2), Buffer("B", 10, 0, 2), Buffer("C", 50, 0, 3)]
HAND = [0, 30, 50]


def _place(scratch: list[Buffer]) -> tuple[Problem, Plan]:
    problem = Problem(ACTIVATIONS + scratch)
    mask = post_pass_scratch(problem)
    offsets = np.zeros(len(problem), np.int64)
    offsets[:3] = HAND
    offsets, sizes = place_scratch(problem, offsets, mask)
    plan = Plan.from_offsets(problem, offsets, planner="post-pass", sizes=sizes)
    check(problem, plan)
    return problem, plan


def test_fixed_scratch_takes_the_smallest_gap_that_fits():
    problem, plan = _place([_scratch("f1", 1, 8), _scratch("f2", 1, 12)])
    assert plan.offset_of(problem, "f2") == 10  # largest first, only [10, 30) fits
    assert plan.offset_of(problem, "f1") == 22  # [22, 30) is smaller than [40, 50)
    assert plan.arena_size == 100


def test_variable_scratch_shares_the_largest_gap_in_equal_parts():
    problem, plan = _place([_scratch("f2", 1, 12), _scratch("f1", 1, 8),
                            _scratch("v1", 1, 4, 20), _scratch("v2", 1, 2, 20)])
    granted = dict(zip(problem.ids, plan.sizes.tolist(), strict=True))
    assert (granted["v1"], granted["v2"]) == (5, 5)  # the 10 bytes of [40, 50), halved
    assert {plan.offset_of(problem, "v1"), plan.offset_of(problem, "v2")} == {40, 45}
    assert plan.arena_size == 100


def test_shares_are_clamped_to_the_maximum():
    problem, plan = _place([_scratch("small", 2, 1, 5), _scratch("large", 2, 1, 100)])
    granted = dict(zip(problem.ids, plan.sizes.tolist(), strict=True))
    assert (granted["small"], granted["large"]) == (5, 45)  # [0, 50) is free at step 2


def test_the_arena_grows_only_when_nothing_fits():
    problem, plan = _place([_scratch("fits", 2, 50)])
    assert plan.offset_of(problem, "fits") == 0 and plan.arena_size == 100
    problem, plan = _place([_scratch("huge", 2, 60), _scratch("v", 2, 30, 40)])
    assert plan.offset_of(problem, "huge") == 100 and plan.arena_size == 160
    assert plan.offset_of(problem, "v") == 0 and plan.sizes[problem.index("v")] == 40
    problem, plan = _place([_scratch("huge", 2, 60), _scratch("v", 2, 60, 80)])
    assert plan.offset_of(problem, "v") == 160 and plan.sizes[problem.index("v")] == 60
    assert plan.arena_size == 220  # on top, at its minimum


def test_only_free_scratch_goes_to_the_post_pass():
    problem = Problem([Buffer("x", 8, 0, 2), _scratch("s", 0, 4), _scratch("t", 1, 4),
                       _scratch("u", 1, 4), Buffer("y", 4, 1, 2, offset=0, kind="scratch")],
                      aliases=[Alias("x", "t")], conflicts=[("u", "x")])
    assert post_pass_scratch(problem).tolist() == [False, True, False, False, False]


@pytest.mark.parametrize("planner", ["greedy_by_size", "best"])
def test_plan_scratch_end_to_end(planner):
    chain = [Buffer(f"t{i}", size, i, i + 2) for i, size in enumerate([64, 32, 96, 16, 48])]
    scratch = [_scratch("s1", 1, 16), _scratch("s2", 2, 8, 64), _scratch("s3", 3, 24, 24),
               _scratch("s4", 3, 4, 128), _scratch("s5", 4, 200)]
    problem = Problem(chain + scratch)
    plan = plan_scratch(problem, planner=planner)
    check(problem, plan)
    assert plan.planner == f"scratch+{planner}"
    assert plan.stats["scratch_variable"] == 2
    assert plan.stats["scratch_minimum"] <= plan.stats["scratch_granted"] \
        <= plan.stats["scratch_maximum"]
    assert plan.arena_size >= plan.stats["activation_arena"]


def test_regions_are_refused():
    problem = Problem([Buffer("x", 4, 0, 1)], regions=[Region("sram", 16)])
    with pytest.raises(ProblemError, match="one arena"):
        plan_scratch(problem)


def _granted(problem: Problem, plan: Plan) -> int:
    variable = problem.max_sizes > problem.sizes
    return int(plan.sizes[variable].sum())


SCRATCH_NET = Problem([Buffer(f"t{i}", size, i, i + 2)
                       for i, size in enumerate([64, 32, 96, 16, 48])]
                      + [_scratch("s1", 1, 16), _scratch("s2", 2, 8, 64), _scratch("s3", 3, 24),
                         _scratch("s4", 3, 4, 128), _scratch("s5", 0, 2, 500)])


@needs_exact
def test_stage_two_grants_more_at_the_same_peak():
    from memplan.deploy.scratch_exact import grow_scratch

    heuristic = plan_scratch(SCRATCH_NET, planner="best")
    offsets, sizes, stats = grow_scratch(SCRATCH_NET, heuristic.offsets, heuristic.sizes.copy(),
                                         heuristic.arena_size, budget=Budget.of_limit(5))
    plan = Plan.from_offsets(SCRATCH_NET, offsets, planner="stage 2", sizes=sizes)
    check(SCRATCH_NET, plan)
    assert plan.arena_size <= heuristic.arena_size
    assert _granted(SCRATCH_NET, plan) >= _granted(SCRATCH_NET, heuristic)
    assert stats["scratch_status"] == "optimal"
    assert _granted(SCRATCH_NET, plan) == stats["scratch_bound"]


@needs_exact
def test_a_hint_at_the_lower_bound_skips_stage_one_and_still_grows_scratch(monkeypatch):
    """A hint whose peak meets the lower bound is the stage-1 optimum: the exact planner
    is not run, the peak stays at the bound and stage 2 still grants the most scratch."""
    from memplan.bounds import lower_bound
    from memplan.deploy import scratch_exact

    full = scratch_exact.plan_scratch_exact(SCRATCH_NET, time_limit=5)
    start = Plan.from_offsets(SCRATCH_NET, full.offsets, planner="hint")
    assert start.arena_size == lower_bound(SCRATCH_NET)  # the net's optimum meets its bound
    monkeypatch.setattr(scratch_exact, "plan_with", lambda *a, **k: pytest.fail("stage 1 ran"))
    plan = scratch_exact.plan_scratch_exact(SCRATCH_NET, time_limit=5, hint=start)
    check(SCRATCH_NET, plan)
    assert plan.arena_size == full.arena_size
    assert plan.stats["peak_status"] == "optimal" and plan.stats["peak_cpu"] == 0.0
    assert _granted(SCRATCH_NET, plan) == _granted(SCRATCH_NET, full)


@needs_exact
@pytest.mark.parametrize("planner", ["greedy_by_size", "best"])
def test_exact_is_never_worse_than_the_heuristic(planner):
    from memplan.deploy.scratch_exact import plan_scratch_exact

    heuristic = plan_scratch(SCRATCH_NET, planner=planner)
    exact = plan_scratch_exact(SCRATCH_NET, time_limit=5)
    check(SCRATCH_NET, exact)
    assert exact.arena_size <= heuristic.arena_size
    if exact.arena_size == heuristic.arena_size:
        assert _granted(SCRATCH_NET, exact) >= _granted(SCRATCH_NET, heuristic)
    assert exact.best_bound <= exact.arena_size
