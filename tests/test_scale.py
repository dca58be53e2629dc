"""Large problems: the time sweep, passes cut by their deadline, large-neighbourhood search.

Correctness only (every plan through the validator, never worse than its start,
cuts reported); how fast and how good at 10k-100k buffers is in BENCHMARKS.md.
"""

import threading

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from benchmarks.generate import network_like
from benchmarks.large import decoder_model, training_step, transformer_decoder
from memplan import Alias, Buffer, Plan, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.errors import InvalidPlanError
from memplan.groups import alias_units
from memplan.heuristics.placement import Placer
from memplan.heuristics.time_sweep import FreeList
from memplan.heuristics.units import Units
from memplan.onnx.onnx import from_onnx
from memplan.solver.exact_options import ExactOptions
from memplan.solver.lns import improve


def test_free_list_best_and_first_fit_and_merging():
    free = FreeList([(0, 16)])  # 0..16 reserved (a pinned unit)
    assert (free.lo, free.hi[:-1]) == ([16], [])
    a = free.take(32, 0, 16, best=True)
    b = free.take(8, 0, 8, best=True)
    c = free.take(64, 0, 16, best=True)
    assert (a, b, c) == (16, 48, 64)
    free.give(16, 48)  # a gap of 32 below b
    free.give(64, 128)  # c back: merges with the open top
    assert free.take(8, 0, 8, best=True) == 16  # the only finite gap
    assert free.take(24, 0, 8, best=False) == 24  # first fit: right after it
    free.give(16, 48)
    assert (free.lo[0], free.hi[0]) == (16, 48)


@pytest.mark.parametrize("placement", ["best_fit", "first_fit"])
def test_sweep_plans_are_valid_with_every_feature(placement):
    problems = [training_step(600, 1), network_like(500, 2),
                Problem([Buffer("p", 24, 0, 4, offset=40), Buffer("q", 24, 1, 3, alignment=8),
                         Buffer("r", 8, 2, 6, alignment=8), Buffer("s", 40, 4, 7),
                         Buffer("t", 16, 7, 9), Buffer("u", 16, 8, 9)],
                        aliases=[Alias("t", "u", 0, optional=True)],
                        conflicts=[("q", "s"), ("r", "t")], name="mixed")]
    for problem in problems:
        plan = plan_with("time_sweep", problem, placement=placement)
        assert validate(problem, plan) == [], problem.name
        assert plan.stats["cut"] == 0
        assert plan.arena_size >= lower_bound(problem)


def test_a_pass_out_of_time_is_cut_and_says_so():
    problem = network_like(400, 3)
    for name in ("time_sweep", "greedy_by_size", "first_fit", "pool_by_size",
                 "pool_by_lifetime", "shared_objects"):
        plan = plan_with(name, problem, time_limit=0)
        assert validate(problem, plan) == [], name
        assert plan.stats["cut"] == len(problem), name  # nothing placed before the deadline
    pinned = Problem([*problem.buffers][:40] + [Buffer("pin", 64, 0, problem.horizon,
                                                       offset=128)])
    for name in ("pool_by_size", "shared_objects"):  # objects laid out around the pin
        plan = plan_with(name, pinned, time_limit=0)
        assert validate(pinned, plan) == [] and plan.stats["cut"] == len(pinned) - 1, name
    plan = plan_with("best", problem, time_limit=0)
    assert validate(problem, plan) == []
    assert plan.stats["cut"] and plan.stats["skipped"]  # the first pass cut, the rest skipped
    assert plan.stats["arenas"]["greedy_by_size"] >= plan.arena_size  # then the ceiling,
    assert plan.stats["cut_short"] or plan.status == "optimal"  # uncut
    assert plan_with("best", problem).stats["cut"] == {}


def test_best_skips_pair_lists_too_large_but_still_plans(monkeypatch):
    from memplan.heuristics import compiled_place

    problem = training_step(800, 4)
    if compiled_place.available():  # the compiled pass lists no pairs: it runs at any size
        plan = plan_with("best", problem, max_pairs=10)
        assert validate(problem, plan) == [] and "greedy_by_size" in plan.stats["arenas"]
    monkeypatch.setattr(compiled_place, "_kernel_place", None)  # the Python placer lists
    plan = plan_with("best", problem, max_pairs=10)
    assert validate(problem, plan) == []
    assert plan.stats["winner"].startswith(("time_sweep", "long_lived", "peak_stack"))
    assert "greedy_by_size" in plan.stats["skipped"]
    assert plan.stats["pairs"] > 10


