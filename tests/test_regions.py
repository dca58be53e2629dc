"""Memory regions: the fill-the-fast-region heuristic and the exact region choice."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from memplan.deploy.regions import (
    allowed_matrix,
    cost_bound,
    plan_regions,
    region_cost,
    slow_measures,
)
from memplan.deploy.regions_exact import lay_out, plan_regions_exact, relaxed_bound
from memplan.deploy.regions_layout import sweep_layout
from memplan.errors import ProblemError
from memplan.formats import memplan_json
from memplan.plan import Plan
from memplan.problem import Alias, Buffer, Problem, Region
from memplan.registry import planners
from memplan.validate import check

SRAM, DRAM = Region("sram", 128, 0.0), Region("dram", None, 1.0)


def _chain(sizes, **extra) -> list[Buffer]:
    return [Buffer(f"t{i}", size, i, i + 2, **extra) for i, size in enumerate(sizes)]


#  live load per step: 64 96 128 112 64 80 | SRAM holds 128: not everything at once
CHAIN = Problem(_chain([64, 32, 96, 16, 48, 80]) + [Buffer("weights", 8, 0, 7)],
                regions=[SRAM, DRAM], name="chain")


def _regions_of(problem, plan) -> dict[str, str]:
    return {id: problem.regions[r].name for id, r in zip(problem.ids, plan.regions.tolist(),
                                                         strict=True)}


@pytest.mark.parametrize("planner", ["greedy_by_size", "best"])
def test_heuristic_fills_the_fast_region_first(planner):
    plan = plan_regions(CHAIN, planner=planner)
    check(CHAIN, plan)
    sizes = plan.stats["region_sizes"]
    assert sizes["sram"] <= 128 and plan.arena_size == sizes["sram"] + sizes["dram"]
    assert plan.stats["cost"] == region_cost(CHAIN, plan.regions) > 0
    assert plan.stats["cost"] >= cost_bound(CHAIN) == 8  # step 2 holds 136 bytes
    assert plan.status != "infeasible" and not plan.stats["over_capacity"]
    in_sram = plan.regions == 0
    assert CHAIN.sizes[in_sram].sum() > CHAIN.sizes[~in_sram].sum()  # most bytes are fast


def test_cost_bound_counts_what_the_capacities_force_out():
    three = [Region("l1", 64, 0.0), Region("l2", 64, 1.0), Region("dram", None, 10.0)]
    problem = Problem(_chain([100, 100, 8]) + [Buffer("pinned", 4, 0, 1, regions=("dram",))],
                      regions=three)
    # step 1: 200 bytes; 64 fit l1, 64 more l2 (cost 1 each), 72 go to dram (10 each);
    # the dram-only buffer costs 40 whatever happens
    assert cost_bound(problem) == 40 + (200 - 64) * 1 + (200 - 128) * 9
    plan = plan_regions(problem, planner="greedy_by_size")
    check(problem, plan)
    assert plan.stats["cost"] >= cost_bound(problem)


def test_everything_fits_the_fast_region():
    problem = Problem(_chain([16, 16, 16]), regions=[SRAM, DRAM])
    plan = plan_regions(problem, planner="greedy_by_size")
    check(problem, plan)
    assert (plan.regions == 0).all() and plan.stats["cost"] == 0 and plan.stats["cost_optimal"]


def test_allowed_regions_and_alias_groups_are_respected():
    buffers = _chain([64, 64, 64]) + [Buffer("dma", 32, 0, 3, regions=("dram",)),
                                      Buffer("view", 64, 2, 4)]
    problem = Problem(buffers, aliases=[Alias("t2", "view")], regions=[SRAM, DRAM])
    plan = plan_regions(problem, planner="greedy_by_size")
    check(problem, plan)
    where = _regions_of(problem, plan)
    assert where["dma"] == "dram" and where["t2"] == where["view"]
    assert plan.offset_of(problem, "t2") == plan.offset_of(problem, "view")


def test_a_group_with_no_common_region_is_refused():
    problem = Problem([Buffer("a", 4, 0, 2, regions=("sram",)),
                       Buffer("b", 4, 1, 3, regions=("dram",))],
                      aliases=[Alias("a", "b")], regions=[SRAM, DRAM])
    with pytest.raises(ProblemError, match="no region that every buffer"):
        allowed_matrix(problem)
    with pytest.raises(ProblemError, match="no memory regions"):
        plan_regions(Problem(_chain([4])))


def test_overfull_fast_region_only_is_infeasible():
    problem = Problem(_chain([100, 100], regions=("sram",)), regions=[SRAM, DRAM])
    plan = plan_regions(problem, planner="greedy_by_size")
    assert plan.status == "infeasible" and plan.stats["over_capacity"] == ["sram"]


def test_variable_scratch_grows_inside_each_region():
    buffers = _chain([64, 32, 96]) + [Buffer("s", 8, 1, 2, kind="scratch", max_size=256)]
    problem = Problem(buffers, regions=[SRAM, DRAM])
    plan = plan_regions(problem, planner="greedy_by_size")
    check(problem, plan)
    granted = int(plan.sizes[problem.index("s")])
    assert 8 <= granted <= 256
    assert plan.stats["region_sizes"]["sram"] <= 128


def test_region_plans_round_trip_through_json(tmp_path):
    plan = plan_regions(CHAIN, planner="greedy_by_size")
    memplan_json.write_problem(tmp_path / "p.json", CHAIN)
    memplan_json.write_plan(tmp_path / "plan.json", CHAIN, plan)
    problem = memplan_json.read_problem(tmp_path / "p.json")
    back = memplan_json.read_plan(tmp_path / "plan.json", problem)
    assert problem.regions == CHAIN.regions
    assert np.array_equal(back.regions, plan.regions)
    check(problem, back)


needs_exact = pytest.mark.skipif("exact" not in planners(),
                                 reason="the exact planner is not registered")
# The heuristic keeps the short-lived scratch in SRAM and pays 32 bytes in DRAM (fragmentation);
# the optimum sends the weights and the scratch there: 16 bytes.
TRAP = Problem(_chain([64, 32, 96, 16, 48, 80]) + [
    Buffer("w", 8, 0, 7), Buffer("s", 8, 2, 3, kind="scratch", max_size=64)],
    regions=[SRAM, DRAM])


@needs_exact
@pytest.mark.parametrize("problem", [CHAIN, TRAP], ids=["chain", "trap"])
def test_exact_is_never_worse_than_the_heuristic(problem):
    from memplan.deploy.regions_exact import plan_regions_exact

    heuristic = plan_regions(problem, planner="greedy_by_size")
    exact = plan_regions_exact(problem, time_limit=5)
    check(problem, exact)
    assert exact.stats["cost"] <= heuristic.stats["cost"]
    assert exact.stats["region_sizes"]["sram"] <= 128


@needs_exact
def test_exact_finds_the_cheapest_region_choice():
    from memplan.deploy.regions_exact import plan_regions_exact

    exact = plan_regions_exact(TRAP, time_limit=5)
    check(TRAP, exact)
    assert exact.stats["cost"] == 16 and exact.stats["cost_optimal"]
    assert _regions_of(TRAP, exact)["w"] == "dram"


@needs_exact
def test_solve_gives_the_exact_region_planner_the_time_the_heuristic_left(monkeypatch):
    """``solve`` keeps its limit from its start: the region heuristic's seconds come out of
    the exact planner's."""
    import memplan
    from memplan.deploy import regions, regions_exact

    heuristic, exact, handed = regions.plan_regions, regions_exact.plan_regions_exact, {}
    monkeypatch.setattr(regions, "plan_regions", lambda problem, **kwargs: (  # 32 B slow
        time.sleep(1.0), heuristic(problem, planner="greedy_by_size"))[1])
    monkeypatch.setattr(regions_exact, "plan_regions_exact", lambda *args, **kwargs: (
        handed.update(kwargs), exact(*args, **kwargs))[1])
    plan = memplan.solve(TRAP, time_limit=2.5)
    check(TRAP, plan)
    assert handed["budget"].limit <= 1.5


