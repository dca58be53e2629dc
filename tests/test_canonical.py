"""The canonical search (`memplan.solver.canonical`): complete on small problems.

Its pruning (canonical order, dominance, section floors, nothing overhead,
decomposition) must never lose the answer: at the exhaustive optimum it finds a
layout (checked by the independent validator), one byte below it proves that
none fits. The exhaustive search here shares no code with the kernel: every
order of the buffers, each dropped onto the ones it overlaps in time.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from memplan import Plan, Problem, lower_bound, validate
from memplan.solver import canonical

pytestmark = pytest.mark.skipif(not canonical.available(),
                                reason="the compiled kernel is not built (no C compiler)")


def exhaustive_optimum(problem: Problem) -> int:
    """The smallest arena: every order, each buffer dropped onto those it overlaps.

    Any valid layout pushed down (in order of offset) is such a drop, so the
    minimum over all orders is the optimum. The orders are walked depth first,
    and a prefix is not extended once its peak reaches the best arena found (a
    drop never lowers the peak), nor anything once the best is the live load
    (no arena is below it): a branch and bound, n! orders at worst, tiny problems
    only. `every_order_optimum` is the same minimum, order by order.
    """
    n = len(problem)
    sizes, aligns = problem.sizes.tolist(), problem.alignments.tolist()
    starts, ends = problem.starts.tolist(), problem.ends.tolist()
    meets = [[c for c in range(n) if c != b and starts[c] < ends[b] and starts[b] < ends[c]]
             for b in range(n)]
    floor = max(sum(size for size, s, e in zip(sizes, starts, ends, strict=True) if s <= t < e)
                for t in range(min(starts), max(ends)))
    top: list[int | None] = [None] * n
    best = sum(sizes) + sum(aligns)  # above any drop's peak

    def extend(placed: int, peak: int) -> None:
        nonlocal best
        if peak >= best or best == floor:
            return
        if placed == n:
            best = peak
            return
        for b in range(n):
            if top[b] is None:
                low = max([top[c] for c in meets[b] if top[c] is not None], default=0)
                top[b] = low + -low % aligns[b] + sizes[b]
                extend(placed + 1, max(peak, top[b]))
                top[b] = None

    extend(0, 0)
    return best


def every_order_optimum(problem: Problem) -> int:
    """`exhaustive_optimum` without its cuts: the drop of every one of the n! orders."""
    n = len(problem)
    sizes, aligns = problem.sizes.tolist(), problem.alignments.tolist()
    starts, ends = problem.starts.tolist(), problem.ends.tolist()
    best = None
    for order in itertools.permutations(range(n)):
        top: dict[int, int] = {}
        for b in order:
            low = max([top[c] for c in top if starts[c] < ends[b] and starts[b] < ends[c]],
                      default=0)
            low += -low % aligns[b]
            top[b] = low + sizes[b]
        peak = max(top.values())
        best = peak if best is None else min(best, peak)
    return best


def random_problem(seed: int, n: int, *, aligned: bool = False) -> Problem:
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 6, n)
    ends = starts + rng.integers(1, 5, n)
    sizes = rng.integers(1, 9, n)
    alignments = rng.choice([1, 2, 4], n) if aligned else None
    return Problem.from_arrays(sizes, starts, ends, alignments=alignments, name=f"r{seed}")


def check(problem: Problem, verdict: canonical.Verdict, capacity: int):
    assert verdict.status == "feasible"
    plan = Plan.from_offsets(problem.replace(capacity=capacity), verdict.offsets,
                             planner="canonical")
    assert validate(problem.replace(capacity=capacity), plan) == []
    assert plan.arena_size <= capacity


def test_the_cut_search_finds_the_minimum_over_every_order():
    for seed in range(60):
        problem = random_problem(seed, 3 + seed % 4, aligned=seed % 2 == 1)
        assert exhaustive_optimum(problem) == every_order_optimum(problem), seed


@pytest.mark.parametrize("seed", range(40))
def test_exhaustive_optimum_fits_and_one_less_is_proven_infeasible(seed):
    problem = random_problem(seed, 3 + seed % 4, aligned=seed % 3 == 0)
    optimum = exhaustive_optimum(problem)
    check(problem, canonical.fit(problem, optimum, threads=1), optimum)
    below = canonical.fit(problem, optimum - 1, threads=1)
    assert below.status == "infeasible" and below.offsets is None


def test_every_order_alone_is_complete():
    for seed in range(12):
        problem = random_problem(100 + seed, 6)
        optimum = exhaustive_optimum(problem)
        for order in canonical.KEYS:
            race = canonical.Race(problem, optimum - 1, orders=(order,), sweeps=())
            race.start(1, None)
            canonical.wait(race, None, None)
            assert race.result().status == "infeasible", order
            race = canonical.Race(problem, optimum, orders=(order,), sweeps=())
            race.start(1, None)
            canonical.wait(race, None, None)
            check(problem, race.result(), optimum)


def test_independent_time_blocks_and_two_threads():
    # two blocks of time that share nothing: decomposition solves them apart
    problem = Problem.from_arrays([4, 4, 8, 3, 5, 8], [0, 0, 1, 10, 10, 11],
                                  [2, 3, 3, 12, 13, 13])
    verdict = canonical.fit(problem, 16, threads=2)
    check(problem, verdict, 16)
    assert canonical.fit(problem, 15, threads=2).status == "infeasible"


def test_deterministic_node_budget_repeats_itself():
    problem = random_problem(7, 7)
    optimum = exhaustive_optimum(problem)
    first = canonical.fit(problem, optimum, threads=1, node_budget=10_000)
    again = canonical.fit(problem, optimum, threads=1, node_budget=10_000)
    assert first.status == again.status == "feasible"
    assert first.offsets.tolist() == again.offsets.tolist()
    assert first.stats["nodes"] == again.stats["nodes"]


def test_stop_event_ends_a_hopeless_search():
    # 60 unit buffers live together, capacity 59: the floors prove it at once, so to
    # test stopping, take a problem the search cannot settle quickly: many equal buffers
    rng = np.random.default_rng(3)
    n = 300
    starts = rng.integers(0, 200, n)
    problem = Problem.from_arrays(rng.integers(1, 1000, n), starts,
                                  starts + rng.integers(1, 60, n))
    stop = threading.Event()
    stop.set()
    verdict = canonical.fit(problem, 1, threads=1, stop=stop)
    assert verdict.status in ("unknown", "infeasible")


def test_refuses_problems_it_cannot_model():
    problem = Problem.from_arrays([4, 4], [0, 0], [1, 1], pinned=[0, -1])
    assert not canonical.plain(problem)
    with pytest.raises(ValueError, match="pinned"):
        canonical.fit(problem, 8)


@pytest.mark.parametrize("deterministic", [False, True])
def test_descend_reaches_the_exhaustive_optimum_and_proves_it(deterministic):
    for seed in range(8):
        problem = random_problem(200 + seed, 6, aligned=seed % 2 == 0)
        optimum = exhaustive_optimum(problem)
        floors = []
        outcome = canonical.descend(problem, lower_bound(problem), None, seconds=30, threads=1,
                                    deterministic=deterministic, on_floor=floors.append)
        assert outcome.status == "optimal"
        assert int((outcome.offsets + problem.sizes).max()) == optimum == outcome.bound
        plan = Plan.from_offsets(problem, outcome.offsets, planner="canonical")
        assert validate(problem, plan) == []
        assert all(f <= optimum for f in floors)


def test_descend_without_a_layout_starts_from_the_aligned_stack():
    """Aligned buffers may not fit in the sum of their sizes: the first dive must still fit."""
    from memplan import Buffer, plan_with

    problem = Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                       Buffer("c", 2, 0, 3)])  # live load 8; a, b at 0 and 4: c fits no hole
    outcome = canonical.descend(problem, lower_bound(problem), None, seconds=10, threads=1)
    assert outcome.status == "optimal" and int((outcome.offsets + problem.sizes).max()) == 9
    plan = plan_with("exact", problem)
    assert (plan.status, plan.arena_size, plan.best_bound) == ("optimal", 9, 9)
    assert validate(problem, plan) == []


def test_fitting_a_csv_from_the_command_line_never_imports_cp_sat(tmp_path):
    # importing CP-SAT (and pandas with it) costs about a second: the canonical search
    # settles this fit before CP-SAT is needed, so the command must not pay for it
    import subprocess
    import sys

    from memplan.formats.minimalloc_csv import write_csv

    problem = random_problem(5, 6)
    optimum = exhaustive_optimum(problem)
    path = tmp_path / f"p.{optimum}.csv"
    write_csv(path, problem)
    script = ("import sys; from memplan.cli import main; code = main(['solve', sys.argv[1], "
              "'--csv', sys.argv[2], '--quiet']); "
              "print(code, 'ortools' in sys.modules, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "out.csv")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["0", "False", "False"], done.stderr[-2000:]
    assert (tmp_path / "out.csv").is_file()


@pytest.mark.parametrize("canonical_on", [True, False])
def test_exact_planner_with_and_without_the_canonical_search_agree(canonical_on):
    from memplan import plan_with

    for seed in range(4):
        problem = random_problem(300 + seed, 6)
        optimum = exhaustive_optimum(problem)
        for capacity, fits in ((optimum, True), (optimum - 1, False)):
            fit = problem.replace(capacity=capacity)
            plan = plan_with("exact", fit, time_limit=20, canonical=canonical_on)
            expected = ("feasible", "optimal") if fits else ("infeasible",)
            assert plan.status in expected, (seed, capacity, plan.status)
            violations = validate(fit, plan)
            assert [v for v in violations if fits or v.kind != "capacity"] == []
            assert fits or plan.best_bound == optimum
        plan = plan_with("exact", problem, time_limit=20, canonical=canonical_on)
        assert plan.status == "optimal" and plan.arena_size == optimum


def test_descend_starts_above_the_sum_of_sizes_when_alignment_needs_it():
    # live load 8 = the sum of the sizes, optimum 9: a and b (4-aligned) overlap at step 1
    problem = Problem.from_arrays([3, 3, 2], [0, 1, 0], [2, 3, 3], alignments=[4, 4, 1])
    outcome = canonical.descend(problem, lower_bound(problem), None, seconds=10, threads=1)
    assert outcome.status == "optimal" and outcome.bound == 9
    assert int((outcome.offsets + problem.sizes).max()) == 9