PAIR_LISTING = ("greedy_by_size", "greedy_by_breadth", "best_fit", "best_fit_temporal",
                "first_fit", "genetic", "hill_climb")
PAIR_FREE = ("naive", "pool_by_size", "pool_by_lifetime", "shared_objects", "time_sweep",
             "long_lived")  # without pinned buffers: no pair lists at all


@pytest.mark.parametrize("cause", ["memory", "time"])
def test_planners_whose_pair_lists_do_not_fit_return_the_sweeps_plan(monkeypatch, cause):
    from memplan.heuristics import compiled_place, units

    problem = training_step(800, 4)  # forward activations live until their backward op
    monkeypatch.setattr(compiled_place, "_kernel_place", None)  # the Python placer lists
    limit = None
    if cause == "memory":
        monkeypatch.setattr(units, "MAX_PAIRS", 10)
    else:  # listing one pair takes a second: no pair list fits a 5 s limit
        monkeypatch.setattr(units, "PAIR_SECONDS", 1.0)
        limit = 5
    for name in PAIR_LISTING:
        plan = plan_with(name, problem, time_limit=limit)
        assert validate(problem, plan) == [], name
        assert plan.planner == name and plan.stats["fallback"] == "time_sweep", name
        assert "pairs of buffers overlap in time" in plan.stats["why"], name
    best = plan_with("best", problem, time_limit=limit, sweep=False)
    assert validate(problem, best) == []
    if cause == "memory":
        assert best.stats["fallback"] == "time_sweep"
    else:  # the ceiling, greedy_by_size, lists its pairs whatever the limit
        assert "greedy_by_size" in best.stats["arenas"] and "fallback" not in best.stats
    for name in PAIR_FREE:
        plan = plan_with(name, problem, time_limit=limit)
        assert validate(problem, plan) == [] and "fallback" not in plan.stats, name


def _improved(problem, start, seconds=None, **options):
    from memplan.solver.preprocess import part_offsets, split

    (part,) = split(problem)
    hinted = part_offsets(part, start.offsets)
    seen = []
    result = improve(part.problem, hinted, floor=lower_bound(part.problem), seconds=seconds,
                     options=ExactOptions(threads=1, **options), on_solution=seen.append)
    offsets = result.offsets * part.scale
    whole = np.zeros(len(problem), np.int64)
    whole[part.buffers] = offsets
    return whole, result, [int((o + part.problem.sizes).max()) for o in seen]


def test_lns_never_returns_a_worse_or_invalid_plan():
    problem = network_like(300, 5)
    start = plan_with("time_sweep", problem, placement="first_fit")
    offsets, result, seen = _improved(problem, start)  # no time limit: until it stalls
    plan = type(start).from_offsets(problem, offsets, planner="lns")
    assert validate(problem, plan) == []
    assert plan.arena_size <= start.arena_size
    assert result.stats["windows"] >= 1
    assert seen == sorted(seen, reverse=True)  # each reported plan better than the last


def test_lns_builds_no_sub_problem_for_a_window_it_refuses(monkeypatch):
    """A window with too many obstacles is refused on its count of members, before its
    sub-problem is built (at 10^6 buffers a refused window's problem cost seconds)."""
    from memplan.solver import lns

    counted, built = [], []
    members, sub_problem = lns._Neighbourhoods.members, lns._Neighbourhoods.sub_problem
    monkeypatch.setattr(lns._Neighbourhoods, "members",
                        lambda self, *a: counted.append(len(found := members(self, *a)))
                        or found)
    monkeypatch.setattr(lns._Neighbourhoods, "sub_problem",
                        lambda self, chosen, n_free: built.append(len(chosen))
                        or sub_problem(self, chosen, n_free))
    problem = network_like(2000, 3, long_lived=0.02)  # long buffers: crowded windows
    start = plan_with("time_sweep", problem)
    offsets, result, _ = _improved(problem, start)
    plan = type(start).from_offsets(problem, offsets, planner="lns")
    assert validate(problem, plan) == [] and plan.arena_size <= start.arena_size
    assert len(built) == result.stats["windows"] and len(counted) > len(built)