#  fast holds 100: "long" (70 B, steps 0-2) or each of a, b, c (60 B, one step each)
#  slow bytes: long 70, a+b+c 180; slow arena: long 70, a b c (one after the other) 60
TRADE = Problem([Buffer("long", 70, 0, 3)] + [Buffer(n, 60, t, t + 1) for t, n in
                                              enumerate("abc")],
                regions=[Region("fast", 100, 0.0), Region("slow", None, 1.0)])


def _in_slow(problem, plan) -> set[str]:
    return {id for id, r in _regions_of(problem, plan).items() if r == "slow"}


@needs_exact
def test_the_arena_objective_and_weights_choose_what_goes_slow():
    from memplan.deploy.regions_exact import plan_regions_exact

    by_bytes = plan_regions_exact(TRADE, time_limit=5)
    check(TRADE, by_bytes)
    assert _in_slow(TRADE, by_bytes) == {"long"} and by_bytes.stats["cost_optimal"]
    assert by_bytes.stats["region_sizes"]["slow"] == 70
    by_arena = plan_regions_exact(TRADE, time_limit=5, objective="arena")
    check(TRADE, by_arena)
    assert _in_slow(TRADE, by_arena) == {"a", "b", "c"}
    assert by_arena.stats["region_sizes"]["slow"] == 60 and by_arena.stats["arena_optimal"]
    read_often = plan_regions_exact(TRADE, time_limit=5, reads=[10, 1, 1, 1])
    assert _in_slow(TRADE, read_often) == {"a", "b", "c"}
    assert read_often.stats["cost"] == 180 and read_often.stats["cost_optimal"]
    with pytest.raises(ProblemError, match="objective"):
        plan_regions_exact(TRADE, objective="peak")
    with pytest.raises(ProblemError, match="reads must be"):
        plan_regions(TRADE, reads=[1, 2])


