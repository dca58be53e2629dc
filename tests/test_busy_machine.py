"""The same verdicts on a busy machine: the planners' adaptive choices count CPU time.

A build machine runs other work beside memplan (``make -j``, CI). The exact planner's
head starts, paces and probe lengths count the CPU time of the search's own threads
(`memplan.solver.canonical.Race.cpu`), so busy processes beside it make it slower, never
change its answer: before, the fit race judged the canonical search's pace in nodes per
wall-clock second, stopped it on a loaded machine and handed MiniMalloc's F and I to
CP-SAT, which did not fit them in 60 s. How times scale is measured by
``python -m benchmarks load``, not asserted here.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from ortools.sat.python import cp_model

import memplan
from benchmarks.branchy import MODELS, breadth_first
from benchmarks.generate import network_like
from benchmarks.load import busy
from memplan import registry, validate
from memplan.bounds import lower_bound
from memplan.budget import Budget
from memplan.deploy import regions_exact, scratch_exact
from memplan.heuristics import best, presets
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_graph import analyze, infer
from memplan.schedule import operator_order
from memplan.solver import canonical, canonical_planner, cp_search, exact, lns
from memplan.solver.exact_options import ExactOptions
from tests.conftest import CHALLENGING

BUSY = 3  # processes spinning beside the planner (the machine has 2 cores)


def _handed(options: dict) -> tuple:
    """``(cpu, time_limit)`` a planner is given: its budget's allowance and limit, or the
    keywords `plan_with` makes one of."""
    budget = options.get("budget")
    return (options.get("cpu"), options["time_limit"]) if budget is None else \
        (budget.cpu, budget.limit)


def verdict(problem: memplan.Problem) -> str:
    plan = memplan.solve(problem, time_limit=60)
    assert [v for v in validate(problem, plan) if v.kind != "capacity"] == []
    return plan.status


@pytest.mark.skipif(not canonical.available(), reason="the canonical kernel is not built")
def test_minimalloc_i_fits_on_a_busy_machine_as_on_a_quiet_one():
    problem = memplan.load(CHALLENGING / "I.1048576.csv")  # capacity 1 MiB: a tight fit
    quiet = verdict(problem)
    with busy(BUSY):
        loaded = verdict(problem)
    assert quiet in ("feasible", "optimal") and loaded == quiet


@pytest.mark.skipif(not canonical.available(), reason="the canonical kernel is not built")
def test_a_race_counts_the_cpu_time_of_its_threads():
    problem = memplan.load(CHALLENGING / "F.1048576.csv")
    race = canonical.Race(problem, problem.capacity)
    with busy(4):
        began = time.perf_counter()
        race.start(1, None, cpu=0.3)  # a CPU budget far below what F needs
        canonical.wait(race, None, None)
        wall = time.perf_counter() - began
    race.cancel()
    assert 0.3 <= race.cpu() <= wall + 0.05  # four loops beside it: the CPU clock is slower
    assert race.result().status in ("unknown", "feasible")


def test_neighbourhood_windows_count_cpu_time(monkeypatch):
    """Large-neighbourhood search grows or shrinks its windows by whether CP-SAT settles
    them within `lns.WINDOW_CPU` CPU seconds: with that budget at twice the largest
    window's need, busy loops beside it (a window's wall time then 2-3 times its CPU
    time) leave every window, and the plan, as they were."""
    problem = network_like(300, 0)
    start = memplan.plan_with("naive", problem).offsets
    needs: list[float] = []
    solve_window = lns._solve_window

    def measured(*args, **kwargs):
        found = solve_window(*args, **kwargs)
        needs.append(found[2].get("cpu", 0.0))
        return found

    monkeypatch.setattr(lns, "_solve_window", measured)

    def improve():
        return lns.improve(problem, start, floor=lower_bound(problem), seconds=None,
                           options=ExactOptions(seed=1), on_solution=lambda offsets: None)

    quiet = improve()
    assert quiet.stats["windows"] == quiet.stats["solved"] >= 2
    monkeypatch.setattr(lns, "WINDOW_CPU", 2 * max(needs))
    with busy(BUSY):
        loaded = improve()
    assert loaded.stats == {**quiet.stats, "cpu": loaded.stats["cpu"]}
    assert (loaded.offsets == quiet.offsets).all()


def test_best_splits_its_search_in_cpu_seconds(monkeypatch):
    """``best`` gives the canonical descent its share of the CPU time left: a clock that
    ran ahead of the CPU (a busy machine) before the search shortens the wall time the
    descent may run, not the CPU seconds it may spend."""
    problem = memplan.load(CHALLENGING / "C.1048576.csv").replace(capacity=None)
    limit, lag = 2.0, [0.0]
    handed: dict = {}
    descent = registry._PLANNERS["canonical"]

    def spy(problem, **kwargs):
        handed.update(kwargs)
        return descent(problem, **kwargs)

    clock = time.perf_counter
    monkeypatch.setitem(registry._PLANNERS, "canonical", spy)
    monkeypatch.setattr(memplan.budget.time, "perf_counter", lambda: clock() + lag[0])
    search = best.Run.descend
    monkeypatch.setattr(best.Run, "descend", lambda run: (lag.__setitem__(0, limit / 2),
                                                          search(run))[1])
    plan = memplan.plan_with("best", problem, time_limit=limit)
    assert not validate(problem, plan)
    share = best.DEFAULTS.descent
    cpu, wall = _handed(handed)
    assert wall <= limit - lag[0]  # the wall clock: the limit kept
    assert cpu > 0.8 * share * limit  # the CPU: as on a quiet machine


def test_round_robin_turns_end_after_their_slice_of_cpu_time(monkeypatch):
    """With one worker the orders take turns in CP-SAT (`cp_search`); a turn hands the
    lane over after its slice in CPU seconds of its worker, so that busy loops beside it
    (each turn's wall time then 2-4 times its CPU time) end the turns at the same point
    of the search, and the same order settles each part."""
    problem = memplan.load(CHALLENGING / "F.1048576.csv")
    options = ExactOptions(threads=1, canonical=False, warm_start=None, slice_seconds=0.3)
    turns: list[tuple] = []
    run = cp_search._Lane._run

    def measured(lane, model):
        began = time.thread_time()  # one worker: CP-SAT searches in the lane's thread
        run(lane, model)
        turns.append((lane.task, lane.status, time.thread_time() - began))

    monkeypatch.setattr(cp_search._Lane, "_run", measured)

    def settled_by() -> list:
        plan = memplan.plan_with("exact", problem, time_limit=30, options=options)
        assert plan.status in ("feasible", "optimal") and not validate(problem, plan)
        return [part["settled_by"] for part in plan.stats["parts_stats"]]

    quiet = settled_by()
    turns.clear()
    with busy(BUSY):
        loaded = settled_by()
    assert loaded == quiet
    handed_over = [(task, cpu) for task, status, cpu in turns if status == cp_model.UNKNOWN]
    assert handed_over and all(cpu >= 0.95 * task[1] for task, cpu in handed_over)


def test_the_bisection_of_a_peak_counts_cpu_time(monkeypatch):
    """To minimise, the exact planner bisects the peak with fit races for a share of the
    part's time counted in CPU seconds (`exact._Run._minimise`): a clock that ran ahead
    of the CPU after the first race (a busy machine) leaves the targets tried, and the
    proof, as they were; only the time limit itself is kept on the wall clock. The warm
    start is given (a greedy plan, the same peak as ``best``'s): ``best`` as the warm start
    takes its CPU share, 3 CPU-s of the 30 s, which beside ten busy processes is 15-30 s
    on the clock, and the jump would then leave the bisection nothing of the limit."""
    names = "abcde"  # a five-cycle of conflicts: three colours, above the pairs' bound
    problem = memplan.Problem.from_conflicts(
        dict(zip(names, [1001, 1003, 1007, 1009, 1013], strict=True)),
        [(names[k], names[(k + 1) % 5]) for k in range(5)])
    hint = memplan.plan_with("greedy_by_size", problem)
    limit, lag = 30.0, [0.0]  # the jump leaves 9 s: the search takes < 1 CPU-s
    targets: list[int] = []
    search = exact._Run._search

    def spy(run, i, floor, top, hinted, seconds, *, minimize, **kwargs):
        found = search(run, i, floor, top, hinted, seconds, minimize=minimize, **kwargs)
        if not minimize:
            targets.append(top)
            lag[0] = lag[0] or 0.7 * limit  # the clock jumps ahead once
        return found

    monkeypatch.setattr(exact._Run, "_search", spy)
    quiet = memplan.plan_with("exact", problem, time_limit=limit, hint=hint)
    tried, targets[:], lag[0] = list(targets), [], 0.0
    clock = time.perf_counter
    monkeypatch.setattr(memplan.budget.time, "perf_counter", lambda: clock() + lag[0])
    loaded = memplan.plan_with("exact", problem, time_limit=limit, hint=hint)
    assert hint.arena_size > lower_bound(problem)
    assert len(tried) >= 5 and targets == tried
    assert quiet.status == loaded.status == "optimal" and not validate(problem, loaded)
    assert loaded.arena_size == quiet.arena_size == 3011


def test_the_warm_start_and_the_parts_share_the_limit_in_cpu_time(monkeypatch):
    """The exact planner's stages share the time limit in CPU seconds: the warm start,
    then each part an equal share of what is left (`exact._Run._share`). A clock that ran
    ahead of the CPU during the warm start and the first part (a busy machine) leaves
    every part's share as it was; the wall clock only keeps the limit."""
    sizes = [1001, 1003, 1007, 1009, 1013, 1002, 1005, 1006, 1011, 1015]
    names = "abcdefghij"  # two five-cycles of conflicts: two parts, each above the bound
    problem = memplan.Problem.from_conflicts(
        dict(zip(names, sizes, strict=True)),
        [(ring[k], ring[(k + 1) % 5]) for ring in (names[:5], names[5:]) for k in range(5)])
    limit, lag = 10.0, [0.0]
    shares: list[float] = []
    share, solve_part, warm_start = exact._Run._share, exact._Run.solve_part, exact.plan_with

    def spied_share(run, parts_left):
        shares.append(share(run, parts_left))
        return shares[-1]

    def lagging(call):
        def lagged(*args, **kwargs):
            found = call(*args, **kwargs)
            lag[0] += 0.3 * limit if lagging.on else 0.0
            return found
        return lagged

    monkeypatch.setattr(exact._Run, "_share", spied_share)
    monkeypatch.setattr(exact._Run, "solve_part", lagging(solve_part))
    monkeypatch.setattr(exact, "plan_with", lagging(warm_start))
    lagging.on = False

    def solve():  # a warm start that does not run to its time limit: the same CPU each run
        return memplan.plan_with("exact", problem, time_limit=limit, warm_start="greedy_by_size")

    solve()  # imports CP-SAT (its CPU counts)
    shares.clear()
    quiet = solve()
    assert len(shares) == 2
    tried, shares[:] = list(shares), []
    clock = time.perf_counter
    monkeypatch.setattr(memplan.budget.time, "perf_counter", lambda: clock() + lag[0])
    lagging.on = True
    loaded = solve()
    assert lag[0] >= 0.6 * limit and len(shares) == 2
    assert all(abs(a - b) < 0.05 * limit for a, b in zip(shares, tried, strict=True))
    assert quiet.status == loaded.status == "optimal" and not validate(problem, loaded)


def handed_with_the_clock_ahead(monkeypatch, search: tuple, start: tuple, run,
                                lag: float) -> tuple[dict, dict]:
    """The keywords ``run()`` hands ``search`` (module, name), quiet, then with the wall
    clock pushed ``lag`` seconds ahead once ``start`` (module, name) returns: a busy machine,
    where the clock runs on and the CPU does not."""
    handed: list[dict] = []
    ahead = [0.0]
    searched, started = getattr(*search), getattr(*start)

    def spy(*args, **kwargs):
        handed.append(kwargs)
        return searched(*args, **kwargs)

    def lagged(*args, **kwargs):
        found = started(*args, **kwargs)
        ahead[0] = lagged.lag
        return found

    monkeypatch.setattr(*search, spy)
    monkeypatch.setattr(*start, lagged)
    clock = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + ahead[0])
    for lagged.lag in (0.0, lag):
        ahead[0] = 0.0
        run()
    quiet, loaded = handed
    return quiet, loaded


def test_the_canonical_planners_descent_counts_its_start_in_cpu_time(monkeypatch):
    """Without a hint, ``canonical`` starts from ``best``'s passes, then descends for the
    rest of the limit in CPU seconds: a clock that ran ahead of the CPU during the start
    (a busy machine) shortens the wall time the descent may run, not its CPU budget."""
    problem = memplan.load(CHALLENGING / "C.1048576.csv").replace(capacity=None)
    limit = 1.0

    def run():
        assert not validate(problem, memplan.plan_with("canonical", problem, time_limit=limit))

    quiet, loaded = handed_with_the_clock_ahead(
        monkeypatch, (canonical_planner.canonical, "descend"), (canonical_planner, "plan_with"),
        run, limit / 2)
    assert loaded["seconds"] <= limit / 2  # the wall clock: the limit kept
    assert loaded["cpu"] > 0.8 * limit and abs(loaded["cpu"] - quiet["cpu"]) < 0.1 * limit


def test_a_large_parts_windows_have_its_share_in_cpu_time(monkeypatch):
    """A part improved window by window (`memplan.solver.lns`) gets its share of the limit
    in CPU seconds: a clock that ran ahead of the CPU during the warm start (a busy
    machine) shortens the wall time the windows may run, not their CPU budget."""
    problem = network_like(300, 0)
    limit = 1.5

    def run():
        plan = memplan.plan_with("exact", problem, time_limit=limit, warm_start="naive",
                                 lns_buffers=100, canonical=False)
        assert not validate(problem, plan) and "lns" in plan.stats["parts_stats"][0]

    quiet, loaded = handed_with_the_clock_ahead(monkeypatch, (lns, "improve"),
                                                (exact, "plan_with"), run, limit / 2)
    assert loaded["seconds"] <= limit / 2  # the wall clock: the limit kept
    assert abs(loaded["cpu"] - quiet["cpu"]) < 0.1 * limit and loaded["cpu"] > limit / 2


def _packing_slice(name: str, buffers: int) -> memplan.Problem:
    """The first ``buffers`` of one of MiniMalloc's problems, its time axis renumbered (the
    region planners' cost bound walks every step): a packing CP-SAT does not settle in
    seconds."""
    whole = memplan.load(CHALLENGING / f"{name}.1048576.csv")
    kept = list(whole.buffers)[:buffers]
    steps = np.unique([t for b in kept for t in (b.start, b.end)])
    return memplan.Problem([memplan.Buffer(b.id, b.size, int(np.searchsorted(steps, b.start)),
                                           int(np.searchsorted(steps, b.end))) for b in kept])


class StageOver(Exception):
    """Raised after the stage under test: the later stages are not what a test measures."""


def _first_stage_cpu(monkeypatch, module, name: str, clock) -> list[float]:
    """The CPU seconds (by ``clock``) of the first call of ``module.name``; `StageOver`
    after it."""
    spent: list[float] = []
    original = getattr(module, name)

    def measured(*args, **kwargs):
        began = clock()
        original(*args, **kwargs)
        spent.append(clock() - began)
        raise StageOver

    monkeypatch.setattr(module, name, measured)
    return spent


def test_region_choice_hands_over_in_cpu_seconds(monkeypatch):
    """Stage 1 of the exact region planner (the relaxation, then the full model: CP-SAT
    runs) ends after its share of the limit in CPU seconds: with busy loops beside it, it
    takes the CPU it takes on a quiet machine (its wall time longer), not its share of wall
    time."""
    problem = _packing_slice("A", 60)
    problem = problem.replace(regions=(memplan.Region("sram", lower_bound(problem) // 2, 0.0),
                                       memplan.Region("dram", None, 1.0)))
    monkeypatch.setattr(regions_exact, "STAGE_SHARE", 0.05)  # 0.4 CPU-s of an 8 s limit
    spent: list[float] = []
    original = regions_exact.RegionModel.solve

    def measured(model, *args, **kwargs):
        began = time.thread_time()  # one worker: CP-SAT in the calling thread
        found = original(model, *args, **kwargs)
        spent.append(time.thread_time() - began)
        if model.packed:  # the full model's run ends the stage
            raise StageOver
        return found

    monkeypatch.setattr(regions_exact.RegionModel, "solve", measured)
    with busy(BUSY), pytest.raises(StageOver):
        regions_exact.plan_regions_exact(problem, time_limit=8, threads=1)
    # busy: more wall time, the same CPU (the cap counts the relaxation's in process CPU,
    # a little more than its thread's)
    assert len(spent) == 2 and sum(spent) >= 0.85 * 0.4


def test_peak_stage_of_variable_scratch_hands_over_in_cpu_seconds(monkeypatch):
    """Stage 1 of the exact scratch planner (the smallest peak, by the exact planner) ends
    after its share of the limit in CPU seconds of the process, on a busy machine too."""
    problem = _packing_slice("F", 300)
    scratch = [memplan.Buffer(f"scratch@{t}", 4096, t, t + 1, kind="scratch",
                              max_size=65536) for t in range(0, int(problem.ends.max()), 7)]
    problem = problem.replace(buffers=[*problem.buffers, *scratch])
    monkeypatch.setattr(scratch_exact, "STAGE_SHARE", 0.05)  # 0.4 CPU-s of an 8 s limit
    spent = _first_stage_cpu(monkeypatch, scratch_exact, "plan_with", time.process_time)
    with busy(BUSY), pytest.raises(StageOver):
        scratch_exact.plan_scratch_exact(problem, time_limit=8, threads=1)
    assert spent[0] >= 0.95 * 0.4


def test_operator_order_starts_and_search_count_cpu_seconds(monkeypatch):
    """The fast operator order tries its random list schedules for a quarter of its time and
    searches for the rest, both in CPU seconds: a wall clock that ran ahead (a busy
    machine) during the first schedule leaves the schedules tried, the moves and the order
    as on a quiet machine."""
    model = breadth_first(MODELS["dense_block"]())
    deps = operator_order.dependencies(from_onnx(model), analyze(infer(model, strict=True,
                                                                       source=None)),
                                       optional_taken=True)

    def fast():
        return operator_order.fast_order(deps, budget=Budget.of_limit(2), seed=0,
                                         iterations=2000)

    quiet_order, quiet = fast()
    lag, clock = [0.0], time.perf_counter
    schedule = operator_order.list_schedule
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    monkeypatch.setattr(operator_order, "list_schedule", lambda *args: (
        lag.__setitem__(0, 1.0), schedule(*args))[1])  # half the limit, on the wall clock
    loaded_order, loaded = fast()
    assert loaded == quiet and quiet["starts"] == 2 + operator_order.RANDOM_STARTS
    assert (loaded_order == quiet_order).all()


def test_exact_operator_order_hands_over_to_windows_in_cpu_seconds(monkeypatch):
    """On a graph of many steps the exact operator order gives the whole model half its CPU
    seconds, then windows: with busy loops beside it, the whole model still takes them."""
    monkeypatch.setattr(operator_order, "WINDOW_STEPS", 10)  # the inception stack: windowed
    model = breadth_first(MODELS["inception"]())
    problem = from_onnx(model, inplace=False)
    deps = operator_order.dependencies(problem, analyze(infer(model, strict=True,
                                                              source=None)),
                                       optional_taken=False)
    start = memplan.plan_with("best", problem)
    handed: list[float] = []

    def windows(*args, **kwargs):
        handed.append(time.thread_time())
        raise StageOver

    monkeypatch.setattr(operator_order, "_improve_windows", windows)
    with busy(BUSY), pytest.raises(StageOver):  # one worker: CP-SAT in the calling thread
        began = time.thread_time()
        operator_order.exact_order(deps, problem, np.arange(deps.n), start.offsets,
                                   budget=Budget.of_limit(30, cpu=1.0), seed=0, threads=1)
    assert handed[0] - began >= 0.95 * 0.5  # a busy machine: more wall time, the same CPU


def test_listing_pairs_counts_cpu_seconds(monkeypatch):
    """A one-pass planner lists its overlapping pairs when they take at most a third of its
    limit in CPU seconds: a wall clock that ran ahead (a busy machine) before the listing
    leaves the listing, and the plan, as on a quiet machine, not a pair-free fallback."""
    rng = np.random.default_rng(0)
    problem = memplan.Problem([memplan.Buffer("pinned", 64, 0, 2000, offset=0)] + [
        memplan.Buffer(f"b{i}", int(rng.integers(1, 64)) * 64, i, i + 1000)
        for i in range(1000)])  # about 1M pairs: 0.25 s listed
    listed = lambda: memplan.plan_with("pool_by_size", problem, time_limit=3)  # noqa: E731
    quiet = listed()
    lag, clock = [0.0], time.perf_counter
    bound = presets.lower_bound
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    monkeypatch.setattr(presets, "lower_bound", lambda problem: (
        lag.__setitem__(0, 0.9), bound(problem))[1])  # before the listing: 0.9 s on the wall
    loaded = listed()
    assert "fallback" not in quiet.stats and "fallback" not in loaded.stats
    assert (loaded.offsets == quiet.offsets).all() and not validate(problem, loaded)


def test_the_warm_start_takes_its_share_in_cpu_seconds(monkeypatch):
    """The exact planner gives ``best`` its warm-start share of the limit as a CPU budget and
    the wall time left as its time limit: a clock that ran ahead of the CPU after the first
    pass (a busy machine) leaves every later pass and the warm start's plan as on a quiet
    machine, where a wall-clock share would have skipped them as late."""
    problem = memplan.load(CHALLENGING / "C.1048576.csv").replace(capacity=None)
    limit, lag = 10.0, [0.0]
    warm: list[memplan.Plan] = []

    def warm_start(*args, **kwargs):
        warm.append(registry.plan_with(*args, **kwargs))
        raise StageOver

    sweep, clock = best.sweep_offsets, time.perf_counter

    def first_pass(*args):  # then the clock jumps ahead
        found = sweep(*args)
        lag[0] = lag[0] or first_pass.lag
        return found

    monkeypatch.setattr(exact, "plan_with", warm_start)
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    monkeypatch.setattr(best, "sweep_offsets", first_pass)
    for first_pass.lag in (0.0, limit / 2):
        lag[0] = 0.0
        with pytest.raises(StageOver):
            memplan.plan_with("exact", problem, time_limit=limit, canonical=False,
                              deterministic=True)
    quiet, loaded = warm
    assert not validate(problem, quiet) and not validate(problem, loaded)
    assert quiet.stats["skipped"] == loaded.stats["skipped"] == []
    assert loaded.stats["arenas"] == quiet.stats["arenas"] and len(quiet.stats["arenas"]) > 10
    assert (loaded.offsets == quiet.offsets).all()


def test_best_within_a_cpu_budget_skips_by_cpu_seconds_and_keeps_the_ceiling():
    """``best``'s ``cpu`` budget decides which passes run: none is left after the first
    (cut at once) with no budget, yet the plan is validated and no larger than
    ``greedy_by_size``'s, whose pass runs uncut; a budget the passes do not use up leaves
    them all, within a time limit far off or none."""
    problem = memplan.load(CHALLENGING / "C.1048576.csv").replace(capacity=None)
    ceiling = memplan.plan_with("greedy_by_size", problem).arena_size
    spent = memplan.plan_with("best", problem, time_limit=60, cpu=0.0)
    assert not validate(problem, spent) and spent.arena_size <= ceiling
    assert spent.stats["cut_short"] and len(spent.stats["skipped"]) >= 10
    assert spent.stats["arenas"].get("greedy_by_size") == ceiling
    for limit in (60, None):
        plenty = memplan.plan_with("best", problem, time_limit=limit, cpu=30.0,
                                   search_evaluations=0)
        assert not validate(problem, plenty) and plenty.arena_size <= ceiling
        assert plenty.stats["skipped"] == [] and plenty.stats["cut"] == {}


def test_the_order_search_before_the_exact_planner_is_a_cpu_budget(monkeypatch):
    """On a problem the exact planner would improve by neighbourhoods, `memplan.solve` first
    gives `best` a timed order search: its seconds a CPU budget, the wall clock only what
    is left of the limit's share. A clock that ran ahead (a busy machine) since the call
    began leaves the budget whole and shortens the wall limit alone."""
    from memplan import api

    count = ExactOptions().lns_buffers + 1
    large = memplan.Problem.from_arrays(np.full(count, 64), np.arange(count),
                                        np.arange(count) + 3)
    handed, lag, clock = [], [0.0], time.perf_counter
    timed = api._search_seconds

    def search_seconds(*args):  # the clock jumps ahead once the call has begun
        lag[0] = search_seconds.jump
        return timed(*args)

    def search(name, problem, **options):
        handed.append(_handed(options))
        raise StageOver

    monkeypatch.setattr(api, "_search_seconds", search_seconds)
    monkeypatch.setattr(api, "plan_with", search)
    monkeypatch.setattr(api, "heuristic_names", lambda: ["best"])
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    for search_seconds.jump in (0.0, 2.0):
        lag[0] = 0.0
        with pytest.raises(StageOver):
            api.solve_report(large, api.solve_options(time_limit=5))
    (quiet_cpu, quiet_wall), (busy_cpu, busy_wall) = handed
    assert quiet_cpu == busy_cpu == pytest.approx(4.5)  # 90 % of the limit
    assert quiet_wall == pytest.approx(4.5, abs=0.3) and busy_wall == pytest.approx(2.5, abs=0.3)


def test_the_ceilings_pass_runs_second_on_large_problems_within_the_limit(monkeypatch):
    """On problems over ``breadth_first_buffers`` one greedy pass takes up to a CPU second;
    the ceiling's (the one pass every call runs, never a plan above greedy_by_size's) comes
    right after the first sweep, so that a machine slowed 4x spends the limit on it rather
    than run it past the limit at the end. The clock pushed past the deadline once the
    ceiling is placed: the later passes are skipped, the ceiling's plan stands."""
    problem = network_like(2000, 3)
    placed = best.greedy_offsets

    def slow(*args, **kwargs):  # the ceiling's pass takes the whole limit
        found = placed(*args, **kwargs)
        moved = time.perf_counter() + 60
        monkeypatch.setattr(memplan.budget.time, "perf_counter", lambda: moved)
        return found

    monkeypatch.setattr(best, "greedy_offsets", slow)
    plan = registry.plan_with("best", problem, time_limit=5, breadth_first_buffers=500)
    assert list(plan.stats["arenas"])[:2] == ["time_sweep(placement='best_fit')", "greedy_by_size"]
    assert "greedy_by_breadth" in plan.stats["skipped"] and plan.stats["cut_short"]
    assert plan.arena_size <= registry.plan_with("greedy_by_size", problem).arena_size
    assert validate(problem, plan) == []


def test_anneal_counts_its_schedule_in_cpu_seconds(monkeypatch):
    """With a ``cpu`` budget, ``anneal``'s temperature falls with the CPU seconds it spent
    and its slices end at its pace: busy loops beside it, or a clock pushed ahead mid-search
    (a busy machine), leave the plan as on a quiet machine (the bound, reached in about 0.15
    CPU seconds) and the schedule handed to the kernel smooth, where a schedule on the clock
    would jump to half."""
    from memplan.heuristics import anneal

    problem = _packing_slice("B", 90)
    slices, lag, clock = [], [0.0], time.perf_counter
    kernel = anneal._search_kernel

    class Spy:  # the compiled search; the clock jumps ahead at the third call when asked
        new, best = kernel.new, kernel.best

        @staticmethod
        def step(chain, evaluations, seconds, left, *progress_and_options):
            slices.append(progress_and_options[:2])
            if len(slices) == 3:
                lag[0] = Spy.jump
            return kernel.step(chain, evaluations, seconds, left, *progress_and_options)

    monkeypatch.setattr(anneal, "_search_kernel", Spy)
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])

    def run(jump: float) -> tuple[memplan.Plan, list]:
        slices.clear()
        Spy.jump, lag[0] = jump, 0.0
        plan = memplan.plan_with("anneal", problem, time_limit=30, cpu=3.0, seed=0)
        assert not validate(problem, plan)
        return plan, [(a, b) for a, b in slices if b > 0]  # the chains' first calls: none

    quiet, _ = run(0.0)
    with busy(BUSY):
        beside, _ = run(0.0)
    loaded, schedule = run(15.0)  # half the limit, on the wall clock
    assert quiet.arena_size == beside.arena_size == loaded.arena_size == lower_bound(problem)
    assert len(schedule) >= 2 and schedule[0][0] < 0.05  # from 0, by CPU seconds: no jump
    assert all(after[0] - before[0] < 0.1 for before, after in zip(schedule, schedule[1:],
                                                                   strict=False))