def test_lns_keeps_aliases_conflicts_and_pinned_buffers():
    model = decoder_model(2, 2, seq=4, past=16, head_dim=8)
    problem = from_onnx(model, alignment=16)
    assert len(problem.alias_src) and problem.alias_optional.any()
    extra = problem.replace(conflicts=[(problem.ids[3], problem.ids[40])])
    for case in (problem, extra):
        start = plan_with("time_sweep", case)
        offsets, _, _ = _improved(case, start)
        plan = type(start).from_offsets(case, offsets, planner="lns")
        assert validate(case, plan) == [], case.name
        assert plan.arena_size <= start.arena_size


def test_exact_uses_lns_on_large_parts_and_keeps_its_word():
    problem = network_like(250, 6)
    hint = plan_with("naive", problem)  # far above the bound: the search has work to do
    plan = plan_with("exact", problem, hint=hint, threads=1, lns_buffers=100,
                     canonical=False)  # no floor probe first: the windows until stalled
    assert validate(problem, plan) == []
    assert plan.arena_size < hint.arena_size
    assert any(s and "lns" in s for s in plan.stats["parts_stats"])
    probed = plan_with("exact", problem, hint=hint, threads=1, lns_buffers=100)
    assert validate(problem, probed) == [] and probed.status == "optimal"
    assert any(s and "floor_probe" in s for s in probed.stats["parts_stats"])
    assert (plan.status == "optimal") == (plan.arena_size == plan.best_bound)
    capped = problem.replace(capacity=hint.arena_size)
    fit = plan_with("exact", capped, hint=hint, threads=1, lns_buffers=100)
    assert fit.status in ("feasible", "optimal") and validate(capped, fit) == []


@pytest.mark.parametrize("build", [lambda: network_like(2000, 3), lambda: training_step(2000, 3)],
                         ids=["network", "training"])
@pytest.mark.parametrize("deterministic", [False, True])
def test_minimising_a_large_part_starts_from_best_not_from_the_dive(build, deterministic):
    problem = build()
    small = plan_with("exact", problem, time_limit=3, deterministic=deterministic)
    assert small.stats["warm_start"].startswith("skipped")  # up to lns_buffers: the dive
    large = plan_with("exact", problem, time_limit=3, deterministic=deterministic,
                      lns_buffers=1000)
    assert large.stats["warm_start"] == "best"
    for plan in (small, large):
        assert validate(problem, plan) == []
        assert plan.arena_size <= 1.01 * lower_bound(problem)


def test_large_generators_are_seeded_and_realistic():
    decoder = transformer_decoder(1000, 0)
    assert 700 <= len(decoder) <= 1400
    caches = [i for i, b in enumerate(decoder.ids) if b.startswith("past_k_")]
    assert caches and all(decoder.starts[i] == 0 for i in caches)  # long-lived inputs
    assert decoder.alias_optional.any()  # in-place element-wise operators
    train = training_step(2000, 0)
    assert train.sizes.tolist() == training_step(2000, 0).sizes.tolist()
    assert 1500 <= len(train) <= 2500
    # forward activations live until their backward operator: long, nested lifetimes
    assert (train.ends - train.starts).max() > len(train) // 4


def test_overlap_count_matches_the_pairs_and_routes_crowded_parts_to_lns():
    from memplan.bounds import time_overlap_count
    from memplan.heuristics.units import time_overlap_pairs

    rng = np.random.default_rng(0)
    for _ in range(50):
        starts = rng.integers(0, 20, 40)
        ends = starts + rng.integers(1, 8, 40)
        assert time_overlap_count(starts, ends) == len(time_overlap_pairs(starts, ends)[0])
    problem = training_step(200, 7)
    hint = plan_with("naive", problem)
    plan = plan_with("exact", problem, hint=hint, threads=1, lns_pairs=10, canonical=False)
    assert validate(problem, plan) == [] and plan.arena_size < hint.arena_size
    assert any(s and "lns" in s for s in plan.stats["parts_stats"])


def test_best_validates_its_first_plan_at_once_and_keeps_time_for_the_winner():
    problem = network_like(3000, 7)
    plan = plan_with("best", problem, time_limit=30)
    assert validate(problem, plan) == []
    assert plan.stats["validate_seconds"] >= 0
    assert 0 <= plan.stats["validate_reserve"] <= 30
    untimed = plan_with("best", problem)  # no limit: no reserve, one validation
    assert validate(problem, untimed) == [] and "validate_reserve" not in untimed.stats


