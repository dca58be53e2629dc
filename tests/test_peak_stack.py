"""The ``peak_stack`` planner: a stack at a high-load step, each side swept away from it.

Correctness: every plan through the validator, with every feature of the
vocabulary, the compiled sweep and the free list in Python alike; the cut step
holds exactly its live load; a limit already past still gives a plan. How good
at 10^5-10^6 buffers: BENCHMARKS.md.
"""

import random

import numpy as np
import pytest

from benchmarks.generate import network_like
from memplan import Alias, Buffer, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.groups import alias_units
from memplan.heuristics import compiled_place
from memplan.heuristics.peak_stack import load_peaks, stack_offsets
from memplan.heuristics.time_sweep import spans
from memplan.heuristics.units import Units


def fragmented() -> Problem:
    """The time sweep puts ``c`` above ``b`` and leaves ``a`` no room below; the stack at
    step 5 (``a`` and ``c``, the peak: 5 bytes) has ``b`` under ``c`` before it::

        time sweep           peak_stack
        7 +------+           5 +---+--+
          |  a   |             | c    |
        4 +---+--+           3 +---+--+
          | c    |             |b |a |
        2 +--+---+             |  |  |
          |b |               0 +--+---+
        0 +--+                 1  4 5 6
          1  4 5 6
    """
    return Problem([Buffer("a", 3, 5, 6), Buffer("b", 2, 1, 5), Buffer("c", 2, 4, 6)],
                   name="fragmented")


def featured(seed: int, scale: int = 1) -> Problem:
    """Random lifetimes, a few long-lived, with alignments, pins, mandatory and optional
    aliases and explicit conflicts; the schedule ``scale`` times longer."""
    rng = random.Random(seed)
    horizon = rng.randint(3, 30) * scale
    buffers = []
    for i in range(rng.randint(1, 40)):
        start = rng.randint(0, horizon - 1)
        length = rng.randint(1, horizon) if rng.random() < 0.2 else rng.randint(1, 3)
        buffers.append(Buffer(f"b{i}", rng.choice((1, 3, 8, 24, 40, 64)), start,
                              min(horizon, start + length),
                              alignment=rng.choice((1, 1, 2, 4, 8, 16)),
                              offset=64 * i if rng.random() < 0.1 else None))
    names = [b.id for b in buffers]
    aliases, conflicts = [], []
    for _ in range(rng.randint(0, 4) if len(names) > 1 else 0):
        a, b = rng.sample(names, 2)
        if rng.random() < 0.5:
            aliases.append(Alias(a, b, rng.choice((0, 16, 32)), optional=rng.random() < 0.5))
        else:
            conflicts.append((a, b))
    problem = Problem(buffers, aliases=aliases, conflicts=conflicts, name=f"featured-{seed}")
    alias_units(problem)  # a pin may put an alias group below 0: ProblemError
    return problem


def test_the_stack_at_the_peak_meets_the_bound_where_the_time_sweep_does_not():
    problem = fragmented()
    assert lower_bound(problem) == 5
    assert plan_with("time_sweep", problem).arena_size == 7
    plan = plan_with("peak_stack", problem)
    assert validate(problem, plan) == []
    assert plan.arena_size == 5
    assert plan.offsets.tolist() == [0, 0, 3]  # a, b, c
    assert plan.stats["cut_step"] == 5


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("placement", ["both", "best_fit", "first_fit"])
def test_plans_are_valid_with_every_feature(monkeypatch, compiled, placement):
    if not compiled:  # the sweeps in Python (the extension not built)
        monkeypatch.setattr(compiled_place, "available", lambda: False)
    assert compiled_place.available() == compiled
    checked = 0
    for seed in range(150):
        try:
            problem = featured(seed)
        except ProblemError:
            continue
        plan = plan_with("peak_stack", problem, placement=placement)
        assert validate(problem, plan) == [], problem.name
        assert plan.arena_size >= lower_bound(problem)
        checked += 1
    assert checked > 100


def test_the_compiled_sweeps_and_the_free_lists_give_the_same_plan(monkeypatch):
    problem = network_like(3000, 4)
    units = Units.build(problem, pairs=False)
    compiled, stats = stack_offsets(units)
    monkeypatch.setattr(compiled_place, "available", lambda: False)
    python, python_stats = stack_offsets(units)
    assert compiled.tolist() == python.tolist()
    assert stats == python_stats


def test_the_cut_step_holds_exactly_its_live_load():
    problem = network_like(2000, 3, alignment=1)
    plan = plan_with("peak_stack", problem)
    assert validate(problem, plan) == []
    step = plan.stats["cut_step"]
    live = (problem.starts <= step) & (problem.ends > step)
    tops = plan.offsets + problem.sizes
    assert tops[live].max() == problem.sizes[live].sum()


def test_load_peaks_are_the_highest_steps_apart_and_read_no_schedule_long_array():
    # steps near 10^15: a load array over the schedule would not fit in memory
    far = 10 ** 15
    problem = Problem([Buffer("a", 5, far, far + 2), Buffer("b", 1, far + 1, far + 3),
                       Buffer("c", 4, 0, 1), Buffer("d", 9, 2 * far, 2 * far + 1)])
    units = Units.build(problem, pairs=False)
    start, end = spans(units)
    assert load_peaks(units, start, end, 1) == [2 * far]
    assert load_peaks(units, start, end, 2) == [2 * far, far + 1]
    # eight event times, a sixth of them apart: neighbours are allowed
    assert load_peaks(units, start, end, 3) == [2 * far, far + 1, far]
    plan = plan_with("peak_stack", problem)
    assert validate(problem, plan) == [] and plan.arena_size == 9


def test_a_limit_already_past_still_gives_a_plan_from_one_try():
    problem = network_like(3000, 5)
    units = Units.build(problem, pairs=False)
    offsets, stats = stack_offsets(units, deadline=0.0)  # long past
    assert stats["tries"] == 1 and stats["cut"] > 0
    plan = plan_with("peak_stack", problem, time_limit=0)
    assert validate(problem, plan) == []
    assert np.array_equal(plan.offsets, offsets)


def test_an_unknown_placement_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown placement 'worst_fit'"):
        stack_offsets(Units.build(fragmented(), pairs=False), "worst_fit")


def test_only_pinned_buffers_stay_where_they_are():
    problem = Problem([Buffer("x", 8, 0, 3, offset=16), Buffer("y", 4, 1, 2, offset=0)])
    plan = plan_with("peak_stack", problem)
    assert plan.offsets.tolist() == [16, 0] and plan.stats["tries"] == 0


def test_best_tries_the_stack_right_after_the_ceiling_on_large_problems():
    problem = network_like(1200, 10)
    plan = plan_with("best", problem, breadth_first_buffers=1000, time_limit=60,
                     long_first=False)  # else just before the stack (test_long_first)
    assert validate(problem, plan) == []
    assert list(plan.stats["arenas"])[2] == "peak_stack"
    assert plan.arena_size <= plan.stats["arenas"]["peak_stack"]