@needs_exact
def test_a_ceiling_caps_the_slow_bytes_and_arena_and_keeps_the_bounds():
    from memplan.deploy.regions import region_plan, slow_measures
    from memplan.deploy.regions_exact import plan_regions_exact

    def ceiling(slow: str) -> object:
        regions = np.array([slow == "long", *[slow == "abc"] * 3], np.int64)
        return region_plan(TRADE, np.zeros(4, np.int64), regions, planner="start", seconds=0)

    abc, long = ceiling("abc"), ceiling("long")
    assert slow_measures(TRADE, abc) == (180, 60) and slow_measures(TRADE, long) == (70, 70)
    by_bytes = plan_regions_exact(TRADE, time_limit=5, ceiling=abc)  # long: arena 70 > 60
    check(TRADE, by_bytes)
    assert _in_slow(TRADE, by_bytes) == {"a", "b", "c"} and by_bytes.stats["cost"] == 180
    assert by_bytes.stats["cost_bound"] == 70 and not by_bytes.stats["cost_optimal"]
    by_arena = plan_regions_exact(TRADE, time_limit=5, objective="arena", ceiling=long)
    check(TRADE, by_arena)  # a, b, c: 180 bytes > 70
    assert _in_slow(TRADE, by_arena) == {"long"} and by_arena.stats["arena_cost"] == 70
    assert by_arena.stats["arena_bound"] == 60 and not by_arena.stats["arena_optimal"]
    over = region_plan(TRADE, np.zeros(4, np.int64), np.zeros(4, np.int64), planner="start",
                       seconds=0)
    with pytest.raises(ProblemError, match="ceiling"):
        plan_regions_exact(TRADE, ceiling=over)


def test_a_region_plan_over_the_ceiling_is_never_returned(monkeypatch):
    # were a region's own planner to return a higher top than stage 1's, the plan would
    # leave the ceiling: the start within it is returned instead
    from memplan.deploy import regions_exact
    from memplan.deploy.regions import region_plan, within

    ceiling = region_plan(TRADE, np.array([0, 70, 70, 70]), np.ones(4, np.int64),
                          planner="start", seconds=0)  # all slow: arena 130, cost 250
    planned = regions_exact.plan_scratch_exact

    def raised(part, **options):
        plan = planned(part, **options)
        raise_by = 100 if len(part) == 1 else 0  # the slow region's part: long alone
        return Plan.from_offsets(part, plan.offsets + raise_by, planner="raised", stats=plan.stats,
                                 sizes=plan.sizes)

    monkeypatch.setattr(regions_exact, "plan_scratch_exact", raised)
    plan = regions_exact.plan_regions_exact(TRADE, time_limit=5, hint=ceiling, ceiling=ceiling)
    check(TRADE, plan)  # stage 1: long slow (cost 70), its top raised to 170 > 130
    assert within(TRADE, plan, ceiling) and plan.stats["kept"] == "heuristic"


def test_the_arena_bound_fills_the_cheapest_room_first():
    from memplan.deploy.regions import arena_bound

    assert arena_bound(TRADE) == 30  # 130 bytes live at step 0, 100 of them fast
    pinned = TRADE.replace(buffers=[replace(TRADE.buffer(0), regions=("slow",)),
                                    *map(TRADE.buffer, range(1, 4))])
    assert arena_bound(pinned) == 70


def test_the_cost_bound_adds_disjoint_peaks_at_their_lightest_bytes():
    # fast holds 100: at step 0 a (read 3x) and b (1x) need 120, at step 2 c (2x) and d (5x);
    # 20 bytes of b and 20 of c must go slow at least: 20 + 40, lifetimes disjoint
    problem = Problem([Buffer("a", 60, 0, 2), Buffer("b", 60, 0, 2), Buffer("c", 60, 2, 4),
                       Buffer("d", 60, 2, 4)],
                      regions=[Region("fast", 100, 0.0), Region("slow", None, 1.0)])
    weights = [3, 1, 2, 5]
    assert cost_bound(problem, weights) == 20 * 1 + 20 * 2
    assert cost_bound(problem) == 40  # unweighted: 20 bytes at each peak
    # one byte lives through both peaks: 21 bytes at each, the peaks no longer add up
    tied = problem.replace(buffers=[*map(problem.buffer, range(4)), Buffer("e", 1, 0, 4)])
    assert cost_bound(tied, [*weights, 100]) == 21 * 2
    plan = plan_regions(problem, reads=weights)
    check(problem, plan)
    assert plan.stats["cost"] == 180 and plan.stats["cost_bound"] == 60


def test_the_cost_bound_sweeps_the_steps_where_buffers_start_or_end():
    # the same lifetimes spread over a horizon of ten million steps: the same bound (the
    # steps between two events change nothing), swept at the events alone
    problem = Problem([Buffer("a", 60, 0, 2), Buffer("b", 60, 0, 2), Buffer("c", 60, 2, 4),
                       Buffer("d", 60, 2, 4), Buffer("e", 1, 1, 3)],
                      regions=[Region("fast", 100, 0.0), Region("slow", None, 1.0)])
    weights = [3, 1, 2, 5, 4]
    stretch = 2_500_000
    spread = problem.replace(buffers=[replace(b, start=b.start * stretch, end=b.end * stretch)
                                      for b in map(problem.buffer, range(len(problem)))])
    assert spread.horizon == 10_000_000
    # step 0: 20 bytes of b; step 2 (e live too): 21 of c; e starts after step 0: disjoint
    assert cost_bound(spread, weights) == cost_bound(problem, weights) == 20 * 1 + 21 * 2