def test_best_validates_its_first_plan_beside_the_compiled_ceiling_pass(monkeypatch):
    from memplan.heuristics import best, compiled_place

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    seen = []  # (plan validated, on the main thread)
    timed = best._validation_seconds

    def spy(problem, offsets, name):
        seen.append((name, threading.current_thread() is threading.main_thread()))
        return timed(problem, offsets, name)

    monkeypatch.setattr(best, "_validation_seconds", spy)
    problem = network_like(3000, 7)
    threads = threading.active_count()
    plan = plan_with("best", problem, time_limit=30, breadth_first_buffers=1000)
    assert validate(problem, plan) == [] and threading.active_count() == threads
    assert seen[0] == ("time_sweep(placement='best_fit')", False)
    assert all(main for _, main in seen[1:]) and plan.stats["validate_seconds"] >= 0
    assert plan.stats["arenas"]["greedy_by_size"] > 0  # the pass ran beside it


def test_an_exact_plan_equal_to_its_warm_start_is_not_validated_twice():
    from memplan import api

    problem = network_like(400, 8)
    heuristic = api._checked(problem, plan_with("time_sweep", problem))
    same = type(heuristic).from_offsets(problem, heuristic.offsets.copy(), planner="exact")
    assert api._checked(problem, same, twin=heuristic).stats["validated_as"] == "time_sweep"
    moved = heuristic.offsets.copy()
    moved[1] = moved[0] = 0  # 0 and 1 live together (consecutive steps): an overlap
    assert problem.starts[1] < problem.ends[0]
    broken = type(heuristic).from_offsets(problem, moved, planner="exact")
    with pytest.raises(InvalidPlanError):
        api._checked(problem, broken, twin=heuristic)


def test_naive_arena_by_cumsum_matches_the_naive_planner():
    from memplan import api

    for alignments in (np.full(6000, 64), np.where(np.arange(6000) % 3, 64, 48)):
        problem = Problem.from_arrays(np.arange(6000) % 1000 + 1, np.arange(6000) // 2,
                                      np.arange(6000) // 2 + 3, alignments=alignments)
        assert api.naive_arena(problem) == plan_with("naive", problem).arena_size


def test_pins_that_aliases_imply_may_not_collide():
    buffers = [Buffer("a", 1, 0, 1), Buffer("b", 1, 0, 1, offset=0),
               Buffer("c", 1, 1, 2, offset=0)]
    with pytest.raises(ProblemError, match="pinned by its aliases 'a'"):
        Problem(buffers, aliases=[Alias("a", "c", 0)])  # a sits on c's pin: b's bytes
    Problem(buffers, aliases=[Alias("a", "c", 8)])  # elsewhere: accepted


def test_import_within_waits_no_longer_than_told(tmp_path, monkeypatch):
    import sys

    from memplan.solver.cp_import import import_within

    (tmp_path / "memplan_slow_module.py").write_text("import time\ntime.sleep(1.5)\nVALUE = 7\n")
    (tmp_path / "memplan_broken_module.py").write_text("raise ValueError('broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_within("memplan_slow_module", 0.01) is None  # too little time: not started
    assert "memplan_slow_module" not in sys.modules
    assert import_within("memplan_slow_module", 0.45) is None  # still importing
    assert import_within("memplan_slow_module", None).VALUE == 7  # the same import, finished
    assert import_within("numpy", 0) is sys.modules["numpy"]
    with pytest.raises(ValueError, match="broken"):
        import_within("memplan_broken_module", 5)


@st.composite
def kernel_problems(draw):
    """Problems the compiled pass takes: mandatory aliases, conflicts, alignments, pins."""
    n = draw(st.integers(1, 30))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, 12))
        alignment = draw(st.sampled_from([1, 1, 2, 4, 8]))
        pinned = alignment * draw(st.integers(0, 20)) if draw(st.integers(0, 9)) == 0 else None
        buffers.append(Buffer(f"b{i}", draw(st.integers(0, 40)), start,
                              start + draw(st.integers(1, 8)), alignment=alignment,
                              offset=pinned))
    ids = [b.id for b in buffers]
    aliases = []
    for _ in range(draw(st.integers(0, 3)) if n > 1 else 0):
        src, dst = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        aliases.append(Alias(src, dst, 8 * draw(st.integers(0, 3))))
    conflicts = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)),
                              max_size=4))
    try:
        problem = Problem(buffers, aliases=aliases, conflicts=conflicts)
        Placer(Units.build(problem)).place([])  # pins that alias groups make collide
        return problem
    except ProblemError:
        assume(False)


