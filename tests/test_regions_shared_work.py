"""The exact region planner does once what its two stage-1 runs would do twice, and leaves
out the searches a stage has no CPU or no use for; its plans and bounds stay sound."""

from __future__ import annotations

import numpy as np
import pytest

import memplan.deploy.regions_exact as exact
from memplan.deploy.regions import region_cost, region_plan, slow_measures
from memplan.deploy.regions_exact import RegionModel, plan_regions_exact
from memplan.deploy.regions_sweep import sweep_relaxation
from memplan.problem import Buffer, Problem, Region
from memplan.validate import check
from tests.test_regions import CHAIN, _small_region_problems


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[::3],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_a_sweep_reused_within_another_ceiling_is_the_one_it_would_run(seed, problem,
                                                                      weights):
    """What `_swept` answers from an earlier sweep of the same kept tops is what a new
    sweep gives within any ceiling: the same optimum and choice, or none below the optimum;
    other kept tops sweep again."""
    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    model = RegionModel(problem, weights, packed=False)
    sweeps: dict = {}
    first = exact._swept(model, None, sweeps)
    if first is None:
        return
    optimum = first[0]
    for ceiling in (optimum + 5, optimum, optimum - 1, None):
        reused = exact._swept(model, ceiling, sweeps)
        fresh = sweep_relaxation(model, ceiling, uncapped=True)
        assert (reused is None) == (fresh is None)
        if fresh is not None:
            assert reused[0] == fresh[0]
            assert (reused[1] == fresh[1]).all()
    if model.top:
        model.keep_tops({k: int(problem.sizes.sum()) for k in model.top})
        assert exact._swept(model, None, sweeps)[0] == sweep_relaxation(model)[0]
        assert len(sweeps) == 2


def test_the_ceilings_run_sweeps_no_kept_tops_the_first_run_swept(monkeypatch):
    """The first run's tie-break puts the read-heavy ``q`` in the fast region and more bytes
    in the slow one than the ceiling has: the ceiling's run asks again for the cost
    stage's relaxation at the same kept arena, and no second sweep runs; the plan is
    within the ceiling, its arena proven optimal::

        step     0        1
        fast   x 10   q 8 | r1 6 + r2 4      the ceiling: r1, r2 fast; x, q slow
        slow   y 10   the others
    """
    problem = Problem([Buffer("x", 10, 0, 1), Buffer("y", 10, 0, 1), Buffer("q", 8, 1, 2),
                       Buffer("r1", 6, 1, 2), Buffer("r2", 4, 1, 2)],
                      regions=[Region("fast", 10, 0.0), Region("slow", None, 1.0)])
    reads = np.array([1, 1, 5, 1, 1])
    chosen = np.array([0, 1, 1, 0, 0])
    laid = exact.lay_out(problem, chosen, range(2))
    ceiling = region_plan(problem, laid.offsets, chosen, planner="ceiling", seconds=0.0,
                          weights=reads)
    runs: list = []
    monkeypatch.setattr(exact, "sweep_relaxation", lambda model, *args, **kw:
                        runs.append(tuple(sorted(model.kept.items()))) or
                        sweep_relaxation(model, *args, **kw))
    plan = plan_regions_exact(problem, time_limit=5, objective="arena", relative_gap=0.01,
                              ceiling=ceiling, weights=reads)
    check(problem, plan)
    assert "ceiling" in plan.stats  # the first run's plan was over it
    assert slow_measures(problem, plan) == slow_measures(problem, ceiling) == (18, 10)
    assert runs == [((1, 10),)]
    assert plan.stats["arena_optimal"]


@pytest.mark.parametrize("gap,searched", [(0.01, False), (0.0, True)])
def test_a_tie_break_lays_its_relaxation_out_with_the_greedy_passes_alone(monkeypatch, gap,
                                                                        searched):
    """With a gap, the cost stage after the arenas only breaks ties: its relaxation's choice
    is laid out without the order search; without a gap (the exact optimum) the order
    search may run there."""
    stages: list = []
    layout_of = exact._layout_of
    monkeypatch.setattr(exact, "_layout_of", lambda relaxed, regions, stage, *args:
                        stages.append((stage, args[-1])) or
                        layout_of(relaxed, regions, stage, *args))
    plan = plan_regions_exact(CHAIN, time_limit=5, objective="arena", relative_gap=gap)
    check(CHAIN, plan)
    assert plan.stats["arena_optimal"]
    assert ("cost", searched) in stages
    assert ("arena", True) in stages


def test_no_layout_sweep_runs_without_cpu_left(monkeypatch):
    """A CPU allowance of 0: the layout sweep would have no work to do (its guide alone
    costs a sweep of the relaxation), so none runs; the plan is the start's or better."""
    searched: list = []
    monkeypatch.setattr(exact, "sweep_layout", lambda *args, **kw: searched.append(1))
    everything_slow = np.ones(len(CHAIN), np.int64)
    start = exact.lay_out(CHAIN, everything_slow, range(len(CHAIN.regions)))
    plan = plan_regions_exact(CHAIN, time_limit=5, relative_gap=0.01, hint=start, cpu=0.0)
    check(CHAIN, plan)
    assert not searched
    assert plan.stats["cost"] <= region_cost(CHAIN, everything_slow)