def _with_regions(seed: int, base: Problem) -> tuple[Problem, np.ndarray]:
    """``base`` (up to 7 buffers, aliases, conflicts, alignments) over 2 or 3 regions, some
    buffers held to the dearer ones (the slow one always allowed: every problem fits),
    and a weight (reads) per buffer."""
    rng = np.random.default_rng(seed)
    regions = [Region("fast", int(rng.integers(2, 10)), 0.0)]
    if rng.random() < 0.5:
        regions.append(Region("mid", int(rng.integers(2, 8)), float(rng.integers(1, 3))))
    regions.append(Region("slow", None, float(rng.integers(3, 6))))
    held = [("slow",), (regions[-2].name, "slow")]
    buffers = [replace(base.buffer(i), regions=None if rng.random() < 0.8 else
                       held[int(rng.integers(0, 2))]) for i in range(len(base))]
    return base.replace(buffers=buffers, regions=regions), rng.choice([0.5, 1, 2, 3, 7],
                                                                       len(base))


def _exhaustive_cost(problem: Problem, weights, measure: str = "cost",
                     within: tuple[int, int] | None = None) -> float:
    """The least cost (``measure="arena"``: arena cost) of any region choice whose every
    capacitated region packs within its capacity (each region's least arena by trying
    every offset; tiny problems only); ``within``: at most these slow bytes and slow arena
    (`memplan.deploy.regions.slow_measures`)."""
    import itertools

    from memplan.deploy.scratch import subproblem
    from tests.test_solver import exhaustive_optimum

    allowed = allowed_matrix(problem)
    unit = np.arange(len(problem))
    for a in problem.aliases:
        if not a.optional:
            unit[unit == unit[problem.index(a.dst)]] = unit[problem.index(a.src)]
    packs: dict = {}
    best = np.inf
    for choice in itertools.product(range(len(problem.regions)), repeat=len(problem)):
        regions = np.array(choice)
        if not allowed[np.arange(len(problem)), regions].all() or \
                (regions != regions[unit]).any():
            continue
        fits, arena, slow_arena = True, 0.0, 0
        for k, region in enumerate(problem.regions):
            members = regions == k
            if not members.any():
                continue
            key = (k, members.tobytes())
            if key not in packs:
                packs[key] = exhaustive_optimum(subproblem(problem, members, one_arena=True))
            fits &= region.capacity is None or packs[key] <= region.capacity
            arena += region.cost * packs[key]
            slow_arena += packs[key] if region.cost > 0 else 0
        slow_bytes = int(problem.sizes[[problem.regions[k].cost > 0 for k in regions]].sum())
        if within is not None and (slow_bytes > within[0] or slow_arena > within[1]):
            continue
        if fits:
            best = min(best, region_cost(problem, regions, weights) if measure == "cost"
                       else arena)
    return best


def _small_region_problems():
    from tests.test_solver import small_problems

    return [(seed, *_with_regions(seed, base)) for seed, base in small_problems(60)
            if len(base) <= 5]


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems(),
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_cost_bound_never_passes_the_exhaustive_optimum(seed, problem, weights):
    optimum = _exhaustive_cost(problem, weights)
    assert cost_bound(problem, weights) <= optimum + 1e-9
    assert cost_bound(problem) <= _exhaustive_cost(problem, None) + 1e-9


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[::2],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_exact_planners_proven_bounds_never_pass_the_exhaustive_optimum(seed, problem,
                                                                            weights):
    """The bounds the exact planner proves (its relaxation's, CP-SAT's; also with a CPU
    allowance too small for the full model) on each objective: never above the least any
    choice reaches; at a proven optimum, exactly it."""
    from memplan.shares import FULL_MODEL_LEAST

    for objective, measure, field in (("cost", "cost", "cost_bound"),
                                      ("arena", "arena", "arena_bound")):
        plan = plan_regions_exact(problem, time_limit=5, reads=weights, objective=objective)
        optimum = _exhaustive_cost(problem, weights, measure)
        assert plan.stats[field] <= optimum + 1e-6
        short = plan_regions_exact(problem, time_limit=5, reads=weights, objective=objective,
                                   cpu=FULL_MODEL_LEAST, relative_gap=0.01)
        assert short.stats[field] <= optimum + 1e-6
        value = plan.stats["cost" if measure == "cost" else "arena_cost"]
        assert value >= optimum - 1e-6
        if plan.stats[f"{measure}_optimal"]:
            assert value == pytest.approx(optimum)
        bound = relaxed_bound(problem, reads=weights if measure == "cost" else None,
                              objective=objective)
        assert bound <= optimum + 1e-6
    ceiling = plan_regions(problem, reads=weights)  # within it, the bounds hold too
    if ceiling.stats["over_capacity"]:
        return
    for objective, measure, field in (("cost", "cost", "cost_bound"),
                                      ("arena", "arena", "arena_bound")):
        optimum = _exhaustive_cost(problem, weights, measure,
                                   within=slow_measures(problem, ceiling))
        for cpu in (None, FULL_MODEL_LEAST):
            plan = plan_regions_exact(problem, time_limit=5, reads=weights, ceiling=ceiling,
                                      objective=objective, cpu=cpu,
                                      relative_gap=0.0 if cpu is None else 0.01)
            assert plan.stats["cost" if measure == "cost" else "arena_cost"] >= optimum - 1e-6
            assert plan.stats.get("ceiling", {}).get(field, 0.0) <= optimum + 1e-6


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[1::4],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_with_no_cpu_the_plan_is_the_hints_or_better_and_its_bounds_still_hold(seed, problem,
                                                                              weights):
    """A CPU allowance of 0 with a gap: no full model runs once a plan fits (the start),
    the relaxations' choices laid out may still improve on it, and every bound it reports
    stays at most the exhaustive optimum."""
    for objective, measure, field in (("cost", "cost", "cost_bound"),
                                      ("arena", "arena", "arena_bound")):
        start = plan_regions(problem, reads=weights)
        plan = plan_regions_exact(problem, time_limit=5, reads=weights, objective=objective,
                                  cpu=0.0, relative_gap=0.01, hint=start)
        check(problem, plan)
        optimum = _exhaustive_cost(problem, weights, measure)
        assert plan.stats[field] <= optimum + 1e-6
        assert plan.stats["cost" if measure == "cost" else "arena_cost"] >= optimum - 1e-6
        if not start.stats["over_capacity"]:
            assert not plan.stats["over_capacity"]
            assert {plan.stats[f"{stage}_status"] for stage in ("cost", "arena")
                    if f"{stage}_status" in plan.stats} <= {"budget", "relaxation"}