@settings(max_examples=200, deadline=None)
@given(kernel_problems(), st.sampled_from(["size", "breadth", "spatial", "start", "temporal",
                                           "index"]),
       st.sampled_from(["best_fit", "first_fit"]))
def test_compiled_pass_places_exactly_as_the_placer(problem, order, placement):
    from memplan.heuristics import compiled_place
    from memplan.heuristics.order import order_units
    from memplan.heuristics.placement import Placer
    from memplan.heuristics.units import Units

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    assert compiled_place.fits(problem, placement)
    units = Units.build(problem)
    ordered = order_units(units, order)
    offsets, cut = compiled_place.compiled_offsets(Units.build(problem, pairs=False), ordered,
                                                   placement)
    assert cut == 0
    assert offsets.tolist() == Placer(units).place(ordered, placement).tolist()
    plan = Plan.from_offsets(problem, offsets, planner="compiled")
    assert validate(problem, plan) == []


def test_compiled_pass_keeps_its_deadline_and_refuses_what_it_cannot_place():
    import time

    from memplan.heuristics import compiled_place
    from memplan.heuristics.order import order_units
    from memplan.heuristics.placement import Placer
    from memplan.heuristics.units import Units

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    problem = network_like(2000, 9)
    units = Units.build(problem, pairs=False)
    ordered = order_units(units, "breadth")
    offsets, cut = compiled_place.compiled_offsets(units, ordered, "best_fit",
                                                   time.perf_counter())  # passed: all stacked
    placer = Placer(Units.build(problem))
    stacked = placer.place(ordered, "best_fit", deadline=time.perf_counter())
    assert cut == placer.cut == len(ordered)
    assert offsets.tolist() == stacked.tolist()
    assert validate(problem, Plan.from_offsets(problem, offsets, planner="cut")) == []
    plan = plan_with("greedy_by_breadth", problem)
    assert plan.stats["compiled"] and validate(problem, plan) == []
    optional = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3)],
                       aliases=[Alias("a", "b", 0, optional=True)])
    assert not compiled_place.fits(optional, "best_fit")
    assert "compiled" not in plan_with("greedy_by_size", optional).stats
    assert not compiled_place.fits(problem, "stack")


def test_best_runs_the_ceiling_the_stack_then_the_breadth_pass_after_the_sweep_on_large_problems():
    from memplan.heuristics import compiled_place

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    problem = network_like(1200, 10)
    plan = plan_with("best", problem, breadth_first_buffers=1000, time_limit=60,
                     long_first=False)  # else just before the stack (test_long_first)
    assert validate(problem, plan) == []
    first, second, third, fourth = list(plan.stats["arenas"])[:4]  # a plan at once; the
    assert first.startswith("time_sweep") and second == "greedy_by_size"  # pass every call
    assert third == "peak_stack"  # runs within the limit; the sweeps outward from the peak
    assert fourth == "greedy_by_breadth"  # (cheaper); then the pass that wins there


@st.composite
def sweep_problems(draw):
    """Problems for the time sweep: pins, alignments, mandatory and optional aliases,
    conflicts."""
    n = draw(st.integers(1, 40))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, 12))
        buffers.append(Buffer(f"b{i}", draw(st.sampled_from([1, 3, 8, 24, 40, 64])), start,
                              start + draw(st.integers(1, 8)),
                              alignment=draw(st.sampled_from([1, 1, 2, 4, 8, 16])),
                              offset=draw(st.sampled_from([None, None, None, 64 * i]))))

    def two():  # two distinct buffers
        first, step = draw(st.integers(0, n - 1)), draw(st.integers(1, n - 1))
        return f"b{first}", f"b{(first + step) % n}"

    many = st.integers(0, 4) if n > 1 else st.just(0)
    aliases = [Alias(*two(), draw(st.sampled_from([0, 16, 32])), optional=draw(st.booleans()))
               for _ in range(draw(many))]
    conflicts = [two() for _ in range(draw(many))]
    try:
        problem = Problem(buffers, aliases=aliases, conflicts=conflicts)
        alias_units(problem)  # a pin may put an alias group below 0: refused here
    except ProblemError:
        assume(False)
    return problem