def test_compare_gives_each_planner_its_share_in_cpu_seconds(monkeypatch):
    """`memplan.api.compare` hands each planner its share of the limit as a ``cpu`` budget
    and the wall time left as its limit: a clock that ran ahead of the CPU after the first
    planner (a busy machine) leaves every budget, and the table's rows, as on a quiet
    machine; only the wall limits are shorter (shares of wall time would shrink)."""
    from memplan import api

    problem = _packing_slice("C", 90)  # the searches reach the bound at once: the budgets
    handed: list[tuple] = []  # alone are compared
    lag, clock = [0.0], time.perf_counter

    def spy(name, problem, **options):
        handed.append((name, *_handed(options)))
        lag[0] = spy.jump  # once the first planner has begun
        if name == api.EXACT:  # its warm start is the plan to compare: no search needed
            return options["hint"]
        return registry.plan_with(name, problem, **options)

    monkeypatch.setattr(api, "plan_with", spy)
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    tables = []
    for spy.jump in (0.0, 1.0):
        lag[0] = 0.0
        tables.append(api.compare({"C": problem}, planners=["greedy_by_size", "anneal",
                                                            "best", "exact"], time_limit=3))
    quiet, loaded = handed[:4], handed[4:]
    assert [h[0] for h in quiet] == [h[0] for h in loaded] == ["greedy_by_size", "anneal",
                                                              "best", "exact"]
    for (_, quiet_cpu, quiet_wall), (_, cpu, wall) in zip(quiet[1:], loaded[1:], strict=True):
        assert cpu == pytest.approx(quiet_cpu, abs=0.1) and cpu > 0.6  # a share of 3 s
        assert wall == pytest.approx(quiet_wall - 1.0, abs=0.3)  # the wall clock: the limit
    assert tables[0].attrs["skipped"] == tables[1].attrs["skipped"] == {}
    assert (tables[1]["planner"] == tables[0]["planner"]).all()


