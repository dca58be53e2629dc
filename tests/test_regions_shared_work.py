"""The exact region planner does once what its two stage-1 runs would do twice, and leaves
out the searches a stage has no CPU or no use for; its plans and bounds stay the same."""

from __future__ import annotations

import numpy as np
import pytest

import memplan.deploy.regions_exact as exact
from memplan.deploy.regions import plan_regions, region_cost, region_plan, slow_measures
from memplan.deploy.regions_exact import RegionModel, plan_regions_exact
from memplan.deploy.regions_sweep import sweep_relaxation
from memplan.plan import Plan
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


def _ties() -> tuple[Problem, np.ndarray, Plan]:
    """Two steps; at the second the read-heavy ``q`` or both ``r`` fit the fast region.
    The ceiling (``r1``, ``r2`` fast; ``x``, ``q`` slow) has 18 slow bytes and a slow
    arena of 10; the least traffic at that arena puts ``q`` fast, 20 bytes slow::

        step     0        1
        fast   x 10   q 8 | r1 6 + r2 4
        slow   y 10   the others
    """
    problem = Problem([Buffer("x", 10, 0, 1), Buffer("y", 10, 0, 1), Buffer("q", 8, 1, 2),
                       Buffer("r1", 6, 1, 2), Buffer("r2", 4, 1, 2)],
                      regions=[Region("fast", 10, 0.0), Region("slow", None, 1.0)])
    reads = np.array([1, 1, 5, 1, 1])
    chosen = np.array([0, 1, 1, 0, 0])
    laid = exact.lay_out(problem, chosen, range(2))
    return problem, reads, region_plan(problem, laid.offsets, chosen, planner="ceiling",
                                       seconds=0.0, reads=reads)


def _swept_tops(monkeypatch) -> list:
    """The kept tops of every `sweep_relaxation` the exact planner runs, from now on."""
    runs: list = []
    monkeypatch.setattr(exact, "sweep_relaxation", lambda model, *args, **kw:
                        runs.append(tuple(sorted(model.kept.items()))) or
                        sweep_relaxation(model, *args, **kw))
    return runs


def test_the_first_run_keeps_the_plan_within_the_ceiling_at_one_arena(monkeypatch):
    """`_ties`: both plans have the optimal arena, the cheaper over the ceiling; the first
    run keeps the one within it (its tie-break too), so no ceiling's run follows: one
    sweep, the plan within the ceiling, its arena proven optimal."""
    problem, reads, ceiling = _ties()
    runs = _swept_tops(monkeypatch)
    plan = plan_regions_exact(problem, time_limit=5, objective="arena", relative_gap=0.01,
                              ceiling=ceiling, reads=reads)
    check(problem, plan)
    assert "ceiling" not in plan.stats
    assert slow_measures(problem, plan) == slow_measures(problem, ceiling) == (18, 10)
    assert runs == [((1, 10),)]
    assert plan.stats["arena_optimal"]


def test_the_ceilings_run_sweeps_no_kept_tops_the_first_run_swept(monkeypatch):
    """The first run's plan is over the ceiling (`_inside` made to say every plan is within
    it, so that the first run keeps the cheaper): the ceiling's run asks again for the
    cost stage's relaxation at the same kept arena, and no second sweep runs; the plan is
    within the ceiling, its arena proven optimal."""
    problem, reads, ceiling = _ties()
    monkeypatch.setattr(exact, "_inside", lambda *args: True)
    runs = _swept_tops(monkeypatch)
    plan = plan_regions_exact(problem, time_limit=5, objective="arena", relative_gap=0.01,
                              ceiling=ceiling, reads=reads)
    check(problem, plan)
    assert "ceiling" in plan.stats  # the first run's plan was over it
    assert slow_measures(problem, plan) == slow_measures(problem, ceiling) == (18, 10)
    assert runs == [((1, 10),)]
    assert plan.stats["arena_optimal"]