def _both_sweeps(problem, placement, deadline=None):
    """The compiled sweep's and the free list's offsets and stats, each plan validated
    (once when they are the same)."""
    from memplan.heuristics import compiled_place
    from memplan.heuristics.time_sweep import sweep_offsets
    from memplan.heuristics.units import Units

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    units = Units.build(problem, pairs=False)
    swept = [sweep_offsets(units, placement, deadline, compiled=compiled)
             for compiled in (True, False)]
    for offsets, _ in swept if (swept[0][0] != swept[1][0]).any() else swept[:1]:
        assert validate(problem, Plan.from_offsets(problem, offsets, planner="sweep")) == []
    return swept, units


@settings(max_examples=300, deadline=None)
@given(sweep_problems(), st.sampled_from(["best_fit", "first_fit"]))
def test_compiled_sweep_gives_the_free_lists_offsets(problem, placement):
    ((compiled, stats), (python, python_stats)), _ = _both_sweeps(problem, placement)
    assert compiled.tolist() == python.tolist()
    assert stats["cut"] == python_stats["cut"] == 0
    assert (stats["compiled"], python_stats["compiled"]) == (True, False)


@settings(max_examples=100, deadline=None)
@given(sweep_problems(), st.sampled_from(["long_first", "peak_stack", "long_lived"]))
def test_the_planners_built_on_the_sweep_give_valid_plans(problem, name):
    """Pins, alignments, aliases and conflicts: every plan validated (``long_first`` with
    any long-enough unit taken as long-lived)."""
    options = {"long_share": 0.0} if name == "long_first" else {}
    plan = plan_with(name, problem, time_limit=1, **options)
    assert validate(problem, plan) == []