def _relaxation_by_cp_sat(model) -> int | None:
    """The relaxation's optimum by CP-SAT (None: proven infeasible)."""
    from ortools.sat.python import cp_model

    model.cp.minimize(model.cost)
    solver, status, _ = model.solve(None, 10.0, 0, 2)
    if status == cp_model.INFEASIBLE:
        return None
    assert status == cp_model.OPTIMAL
    return round(solver.objective_value)


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[:6],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_region_model_built_on_first_use_is_the_same_model(seed, problem, weights):
    """Caps and kept tops given before the CP-SAT model is built are replayed in their
    order: the model is the one built at once and given them after."""
    from memplan.deploy.regions_exact import RegionModel

    for options in ({"packed": False}, {"packed": True}, {"pack_last": False}):
        later, built = RegionModel(problem, weights, **options), \
            RegionModel(problem, weights, **options)
        assert built.cp is not None  # built now
        assert "cp" not in later.__dict__
        for model in (later, built):
            model.cap(int(problem.sizes.sum()), int(problem.sizes.max()) * 2)
            model.keep_tops({k: int(problem.sizes.max()) for k in model.costly})
        assert "cp" not in later.__dict__
        assert str(later.cp.proto) == str(built.cp.proto)
        assert list(later.top) == later.costly


@pytest.mark.parametrize("built_first", [False, True])
def test_kept_tops_replace_the_ones_kept_before(built_first):
    """A later `keep_tops` replaces the earlier top, a looser one too, whether the CP-SAT
    model was built before the calls or after: at 7 bytes the slow bank cannot take the
    8 that step 2 puts over the fast one, at 8 it can."""
    from ortools.sat.python import cp_model

    from memplan.deploy.regions_exact import RegionModel

    model = RegionModel(CHAIN, packed=False)
    if built_first:
        assert model.cp is not None
    model.keep_tops({1: 7})
    assert model.solve(None, 5.0, 0, 1)[1] == cp_model.INFEASIBLE
    model.keep_tops({1: 8})
    model.cp.minimize(model.arena)
    solver, status, _ = model.solve(None, 5.0, 0, 1)
    assert status == cp_model.OPTIMAL and solver.value(model.top[1]) == 8
    assert model.kept == {1: 8}


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems(),
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_sweep_solves_the_relaxation_exactly(seed, problem, weights):
    """The sweep's optimum is CP-SAT's on the same relaxation (with the tops a first stage
    kept, too; none when CP-SAT proves none), backwards in time too; its choice meets every
    constraint and costs that much; it never passes the exhaustive optimum."""
    from memplan.deploy.regions_exact import RegionModel
    from memplan.deploy.regions_sweep import sweep_relaxation

    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    for kept in (False, True):
        model = RegionModel(problem, weights, packed=False)
        if kept and model.top:
            model.keep_tops({k: int(problem.sizes.max()) for k in model.top})
        swept = sweep_relaxation(model)
        optimum = _relaxation_by_cp_sat(model)
        assert (swept is None) == (optimum is None)  # kept tops too low: none fits
        if swept is None:
            continue
        value, regions = swept
        assert value == optimum
        assert sweep_relaxation(model, reverse=True)[0] == value  # the same steps, backwards
        assert sweep_relaxation(model, ceiling=value)[0] == value  # a plan's cost prunes
        assert sweep_relaxation(model, ceiling=value - 1) is None  # nothing below the optimum
        allowed = allowed_matrix(problem)
        assert allowed[np.arange(len(problem)), regions].all()
        assert model.value(np.zeros(len(problem), np.int64), regions, "cost") == value
        load = np.zeros((len(model.limit), problem.horizon + 1), np.int64)
        for box in model.geometry.boxes:  # the units' shapes: an alias's bytes count once
            region = regions[model.geometry.units[box.unit].members[0]]
            load[region, box.start:box.end] += box.high - box.low
        for k, limit in enumerate(model.limit):
            assert load[k].max() <= min(limit, model.kept.get(k, limit))
    assert relaxed_bound(problem, reads=weights) <= _exhaustive_cost(problem, weights) + 1e-6


