"""The heuristic planners: valid plans on random problems, their parts, their promises.

Every plan a planner returns here goes through the independent validator.
(The conformance test over every registered planner lives in
test_conformance.py; these tests go deeper into the heuristics.)
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memplan import Alias, Buffer, Problem, ProblemError, lower_bound, plan_with, planners
from memplan.groups import combine_congruences
from memplan.heuristics.greedy import PRESETS
from memplan.heuristics.placement import Placer, choose_gap
from memplan.heuristics.units import Units, time_overlap_pairs
from memplan.validate import validate

ONE_PASS = ("naive", "greedy_by_size", "greedy_by_breadth", "best_fit", "best_fit_temporal",
            "first_fit", "pool_by_size", "pool_by_lifetime", "shared_objects", "best")
SEARCHES = {"genetic": {"generations": 3, "population": 4},
            "hill_climb": {"iterations": 15}}
HEURISTICS = ONE_PASS + tuple(SEARCHES)
ALIGNMENTS = (1, 2, 4, 8, 16)


def run(name: str, problem: Problem, **options):
    """The plan of ``name``, checked: valid (up to an admitted capacity miss), above the bound."""
    plan = plan_with(name, problem, **{**SEARCHES.get(name, {}), **options})
    violations = validate(problem, plan)
    if plan.status == "infeasible":
        assert problem.capacity is not None and plan.arena_size > problem.capacity
        violations = [v for v in violations if v.kind != "capacity"]
    assert violations == [], f"{name} on {problem!r}: {violations[:3]}"
    assert plan.arena_size >= plan.lower_bound == lower_bound(problem)
    return plan


@st.composite
def problems(draw, max_buffers: int = 14) -> Problem:
    """Random problems with alignment, pinned buffers, aliases of both kinds, conflicts."""
    n = draw(st.integers(1, max_buffers))
    starts = [draw(st.integers(0, 10)) for _ in range(n)]
    ends = [s + draw(st.integers(1, 6)) for s in starts]
    sizes = [draw(st.integers(1, 40)) for _ in range(n)]
    aligns = [draw(st.sampled_from(ALIGNMENTS)) for _ in range(n)]
    aliases, parent = [], list(range(n))
    for dst in range(1, n):  # a forest: dst sits inside an earlier buffer, 16-aligned deltas
        if draw(st.integers(0, 3)) == 0:
            src = draw(st.integers(0, dst - 1))
            aliases.append(Alias(str(src), str(dst), 16 * draw(st.integers(0, 2))))
            parent[dst] = parent[src]
    for _ in range(draw(st.integers(0, 3))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if a != b:
            aliases.append(Alias(str(a), str(b), 16 * draw(st.integers(-1, 1)), optional=True))
    conflicts = [(str(a), str(b)) for a, b in draw(st.lists(
        st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4)) if a != b]
    pinned: dict[int, int] = {}
    band = 0  # pinned groups stacked in bands of their own, so they never collide
    for root in sorted(set(parent)):
        if draw(st.integers(0, 4)) == 0:
            group = [i for i in range(n) if parent[i] == root]
            probe = Problem([Buffer(str(i), sizes[i], starts[i], ends[i]) for i in range(n)],
                            aliases=[a for a in aliases if not a.optional])
            _, delta = probe.alias_groups
            pinned[root] = band
            band += 16 * (1 + max(int(delta[i]) + sizes[i] for i in group) // 16)
    capacity = draw(st.one_of(st.none(), st.integers(20, 400)))
    buffers = [Buffer(str(i), sizes[i], starts[i], ends[i], aligns[i], pinned.get(i))
               for i in range(n)]
    mandatory = [a for a in aliases if not a.optional]
    for relations in ((aliases, conflicts), (aliases, []), (mandatory, [])):
        try:  # what the problem model refuses (a conflict inside an alias chain, a chain
            return Problem(buffers, aliases=relations[0], conflicts=relations[1],  # whose
                           capacity=capacity)  # ends are live together) is dropped
        except ProblemError:
            continue
    return Problem(buffers, aliases=mandatory, capacity=capacity)


@st.composite
def conflict_graphs(draw) -> Problem:
    n = draw(st.integers(1, 10))
    sizes = {str(i): draw(st.integers(1, 30)) for i in range(n)}
    pairs = [(str(a), str(b)) for a, b in itertools.combinations(range(n), 2)
             if draw(st.booleans())]
    return Problem.from_conflicts(sizes, pairs)


@st.composite
def laminar(draw) -> Problem:
    """Lifetimes nested or disjoint, an inner buffer never larger than its outer one.

    Greedy by size stacks each buffer on its enclosing ones, so it ends exactly
    at the heaviest nest: the lower bound, hence optimal.
    """
    buffers: list[Buffer] = []

    def grow(start: int, end: int, limit: int, depth: int):
        size = draw(st.integers(1, limit))
        buffers.append(Buffer(f"b{len(buffers)}", size, start, end))
        t = start
        while depth < 3 and t < end - 1 and draw(st.booleans()):
            inner_end = draw(st.integers(t + 1, end))
            grow(t, inner_end, size, depth + 1)
            t = inner_end

    t = 0
    for _ in range(draw(st.integers(1, 3))):
        length = draw(st.integers(1, 8))
        grow(t, t + length, 64, 0)
        t += length
    return Problem(buffers)


# ------------------------------------------------------------------ the planners
def test_every_heuristic_is_registered():
    assert set(HEURISTICS) <= set(planners())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_every_heuristic_plans_random_problems_validly(problem):
    arenas = {name: run(name, problem).arena_size for name in HEURISTICS}
    assert arenas["best"] <= min(arenas[name] for name in PRESETS if name != "naive")


@settings(max_examples=30, deadline=None)
@given(conflict_graphs())
def test_every_heuristic_plans_conflict_graphs_validly(problem):
    for name in HEURISTICS:
        run(name, problem)


@settings(max_examples=60, deadline=None)
@given(laminar())
def test_greedy_by_size_reaches_the_bound_on_nested_lifetimes(problem):
    plan = run("greedy_by_size", problem)
    assert plan.arena_size == plan.lower_bound
    assert plan.status == "optimal"


@settings(max_examples=25, deadline=None)
@given(problems(max_buffers=10), st.integers(0, 3))
def test_searches_never_lose_to_their_start_and_repeat_with_the_seed(problem, seed):
    greedy = run("greedy_by_size", problem)
    for name in SEARCHES:
        plan = run(name, problem, seed=seed)
        assert plan.arena_size <= plan.stats["start_arena"] <= greedy.arena_size
        again = run(name, problem, seed=seed)
        assert np.array_equal(plan.offsets, again.offsets)


def test_searches_stop_at_once_at_the_lower_bound():
    problem = Problem([Buffer("a", 8, 0, 8), Buffer("b", 8, 0, 4), Buffer("c", 8, 4, 8)])
    for name in SEARCHES:
        plan = run(name, problem, seed=1)
        assert plan.status == "optimal"
        assert plan.stats["evaluations"] == 1


def test_searches_improve_a_hard_problem(challenging):
    from memplan.formats.minimalloc_csv import read_problem

    problem = read_problem(challenging / "A.1048576.csv").replace(capacity=None)
    start = run("greedy_by_size", problem).arena_size
    assert run("hill_climb", problem, iterations=60, seed=0).arena_size < start


# ----------------------------------------------------------- features, one by one
def test_optional_alias_taken_when_free_and_no_higher():
    problem = Problem([Buffer("in", 64, 0, 2), Buffer("relu", 64, 1, 3)],
                      aliases=[Alias("in", "relu", 0, optional=True)])
    for name in ("greedy_by_size", "first_fit", "pool_by_size", "shared_objects"):
        plan = run(name, problem)
        assert plan.arena_size == 64 and plan.stats["optional_aliases_taken"] == 1


def test_optional_alias_left_when_its_spot_is_taken():
    problem = Problem([Buffer("in", 64, 0, 2, offset=0), Buffer("relu", 64, 1, 3),
                       Buffer("other", 64, 2, 4, offset=0)],
                      aliases=[Alias("in", "relu", 0, optional=True)])
    plan = run("greedy_by_size", problem)
    assert plan.offset_of(problem, "relu") == 64


def test_mandatory_alias_group_moves_as_one():
    problem = Problem([Buffer("cat", 64, 4, 8), Buffer("a", 32, 0, 6), Buffer("b", 32, 2, 6),
                       Buffer("x", 48, 0, 3)],
                      aliases=[Alias("cat", "a", 0), Alias("cat", "b", 32)])
    for name in HEURISTICS:
        plan = run(name, problem)
        assert plan.offset_of(problem, "b") == plan.offset_of(problem, "cat") + 32


def test_alignment_and_pinned_offsets_are_kept():
    problem = Problem([Buffer("p", 24, 0, 4, offset=40), Buffer("q", 24, 1, 3, alignment=32),
                       Buffer("r", 8, 2, 6, alignment=8), Buffer("s", 40, 4, 7)],
                      conflicts=[("q", "s")])
    for name in HEURISTICS:
        plan = run(name, problem)
        assert plan.offset_of(problem, "p") == 40
        assert plan.offset_of(problem, "q") % 32 == 0


def test_colliding_pinned_buffers_are_a_problem_error():
    with pytest.raises(ProblemError, match="buffer 'b': pinned where pinned 'a' is"):
        Problem([Buffer("a", 8, 0, 2, offset=0), Buffer("b", 8, 1, 3, offset=4)])


def test_pinned_buffers_in_conflict_clash_whatever_alias_joins_them():
    """An optional alias the pins honour lets two pinned buffers share bytes, unless they
    are in explicit conflict: then no plan exists, and the problem says so before any
    planner (a sweep that reserves pinned bytes would put the two on shared bytes).
    Without the conflict, every planner keeps them sharing (``long_first`` carries the
    alias into its small problem)."""
    buffers = [Buffer("k", 40, 0, 1, offset=384), Buffer("j", 1, 0, 1),
               Buffer("h", 1, 0, 1, offset=448), Buffer("x", 8, 0, 1)]
    aliases = [Alias("k", "j", 32, optional=True), Alias("j", "h", 32)]  # j at 416, in k
    with pytest.raises(ProblemError, match="buffer 'j': pinned by its aliases where pinned "
                                           "'k' is, and the two conflict"):
        Problem(buffers, aliases=aliases, conflicts=[("j", "k")])
    shared = Problem(buffers, aliases=aliases)
    for name in [*HEURISTICS, "time_sweep", "peak_stack", "long_lived", "long_first"]:
        plan = run(name, shared)
        assert plan.offset_of(shared, "j") == 416 and not validate(shared, plan)


def test_a_capacity_below_the_bound_is_reported_infeasible():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3)], capacity=12)
    for name in HEURISTICS:
        assert run(name, problem).status == "infeasible"


def test_breadth_uses_the_widths_the_frontend_gives():
    buffers = [Buffer("a", 10, 0, 2), Buffer("b", 5, 1, 3), Buffer("c", 20, 2, 4)]
    assert run("greedy_by_breadth", Problem(buffers)).arena_size == 25  # c, b, then a
    odd = Problem(buffers, widths=[100, 0, 0, 0])  # step 0 widest: a, b, then c on top
    assert run("greedy_by_breadth", odd).arena_size == 35


def test_orders_and_placements_compose_through_options():
    problem = Problem([Buffer("a", 10, 0, 2), Buffer("b", 30, 1, 3), Buffer("c", 20, 2, 4)])
    plan = run("first_fit", problem, order=["c", "b", "a"])
    assert plan.offset_of(problem, "c") == 0 and plan.stats["order"] == "custom"
    assert run("best_fit", problem, order="temporal").stats["order"] == "temporal"
    with pytest.raises(TypeError, match="valid options: order, placement"):
        plan_with("best_fit", problem, colour="red")
    with pytest.raises(ValueError, match="valid orders"):
        plan_with("best_fit", problem, order="alphabetical")


def test_stats_of_pools_objects_and_best():
    problem = Problem([Buffer("a", 10, 0, 2), Buffer("b", 30, 1, 3), Buffer("c", 20, 2, 4),
                       Buffer("d", 10, 3, 5)])
    pool = run("pool_by_size", problem)
    assert pool.stats["blocks"] == 3 and pool.stats["pool_total"] == 60  # c finds a's too small
    shared = run("shared_objects", problem)
    assert shared.stats == {**shared.stats, "objects": 2, "object_total": 50,
                            "objects_needed": 2}
    best = run("best", problem)
    assert best.planner == "best" and best.arena_size == min(best.stats["arenas"].values())
    assert best.stats["winner"] in best.stats["arenas"]


def test_network_like_problems_of_a_few_thousand_buffers():
    from benchmarks.generate import network_like

    problem = network_like(3000, seed=1)
    for name in ("greedy_by_size", "best_fit", "first_fit", "greedy_by_breadth"):
        assert run(name, problem).arena_size <= 1.2 * lower_bound(problem)


# ---------------------------------------------------------------------- the parts
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 8)), max_size=30))
def test_overlap_pairs_are_exactly_the_intersecting_lifetimes(spans):
    starts = np.array([s for s, _ in spans], np.int64)
    ends = starts + np.array([d for _, d in spans], np.int64)
    a, b = time_overlap_pairs(starts, ends)
    found = sorted(tuple(sorted(p)) for p in zip(a.tolist(), b.tolist(), strict=True))
    expected = [(i, j) for i, j in itertools.combinations(range(len(spans)), 2)
                if starts[i] < ends[j] and starts[j] < ends[i]]
    assert found == expected


@given(st.integers(0, 40), st.integers(1, 12), st.integers(0, 40), st.integers(1, 12))
def test_congruences_combine_like_brute_force(r1, m1, r2, m2):
    both = [x for x in range(0, 200) if x % m1 == r1 % m1 and x % m2 == r2 % m2]
    combined = combine_congruences((r1 % m1, m1), (r2 % m2, m2))
    if combined is None:
        assert both == []
    else:
        residue, modulus = combined
        assert [x for x in range(0, 200) if x % modulus == residue] == both


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(-10, 40), st.integers(1, 12)), max_size=8),
       st.integers(0, 3), st.sampled_from((1, 4)), st.booleans(), st.integers(1, 12))
def test_gap_choice_is_free_aligned_and_lowest_or_tightest(intervals, residue, modulus, best,
                                                           copies):
    residue %= modulus
    lo = np.array([a for a, _ in intervals] * copies, np.int64)  # copies: over SMALL too
    hi = lo + np.array([w for _, w in intervals] * copies, np.int64)
    base = choose_gap(lo, hi, residue, modulus, best)
    free = [x for x in range(0, 80) if x % modulus == residue
            and not any(a <= x < b for a, b in zip(lo, hi, strict=True))]
    assert base in free
    if not best:
        assert base == free[0]
    else:  # the tightest gap that fits: nothing tighter holds an aligned base
        room = _room(lo, hi, base)
        assert all(_room(lo, hi, x) >= room for x in free if x < max(hi.max(initial=0), 0))


def _room(lo: np.ndarray, hi: np.ndarray, x: int) -> int:
    """The size of the gap around free base x (from the highest end below to the next start)."""
    below = hi[hi <= x].max(initial=0)
    above = lo[lo > x].min(initial=10**9)
    return int(above - max(below, 0))


@settings(max_examples=60, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_replacing_only_the_tail_of_an_order_gives_the_full_placement(problem, rnd):
    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    placer = Placer(Units.build(problem))
    first = placer.units.free.tolist()
    rnd.shuffle(first)
    prefix = rnd.randint(0, len(first))
    second = first[:prefix] + rnd.sample(first[prefix:], len(first) - prefix)
    reused = placer.place(second, reuse=placer.place(first), prefix=prefix)
    assert np.array_equal(reused, placer.place(second))


def test_units_tie_alias_groups_and_refuse_impossible_alignment():
    problem = Problem([Buffer("a", 8, 0, 2, alignment=4), Buffer("b", 4, 0, 2),
                       Buffer("c", 4, 1, 3, alignment=4)],
                      aliases=[Alias("a", "b", 0), Alias("b", "c", 1)])
    with pytest.raises(ProblemError, match="no offset aligns every buffer of its alias group"):
        Units.build(problem)
    units = Units.build(Problem([Buffer("a", 8, 0, 2), Buffer("b", 4, 1, 3)],
                                aliases=[Alias("a", "b", -4)]))
    assert len(units) == 1 and units.extent[0] == 12 and units.rel.tolist() == [4, 0]