def test_the_ceilings_run_lays_out_no_choice_the_first_run_laid_out(monkeypatch):
    """The first run's plan over the ceiling (its arena stage made to keep the cheaper
    plan, its tie-break not left out but made to keep no plan within the ceiling): both
    runs break the arena's ties on the same choice, within the same cap; the ceiling's run
    lays it out no second time, and plans as it would anew."""
    problem, reads, ceiling = _ties()
    laid_out, lay_out = exact._laid_out, exact.lay_out
    monkeypatch.setattr(exact, "_beyond", lambda *args: False)
    plans, layouts = [], []

    def first_run_keeps_none(*args, reuse, seen):
        found = laid_out(*args[:6], None, args[7] if reuse else None)
        if args[3] == "cost":
            seen.add("cost")
        elif "cost" in seen:  # an arena stage after a tie-break: the ceiling's run
            seen.add("ceiling")
        return None if args[3] == "cost" and "ceiling" not in seen else found

    for reuse in (True, False):
        monkeypatch.setattr(exact, "_laid_out", lambda *args, reuse=reuse, seen=set():
                            first_run_keeps_none(*args, reuse=reuse, seen=seen))
        monkeypatch.setattr(exact, "lay_out", lambda problem, regions, chosen, reuse=reuse,
                            **kw: layouts.append((reuse, regions.tobytes(), tuple(chosen)))
                            or lay_out(problem, regions, chosen, **kw))
        plans.append(plan_regions_exact(problem, time_limit=5, objective="arena",
                                        relative_gap=0.01, ceiling=ceiling, reads=reads,
                                        threads=1))
    reused, anew = plans
    assert "ceiling" in reused.stats
    mine = [entry for entry in layouts if entry[0]]
    assert len(mine) == len(set(mine)) < len(layouts) - len(mine)
    assert (reused.regions == anew.regions).all() and (reused.offsets == anew.offsets).all()
    assert slow_measures(problem, reused) == (18, 10)


def test_a_tie_break_is_beyond_the_ceiling_when_both_its_plans_are():
    """`_beyond`: the best plan so far over the ceiling, and the relaxation's choice with
    more slow bytes than it, in whatever layout; not when either may be within it."""
    problem, reads, ceiling = _ties()
    model = RegionModel(problem, reads, packed=False)
    over = slow_measures(problem, ceiling)
    q_fast = np.array([0, 1, 0, 1, 1])  # 20 slow bytes
    q_slow = np.array([0, 1, 1, 0, 0])  # 18
    best = (np.array([0, 0, 0, 0, 10]), q_fast)
    assert exact._beyond(model, best, q_fast, over)
    assert not exact._beyond(model, best, q_slow, over)
    assert not exact._beyond(model, (ceiling.offsets, ceiling.regions), q_fast, over)
    assert not exact._beyond(model, best, q_fast, None)


def test_leaving_out_a_tie_break_beyond_the_ceiling_changes_no_plan(monkeypatch):
    """The arena objective within a ceiling plans the same with and without the tie-breaks
    `_beyond` leaves out (one thread: a repeatable search): on `_ties`, where the first
    run's is left out (its arena stage made to keep the cheaper plan, over the ceiling),
    and within the heuristic's plan on the small problems."""
    cases = [_ties()] + [(problem, weights, plan_regions(problem, reads=weights))
                         for _, problem, weights in _small_region_problems()[::4]]
    laid_out = exact._laid_out
    monkeypatch.setattr(exact, "_laid_out", lambda *args: laid_out(*args[:6]))
    beyond, left = exact._beyond, []
    for problem, weights, ceiling in cases:
        if ceiling.stats["over_capacity"]:
            continue
        plans = []
        for leave_out in (True, False):
            monkeypatch.setattr(exact, "_beyond", lambda *args, leave_out=leave_out:
                                leave_out and (left.append(beyond(*args)) or left[-1]))
            plans.append(plan_regions_exact(problem, time_limit=5, reads=weights,
                                            objective="arena", relative_gap=0.01,
                                            ceiling=ceiling, threads=1))
        left_out, kept = plans
        assert (left_out.regions == kept.regions).all()
        assert (left_out.offsets == kept.offsets).all()
        for key in ("arena_cost", "cost", "arena_bound", "cost_bound"):
            assert left_out.stats[key] == kept.stats[key]
    assert any(left)  # `_ties`' first run


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
