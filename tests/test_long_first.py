"""The ``long_first`` planner: the long-lived units planned first, the short ones in rooms.

Correctness: every plan through the validator, with every feature of the
vocabulary; the stretches are cut where the short units alive across weigh
least; ``best`` runs it on large problems with few long units. How good at
10^5-10^6 buffers: BENCHMARKS.md.
"""

import numpy as np
import pytest

from benchmarks.generate import network_like
from memplan import Buffer, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.errors import PairLimitError
from memplan.formats import minimalloc_csv
from memplan.heuristics.long_first import (
    MIN_SPAN,
    first_offsets,
    long_units,
    plan_small,
    stretch_edges,
    takes,
)
from memplan.heuristics.time_sweep import spans
from memplan.heuristics.units import Units
from memplan.plan import Plan
from memplan.solver import canonical_planner
from memplan.solver.canonical_planner import CanonicalOptions
from tests.conftest import CHALLENGING
from tests.test_peak_stack import featured


def test_plans_are_valid_with_every_feature():
    checked = with_long = 0
    for seed in range(150):
        try:
            problem = featured(seed, scale=MIN_SPAN // 4)  # long units live over MIN_SPAN
        except ProblemError:
            continue
        plan = plan_with("long_first", problem)
        assert validate(problem, plan) == [], problem.name
        assert plan.arena_size >= lower_bound(problem)
        checked += 1
        with_long += plan.stats["long_units"] > 0
    assert checked > 100 and with_long > 50


def test_it_beats_the_time_sweep_where_the_long_units_fragment_it():
    problem = network_like(3000, 2)
    plan = plan_with("long_first", problem)
    assert validate(problem, plan) == []
    assert plan.stats["long_units"] == 2 and plan.stats["rooms"] > 0
    assert plan.stats["tightened"] >= 1  # a room planned again by best
    assert plan.arena_size < plan_with("time_sweep", problem).arena_size


def test_a_stretch_ends_where_the_short_units_alive_across_weigh_least():
    """``L`` starts at 100; ``s1`` (8 bytes) and ``s2`` (1 byte) are alive across 98 and 99;
    only ``s3`` (2 bytes) across 97, nothing across 95::

        s1 [96, 101)  s2 [97, 100)  s3 [94, 98)  L [100, 300)
    """
    problem = Problem([Buffer("s1", 8, 96, 101), Buffer("s2", 1, 97, 100),
                       Buffer("s3", 2, 94, 98), Buffer("L", 4, 100, 300)])
    units = Units.build(problem, pairs=False)
    start, end = spans(units)
    longs = long_units(units, start, end)
    assert longs.tolist() == [3]
    shorts = np.array([0, 1, 2])
    # the lightest event time up to MIN_SPAN steps before 100: 94 (nothing alive across)
    assert stretch_edges(units, start, end, longs, shorts).tolist() == [0, 94, 300]
    plan = plan_with("long_first", problem)
    assert validate(problem, plan) == []
    assert plan.stats["crossing_units"] == 0


def test_it_is_taken_only_with_few_long_units():
    short = [Buffer(f"s{i}", 4, i, i + 2) for i in range(300)]
    assert not takes(Units.build(Problem(short), pairs=False))  # none
    one = [Buffer("L0", 4, 0, 200)]
    assert takes(Units.build(Problem(short + one), pairs=False))  # 1 in 301
    many = [Buffer(f"L{i}", 4, i, 200 + i) for i in range(4)]
    assert not takes(Units.build(Problem(short + many), pairs=False))  # 4 in 304: over 1 %


def test_only_pinned_buffers_stay_where_they_are():
    problem = Problem([Buffer("x", 8, 0, 3, offset=16), Buffer("y", 4, 1, 2, offset=0)])
    offsets, stats = first_offsets(Units.build(problem, pairs=False))
    assert offsets.tolist() == [16, 0] and stats["long_units"] == 0


def test_best_tries_it_before_the_stack_on_large_problems_with_few_long_units():
    problem = network_like(5000, 0)  # the stack does not meet the bound there
    plan = plan_with("best", problem, breadth_first_buffers=1000, search_evaluations=0,
                     orders=())  # no order x placement pass: the ceiling ends them
    assert validate(problem, plan) == []
    names = list(plan.stats["arenas"])
    assert names.index("peak_stack") == names.index("long_first") + 1
    assert plan.arena_size <= plan.stats["arenas"]["long_first"]
    off = plan_with("best", problem, breadth_first_buffers=1000, search_evaluations=0, orders=(),
                    long_first=False)
    assert "long_first" not in off.stats["arenas"]


def test_a_small_problem_over_max_pairs_is_refused_by_count():
    units = Units.build(network_like(3000, 2), pairs=False)
    with pytest.raises(PairLimitError, match="long_first: the small problem has"):
        first_offsets(units, max_pairs=1)
    assert first_offsets(units, max_pairs=10 ** 6)[1]["long_units"] == 2


def test_a_limit_already_past_stacks_the_small_problem_and_the_rooms():
    problem = network_like(3000, 2)
    offsets, stats = first_offsets(Units.build(problem, pairs=False), deadline=0.0)
    assert stats["cut"] > 0
    assert validate(problem, Plan.from_offsets(problem, offsets, planner="cut")) == []
    plan = plan_with("long_first", problem, time_limit=0)
    assert validate(problem, plan) == [] and plan.stats["cut"] > 0


def test_the_small_problem_gets_the_descent_past_its_default_pair_limit(monkeypatch):
    """A small problem the descent's own default refuses (here every one: `max_pairs` 0, as
    1.59 M pairs at 10^6 network-like buffers are past its million): ``best``'s passes and
    order search, the plan before, stay above the bound; `plan_small` gives it the descent
    up to `SMALL_PAIRS` and reaches the bound."""
    problem = minimalloc_csv.read_problem(CHALLENGING / "C.1048576.csv", capacity=None)
    monkeypatch.setattr(canonical_planner, "DEFAULTS", CanonicalOptions(max_pairs=0))
    before = plan_with("best", problem, cpu=2, long_first=False, descent=1.0)
    assert before.stats["winner"] != "canonical"
    assert validate(problem, before) == [] and before.arena_size > lower_bound(problem)
    found, probes = plan_small(problem, None, 2.0)
    assert validate(problem, found) == [] and found.planner == "canonical"
    assert found.arena_size == lower_bound(problem) and probes >= 0