def test_explain_plans_with_its_share_in_cpu_seconds(monkeypatch):
    """``memplan explain`` gives its planner a third of the time left as a CPU budget: a
    clock that ran ahead of the CPU after the first pass of ``best`` (a busy machine) leaves
    every later pass and the plan explained as on a quiet machine, where a third of the
    time on the wall clock would have skipped them as late."""
    from memplan.cli import explain as explain_command
    from memplan.cli import main

    path = CHALLENGING / "C.1048576.csv"
    explained: list[memplan.Plan] = []
    lag, clock, sweep = [0.0], time.perf_counter, best.sweep_offsets

    def first_pass(*args):  # then the clock jumps ahead
        found = sweep(*args)
        lag[0] = lag[0] or first_pass.lag
        return found

    def explain(problem, plan, **kwargs):
        explained.append(plan)
        raise StageOver

    monkeypatch.setattr(explain_command, "explain", explain)
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + lag[0])
    monkeypatch.setattr(best, "sweep_offsets", first_pass)
    for first_pass.lag in (0.0, 4.0):  # past a third of 9 s
        lag[0] = 0.0
        with pytest.raises(StageOver):
            main(["explain", str(path), "--time-limit", "9"])
    quiet, loaded = explained
    assert quiet.stats["skipped"] == loaded.stats["skipped"] == []
    assert loaded.stats["arenas"] == quiet.stats["arenas"] and len(quiet.stats["arenas"]) > 10
    assert (loaded.offsets == quiet.offsets).all()