def _pinned_and_aligned(n: int, seed: int) -> Problem:
    """A random problem with pins among the free bytes, alignments and conflicts."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n // 5, n)
    ends = starts + rng.geometric(0.05, n)
    sizes = np.where(rng.random(n) < 0.1, rng.integers(1, 16, n), rng.integers(1, 5000, n))
    alignments = rng.choice([1, 8, 64, 256], n)
    pinned = np.full(n, -1)
    held = rng.choice(n, n // 100, replace=False)
    pinned[held] = 8192 * np.arange(len(held))  # each pin its own 8 KiB: none clash
    conflicts = [(str(a), str(b)) for a, b in rng.integers(0, n, (n // 200, 2)).tolist()
                 if a != b]
    return Problem.from_arrays(sizes, starts, ends, alignments=alignments, pinned=pinned,
                               conflicts=conflicts, name=f"pinned-{seed}")


@pytest.mark.parametrize("placement", ["best_fit", "first_fit"])
def test_compiled_sweep_matches_on_large_problems_with_many_gaps(placement):
    problems = [_pinned_and_aligned(3000, seed) for seed in range(3)]
    problems += [training_step(3000, 11), transformer_decoder(2000, 12), network_like(2000, 13)]
    for problem in problems:
        ((compiled, _), (python, _)), _ = _both_sweeps(problem, placement)
        assert compiled.tolist() == python.tolist(), problem.name


@pytest.mark.parametrize("placement", ["best_fit", "first_fit"])
def test_compiled_sweep_matches_the_free_list_with_a_thousand_gaps_at_once(placement):
    # tens of thousands of units, up to a thousand gaps at once: the trees' rebalancing
    # and the tables' deletions (runs shifted back) in play, not only their easy cases
    problems = [_pinned_and_aligned(40_000, 15), training_step(30_000, 16)]
    for problem in problems:
        ((compiled, _), (python, _)), _ = _both_sweeps(problem, placement)
        assert compiled.tolist() == python.tolist(), problem.name


@pytest.mark.parametrize("placement", ["best_fit", "first_fit"])
def test_compiled_sweep_out_of_time_stacks_as_the_free_list_does(placement):
    import time

    problem = _pinned_and_aligned(1500, 14)
    swept, units = _both_sweeps(problem, placement, time.perf_counter())  # passed
    ((compiled, stats), (python, python_stats)) = swept
    assert stats["cut"] == python_stats["cut"] == len(units.free)
    assert compiled.tolist() == python.tolist()
    pins = problem.pinned != -1
    lowest = (problem.pinned + problem.sizes)[pins].max()
    assert (compiled[~pins & (problem.sizes > 0)] >= lowest).all()  # stacked above the pins


def _raw_sweep(rng: np.random.Generator):
    """A `Sweep` straight from arrays: units of no extent (which no problem has: sizes are
    positive) among the others, reserved ranges that may touch, overlap or be empty."""
    from memplan.heuristics.time_sweep import Sweep

    n = int(rng.integers(1, 60))
    extent = np.where(rng.random(n) < 0.2, 0, rng.integers(1, 100, n))
    modulus = rng.choice([1, 2, 8, 16], n)
    residue = rng.integers(0, 16, n) % modulus
    start = rng.integers(0, 20, n)
    end = start + rng.integers(1, 6, n)
    unit = np.arange(n)
    order = unit[np.lexsort((unit, -extent, start))]
    by_end = unit[np.argsort(end, kind="stable")]
    lo = np.sort(rng.choice(np.arange(0, 400, 40), int(rng.integers(0, 4)), replace=False))
    reserved = np.stack((lo, lo + rng.integers(0, 60, len(lo))), axis=1)
    return Sweep(extent, residue, modulus, order, start[order], by_end, end[by_end], reserved,
                 np.zeros(n, np.int64), int(reserved[:, 1].max(initial=0))), start, end


def test_compiled_sweep_loop_matches_on_raw_sweeps_and_keeps_units_apart():
    import time

    from memplan.heuristics import compiled_place
    from memplan.heuristics.time_sweep import CLOCK_EVERY, free_list_sweep

    if not compiled_place.available():
        pytest.skip("the compiled kernel is not built")
    rng = np.random.default_rng(16)
    for case in range(400):
        sweep, start, end = _raw_sweep(rng)
        best, passed = case % 2 == 0, case % 4 == 3
        deadline = time.perf_counter() if passed else None
        base, cut = compiled_place.compiled_sweep(sweep, best, deadline, CLOCK_EVERY)
        python, python_cut = free_list_sweep(sweep, best, deadline)
        assert (base.tolist(), cut) == (python.tolist(), python_cut), case
        assert cut == (len(sweep.order) if passed else 0)
        held = np.flatnonzero(sweep.extent)
        assert (base[held] % sweep.modulus[held] == sweep.residue[held]).all()
        top = base + sweep.extent
        for i in held.tolist():  # every pair: these are small
            for lo, hi in sweep.reserved.tolist():
                assert max(base[i], lo) >= min(top[i], hi), case  # no byte in common
            meets = held[(start[held] < end[i]) & (start[i] < end[held]) & (held != i)]
            assert ((top[meets] <= base[i]) | (base[meets] >= top[i])).all(), case


def test_the_sweep_falls_back_to_the_free_list_without_the_kernel(monkeypatch):
    from memplan.heuristics import compiled_place

    problem = _pinned_and_aligned(400, 15)
    built = plan_with("time_sweep", problem)
    monkeypatch.setattr(compiled_place, "_kernel_place", None)
    monkeypatch.setattr(compiled_place, "_kernel_sweep", None)
    fallback = plan_with("time_sweep", problem)
    assert fallback.stats["compiled"] is False
    assert validate(problem, fallback) == []
    assert fallback.offsets.tolist() == built.offsets.tolist()


def test_pins_from_a_plan_skip_the_clash_check_that_others_get():
    arrays = (np.array([8, 8]), np.array([0, 1]), np.array([2, 3]))
    with pytest.raises(ProblemError, match="pinned where pinned"):
        Problem.from_arrays(*arrays, pinned=np.array([0, 0]))
    trusted = Problem.from_arrays(*arrays, pinned=np.array([0, 8]), pins_from_plan=True)
    assert trusted.pinned.tolist() == [0, 8]  # LNS windows: obstacles of a valid plan


def test_a_window_of_free_buffers_all_live_at_one_step_is_skipped():
    from memplan.solver.lns import CLIQUE_MOST, _solve_window

    count = CLIQUE_MOST + 1  # all live at step `count`: a one-dimensional packing
    sub = Problem.from_arrays(np.full(count, 4), np.arange(count), np.full(count, count + 5))
    new, proven, stats = _solve_window(sub, count, 0, 4 * count, np.arange(count) * 4,
                                       ExactOptions(), 1.0)
    assert new is None and not proven and stats["clique"]
    staggered = Problem.from_arrays(np.full(count, 4), np.arange(count), np.arange(count) + 2)
    new, _, stats = _solve_window(staggered, count, 0, 8, np.arange(count) % 2 * 4,
                                  ExactOptions(), 5.0)
    assert new is not None and "clique" not in stats