def test_the_sweep_gives_up_past_its_states():
    from memplan.deploy.regions_exact import RegionModel
    from memplan.deploy.regions_sweep import sweep_relaxation

    problem = Problem(_chain([4, 4, 4]) + [Buffer("d", 4, 0, 3)], regions=[SRAM, DRAM])
    model = RegionModel(problem, packed=False)
    assert sweep_relaxation(model, max_states=3) is None
    assert sweep_relaxation(model, max_work=3) is None
    assert sweep_relaxation(model)[0] == 0


def test_with_a_gap_the_cost_after_the_arenas_stops_at_its_relaxation(monkeypatch):
    """The cost stage of the arena objective only breaks ties: with a gap it never runs the
    full model, even when its relaxation proves little (here a bound of 0), and the arena
    stays proven; without a gap (the exact optimum) it does run."""
    import memplan.deploy.regions_exact as exact

    swept = exact.sweep_relaxation
    monkeypatch.setattr(exact, "sweep_relaxation",
                        lambda model, ceiling=None, **_: (0, swept(model)[1]))
    plan = plan_regions_exact(CHAIN, time_limit=5, objective="arena", relative_gap=0.01)
    assert plan.stats["cost_status"] == "relaxation"
    assert plan.stats["arena_optimal"]
    check(CHAIN, plan)
    exact_plan = plan_regions_exact(CHAIN, time_limit=5, objective="arena")
    assert exact_plan.stats["cost_status"] != "relaxation"


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems(),
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_layout_sweep_plans_fit_and_never_pass_below_the_optimum(seed, problem, weights):
    """The layout sweep's region choice, its offsets kept and the last region laid out, is a
    valid plan whose cost is the one the sweep gives, never below the exhaustive optimum;
    a ceiling below its cost leaves it nothing."""
    from memplan.deploy.regions_exact import RegionModel

    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    model = RegionModel(problem, weights, packed=False)
    found = sweep_layout(model)
    if found is None:
        assert model.geometry.separations  # left to CP-SAT
        return
    cost, regions, offsets = found
    plan = lay_out(problem, regions, [len(problem.regions) - 1], offsets=offsets)
    assert not plan.stats["over_capacity"]
    check(problem, plan)
    assert model.value(plan.offsets, plan.regions, "cost") == cost
    assert region_cost(problem, regions, weights) >= _exhaustive_cost(problem, weights) - 1e-6
    assert sweep_layout(model, ceiling=cost - 1) is None
    ceiling = plan_regions(problem, reads=weights)
    if len(problem.regions) > 2 or ceiling.stats["over_capacity"]:
        return
    within = slow_measures(problem, ceiling)
    model.cap(within[0] // 2, within[1])  # half the slow bytes: states past them go
    found = sweep_layout(model)
    if found is not None:
        plan = lay_out(problem, found[1], [1], offsets=found[2])
        check(problem, plan)
        assert slow_measures(problem, plan)[0] <= within[0] // 2


def test_the_layout_sweep_closes_the_gap_a_poor_layout_of_the_relaxation_leaves(monkeypatch):
    """When the start and the relaxation's choice, laid out, are far from its bound, the
    layout sweep's plan reaches the bound: the cost is proven optimal without the full
    model."""
    import memplan.deploy.regions_exact as exact

    swept, searched = exact.sweep_relaxation, []
    everything_slow = np.ones(len(CHAIN), np.int64)
    monkeypatch.setattr(exact, "sweep_relaxation",
                        lambda model, ceiling=None, **_: (swept(model)[0], everything_slow))
    monkeypatch.setattr(exact, "sweep_layout",
                        lambda *args, **kw: searched.append(1) or sweep_layout(*args, **kw))
    start = exact.lay_out(CHAIN, everything_slow, range(len(CHAIN.regions)))
    plan = plan_regions_exact(CHAIN, time_limit=5, relative_gap=0.01, hint=start)
    assert searched
    assert plan.stats["cost_status"] == "relaxation"
    assert plan.stats["cost_optimal"]
    assert plan.stats["cost"] < region_cost(CHAIN, everything_slow)
    check(CHAIN, plan)


def test_the_arena_stage_aims_the_layout_sweep_at_its_bound(monkeypatch):
    """When the relaxation's choice, laid out, is far from the arena bound, the layout sweep
    with its slow loads kept within the bound (a narrow beam) reaches it: the arena is
    proven optimal without the full model."""
    import memplan.deploy.regions_exact as exact

    everything_slow = np.ones(len(CHAIN), np.int64)
    read, beams = exact.RegionModel.read, []
    monkeypatch.setattr(exact.RegionModel, "read", lambda self, solver: (
        read(self, solver)[0], everything_slow) if not self.packed else read(self, solver))
    monkeypatch.setattr(exact, "sweep_layout", lambda *args, **kw: beams.append(
        kw.get("max_states")) or sweep_layout(*args, **kw))
    start = exact.lay_out(CHAIN, everything_slow, range(len(CHAIN.regions)))
    plan = plan_regions_exact(CHAIN, time_limit=5, objective="arena", relative_gap=0.01,
                              hint=start)
    assert beams[0] == exact.NARROW_STATES
    assert plan.stats["arena_status"] == "relaxation"
    assert plan.stats["arena_optimal"]
    assert plan.stats["region_sizes"]["dram"] < start.stats["region_sizes"]["dram"]
    check(CHAIN, plan)


def test_with_little_cpu_left_the_arena_stage_aims_a_lighter_model_at_its_bound(monkeypatch):
    """When the relaxation's choice, laid out, is far from the arena bound, the layout sweep
    finds nothing and the stage has too little CPU for the full model, the aimed search
    (every region packed but the slow one, its top at the bound) finds the plan at the
    bound: the arena is proven optimal."""
    import memplan.deploy.regions_exact as exact

    everything_slow = np.ones(len(CHAIN), np.int64)
    read = exact.RegionModel.read
    monkeypatch.setattr(exact.RegionModel, "read", lambda self, solver: (
        read(self, solver)[0], everything_slow) if not self.packed else read(self, solver))
    monkeypatch.setattr(exact, "sweep_layout", lambda *args, **kw: None)
    start = exact.lay_out(CHAIN, everything_slow, range(len(CHAIN.regions)))
    plan = plan_regions_exact(CHAIN, time_limit=5, objective="arena", relative_gap=0.01,
                              hint=start, cpu=2 * exact.FULL_MODEL_LEAST)
    assert plan.stats["arena_status"] == "aimed"
    assert plan.stats["arena_optimal"]
    assert plan.stats["region_sizes"]["dram"] < start.stats["region_sizes"]["dram"]
    check(CHAIN, plan)


def test_a_tie_break_whose_choices_are_all_over_the_ceiling_takes_the_gap_instead():
    """The arena's optimum (a and b slow: 1000 bytes at a time, 2000 in all) is over the
    ceiling's slow bytes, and so is every choice at its slow arena. The tie-break on the
    cost takes any slow arena within the gap of the bound instead: c slow (1005, within
    1 % of it and within the ceiling), so the ceiling's second run is not needed."""
    from memplan.deploy.regions import region_plan

    # fast: 2000 bytes; a and c live at step 0, b and c at step 1: one of them goes slow
    problem = Problem([Buffer("a", 1000, 0, 1), Buffer("b", 1000, 1, 2),
                       Buffer("c", 1005, 0, 2)],
                      regions=[Region("sram", 2000, 0.0), DRAM], name="over the ceiling")
    ceiling = region_plan(problem, np.array([0, 0, 0]), np.array([0, 0, 1]),
                          planner="start", seconds=0)
    plan = plan_regions_exact(problem, time_limit=5, objective="arena", relative_gap=0.01,
                              ceiling=ceiling)
    check(problem, plan)
    assert "ceiling" not in plan.stats
    assert slow_measures(problem, plan) == (1005, 1005)
    assert plan.stats["arena_bound"] == 1000 and plan.stats["arena_cost"] == 1005
    exact = plan_regions_exact(problem, time_limit=5, objective="arena", ceiling=ceiling)
    assert slow_measures(problem, exact) == (1005, 1005)  # no gap: the ceiling's run


def test_a_tie_break_that_lays_out_nothing_within_the_ceiling_takes_the_gap_instead(
        monkeypatch):
    """When no layout of the tie-break's choice at the arena plan's tops is within the
    ceiling (here: none kept, the first time), its relaxation runs again, capped by the
    ceiling, at a slow arena within the gap of the bound: c slow, no second run."""
    import memplan.deploy.regions_exact as exact
    from memplan.deploy.regions import region_plan

    problem = Problem([Buffer("a", 1000, 0, 1), Buffer("b", 1000, 1, 2),
                       Buffer("c", 1005, 0, 2)],
                      regions=[Region("sram", 2000, 0.0), DRAM], name="over the ceiling")
    ceiling = region_plan(problem, np.array([0, 0, 0]), np.array([0, 0, 1]),
                          planner="start", seconds=0)
    laid_out, loosened, tie_breaks = exact._laid_out, exact._loosened, []

    def first_lays_out_nothing(relaxed, chosen, best, stage, *args, **options):
        found = laid_out(relaxed, chosen, best, stage, *args, **options)
        if stage == "cost":
            tie_breaks.append(dict(relaxed.kept))
        return None if len(tie_breaks) == 1 else found

    monkeypatch.setattr(exact, "_laid_out", first_lays_out_nothing)
    monkeypatch.setattr(exact, "_beyond", lambda *args: False)  # the tight choice is tried
    monkeypatch.setattr(exact, "_loosened", lambda *args: tie_breaks.append("loosened") or
                        loosened(*args))
    plan = plan_regions_exact(problem, time_limit=5, objective="arena", relative_gap=0.01,
                              ceiling=ceiling)
    check(problem, plan)
    assert tie_breaks == [{1: 1000}, "loosened", {1: 1010}]
    assert "ceiling" not in plan.stats
    assert slow_measures(problem, plan) == (1005, 1005)


def _two_banks(problems):
    """The problems of a fast and a slow region only (the aimed search's)."""
    return [case for case in problems if len(case[1].regions) == 2]


@pytest.mark.parametrize("seed,problem,weights", _two_banks(_small_region_problems()),
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_aimed_search_never_proves_past_the_exhaustive_optimum(seed, problem, weights):
    """At every aim from 0 to the exhaustive optimum's slow arena, the aimed search proves a
    bound never above that optimum and returns a plan only when it fits (its slow arena at
    least the optimum); at the optimum it never proves one is missing; with a cap the
    relaxation has not (the first run's, a ceiling's), it proves nothing."""
    from ortools.sat.python import cp_model

    from memplan.deploy.regions_exact import RegionModel, _aimed

    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    optimum = _exhaustive_cost(problem, weights, "arena") / problem.regions[1].cost
    relaxed = RegionModel(problem, weights, packed=False)
    relaxed.cp.minimize(relaxed.arena)
    solver, status, _ = relaxed.solve(None, 5.0, 0, 1)
    assert status == cp_model.OPTIMAL
    chosen = relaxed.read(solver)[1]
    weight = relaxed.weight[1]
    for aim in range(int(optimum) + 1):
        model = RegionModel(problem, weights, pack_last=False)
        best, bound, _ = _aimed(model, relaxed, (chosen, None), None, (0.0, aim),
                                 (None, 5.0, 0, 1))
        assert bound / weight <= optimum
        assert aim < optimum or bound == 0.0
        if best is not None:
            plan = lay_out(problem, best[1], [], offsets=best[0])
            check(problem, plan)
            assert not plan.stats["over_capacity"]
            assert slow_measures(problem, plan)[1] >= optimum
        capped = RegionModel(problem, weights, pack_last=False)
        capped.cap(0, aim)  # nothing slow: a cap the relaxation has not proves nothing
        _, bound, _ = _aimed(capped, relaxed, (chosen, None), None, (0.0, aim),
                             (None, 5.0, 0, 1))
        assert bound == 0.0


def test_the_aimed_search_within_a_cap_starts_from_the_cheapest_choice_within_it():
    """Hinted with a choice over the cap's slow bytes (everything slow), the aimed search
    takes the cheapest choice of its capped relaxation instead; laid out, that choice is
    within the cap at the aim, so the plan comes without the packed model's search."""
    from memplan.deploy.regions_exact import RegionModel, _aimed

    everything_slow = np.ones(len(CHAIN), np.int64)
    relaxed = RegionModel(CHAIN, packed=False)
    model = RegionModel(CHAIN, pack_last=False)
    model.cap(8, 8)  # the weights alone slow: step 2 holds 136 bytes, the fast bank 128
    best, bound, _ = _aimed(model, relaxed, (everything_slow, None), None, (0.0, 8),
                            (None, 5.0, 0, 1))
    plan = lay_out(CHAIN, best[1], [], offsets=best[0])
    check(CHAIN, plan)
    assert not plan.stats["over_capacity"]
    assert slow_measures(CHAIN, plan) == (8, 8)
    assert _regions_of(CHAIN, plan)["weights"] == "dram"
    assert bound == 0.0  # a cap the relaxation has not proves nothing
    assert "cp" not in vars(model)  # the packed model never built


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[::3],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_layout_sweeps_guide_is_exact_along_the_relaxations_choice(seed, problem,
                                                                       weights):
    """At every step, the cost of the relaxation's optimal choice so far plus what the guide
    says the rest costs at least, given that choice's live regions, is the optimum: the
    backward sweep and the forward steps line up (forwards and backwards)."""
    from memplan.deploy.regions_exact import RegionModel
    from memplan.deploy.regions_layout import Guide
    from memplan.deploy.regions_sweep import sweep_relaxation, timeline

    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    model = RegionModel(problem, weights, packed=False)
    swept = sweep_relaxation(model)
    if swept is None:
        return
    optimum, regions = swept
    first = [unit.members[0] for unit in model.geometry.units]
    for reverse in (False, True):
        guide, line = Guide(model, None, not reverse), timeline(model, reverse)
        chosen = regions[first]
        for t in line.events()[0]:
            live = [u for u in range(len(first)) if line.starts[u] <= t < line.ends[u]]
            paid = sum(guide.price[u, chosen[u]] for u in range(len(first))
                       if line.starts[u] <= t)
            rest = guide.rest(t, live, chosen[live][None, :])[0]
            assert paid + rest == optimum
