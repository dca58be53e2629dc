"""The order search in C (``anneal``, and ``best``'s search): valid plans, seeded repeats,
the decode it keeps equal to the Python placer's, Ctrl-C, and the Python fallback.

Every plan goes through the independent validator; no assert on wall time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from benchmarks.traces import inference_trace, training_step_trace
from memplan import Buffer, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.formats import minimalloc_csv
from memplan.heuristics import anneal
from memplan.heuristics.placement import Placer
from memplan.heuristics.units import Units
from tests.conftest import CHALLENGING

needs_kernel = pytest.mark.skipif(anneal._search_kernel is None,
                                  reason="the compiled search is not built")


def challenging(name: str) -> Problem:
    return minimalloc_csv.read_problem(CHALLENGING / f"{name}.1048576.csv", capacity=None)


@st.composite
def searchable(draw) -> Problem:
    """Problems the compiled search takes: alignments, pins, conflicts, mandatory aliases."""
    n = draw(st.integers(2, 25))
    buffers = []
    for i in range(n):
        start, alignment = draw(st.integers(0, 10)), draw(st.sampled_from([1, 2, 8]))
        pinned = alignment * draw(st.integers(0, 8)) if draw(st.integers(0, 9)) == 0 else None
        buffers.append(Buffer(f"b{i}", draw(st.integers(1, 40)), start,
                              start + draw(st.integers(1, 6)), alignment=alignment,
                              offset=pinned))
    ids = [b.id for b in buffers]
    conflicts = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)),
                              max_size=3))
    try:
        problem = Problem(buffers, conflicts=conflicts)
        Placer(Units.build(problem)).place([])  # pins that collide: not a problem
        return problem
    except ProblemError:
        assume(False)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(searchable(), st.integers(0, 3))
def test_searched_plans_are_valid_and_never_worse_than_their_start(problem, seed):
    plan = plan_with("anneal", problem, seed=seed, evaluations=200)
    assert validate(problem, plan) == []
    assert lower_bound(problem) <= plan.arena_size <= min(plan.stats["start_arenas"])


@needs_kernel
def test_same_seed_and_budget_same_plan_and_the_best_order_decodes_to_it():
    problem = challenging("B")
    first = plan_with("anneal", problem, seed=3, evaluations=600)
    again = plan_with("anneal", problem, seed=3, evaluations=600)
    assert first.offsets.tolist() == again.offsets.tolist()
    assert first.stats["evaluations"] == 600 and validate(problem, first) == []
    units = Units.build(problem)  # the kernel's suffix decodes agree with one whole pass
    starts = anneal.start_orders(units, None)
    chain = anneal._search_kernel.new(*anneal.kernel_columns(units), starts[1][1], 0,
                                      lower_bound(problem), 5)
    anneal._search_kernel.step(chain, 300, 0.0, -1.0, 0.0, 1.0, 0.002, 0.1, 100)
    bases, order = anneal._search_kernel.best(chain)
    offsets = units.offsets(np.frombuffer(bases, np.int64))
    assert offsets.tolist() == Placer(units).place(np.frombuffer(order, np.int64),
                                                   "first_fit").tolist()
    same = plan_with("best", problem, seed=3, search_evaluations=400)
    assert same.offsets.tolist() == plan_with("best", problem, seed=3,
                                              search_evaluations=400).offsets.tolist()


@needs_kernel
def test_the_search_uses_its_time_and_improves_on_the_passes():
    problem = challenging("A")
    plan = plan_with("best", problem, time_limit=1.0, descent=0)
    passes = [arena for name, arena in plan.stats["arenas"].items() if name != "anneal"]
    assert validate(problem, plan) == [] and plan.stats["evaluations"] > 0
    assert plan.arena_size <= min(passes) and plan.stats["arenas"]["anneal"] <= min(passes)
    assert plan.seconds < 60  # the search ends (loosely: the machine may be busy)


@needs_kernel
def test_ctrl_c_keeps_the_best_order_so_far(monkeypatch):
    problem = challenging("C")
    step, calls = anneal._search_kernel.step, []

    class Kernel:  # the compiled search, interrupted at its fourth slice
        new, best = anneal._search_kernel.new, anneal._search_kernel.best

        @staticmethod
        def step(*args):
            calls.append(args[1])
            if len(calls) == 6:
                raise KeyboardInterrupt
            return step(*args)

    monkeypatch.setattr(anneal, "_search_kernel", Kernel)
    plan = plan_with("best", problem, time_limit=30, descent=0)
    assert plan.stats["interrupted"] and validate(problem, plan) == []
    orders = [arena for name, arena in plan.stats["arenas"].items()  # the passes it starts
              if not name.startswith(("time_sweep", "long_lived", "peak_stack"))]  # from
    assert plan.stats["arenas"]["anneal"] <= min(orders)
    assert plan.arena_size == min(plan.stats["arenas"].values())


def test_without_the_compiled_search_python_climbs(monkeypatch):
    from memplan.heuristics import compiled_place

    monkeypatch.setattr(anneal, "_search_kernel", None)
    monkeypatch.setattr(compiled_place, "_kernel_place", None)
    problem = challenging("D")
    plan = plan_with("anneal", problem, time_limit=1.0)
    assert plan.planner == "anneal" and plan.stats["fallback"] == "hill_climb"
    assert validate(problem, plan) == []
    best = plan_with("best", problem, search_evaluations=5)
    assert validate(problem, best) == [] and "hill_climb" in best.stats["arenas"]


@needs_kernel
def test_training_traces_get_every_pass_without_pair_lists():
    problem = training_step_trace(3000, seed=2)
    plan = plan_with("best", problem, time_limit=20, max_pairs=1000, search_evaluations=3)
    assert validate(problem, plan) == [] and plan.stats["pairs"] > 1000
    assert "greedy_by_size" in plan.stats["arenas"] and not plan.stats["skipped"]


def test_traces_are_seeded_and_have_the_shape_asked():
    problem = training_step_trace(10_000, seed=1)
    assert 9_500 <= len(problem) <= 10_500
    assert training_step_trace(10_000, seed=1).sizes.tolist() == problem.sizes.tolist()
    lifetimes = problem.ends - problem.starts
    assert 4 <= np.median(lifetimes) <= 6
    assert (lifetimes > problem.horizon / 2).sum() >= 250  # weights, moments, checkpoints
    assert problem.sizes.max() >= 100 << 20
    assert 2_800 <= len(inference_trace(3_000)) <= 3_200
    state = training_step_trace(6_000, long_lived=500)  # more parameters: more state
    assert ((state.starts == 0) & (state.ends == state.horizon)).sum() == 3 * 500


@needs_kernel
def test_the_tree_of_placed_ends_places_as_the_placer_on_sparse_problems():
    from benchmarks.generate import network_like
    from memplan.heuristics.compiled_place import compiled_offsets
    from memplan.heuristics.order import order_units

    problem = network_like(2500, 4)  # over 2000 buffers, sparse: partners by the tree
    units = Units.build(problem)
    for order, placement in (("breadth", "best_fit"), ("size", "first_fit")):
        ordered = order_units(units, order)
        offsets, cut = compiled_offsets(Units.build(problem, pairs=False), ordered, placement)
        assert cut == 0
        assert offsets.tolist() == Placer(units).place(ordered, placement).tolist()


@needs_kernel
def test_a_problem_with_one_free_unit_ends_the_search_at_once():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3, offset=0)])
    for name in ("anneal", "best"):
        plan = plan_with(name, problem)  # no limit, no budget: nothing to move, no loop
        assert validate(problem, plan) == [] and plan.arena_size == 16
