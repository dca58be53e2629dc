"""The ``long_lived`` planner: the band of long-lived units, and the sweep around it.

Correctness: every plan through the validator; on problems of long-lived units
only, the band alone meets the live-load bound (it is built to); the rest never
lands where an output will be born. How good on decoders: BENCHMARKS.md.
"""

import random

import numpy as np
import pytest

from benchmarks.large import decoder_model
from memplan import Alias, Buffer, Problem, lower_bound, plan_with, validate
from memplan.onnx.onnx import from_onnx


def caches() -> Problem:
    """KV-cache-like: inputs of 64 bytes die one by one while outputs of 66 are born::

        in_i  [0, 2i + 2)     out_i [2i + 1, 9)     a transient per step
    """
    buffers = [Buffer("x", 8, 0, 9)]  # live throughout: the bottom of the band
    for i in range(4):
        buffers += [Buffer(f"in{i}", 64, 0, 2 * i + 2), Buffer(f"out{i}", 66, 2 * i + 1, 9),
                    Buffer(f"t{i}", 16, 2 * i + 1, 2 * i + 2)]
    return Problem(buffers, name="caches")


def long_lived_only(seed: int) -> Problem:
    """Random inputs (live from step 0), outputs (live to the last step) and always-live
    buffers, alignment 1: the band alone is optimal."""
    rng = random.Random(seed)
    horizon = rng.randint(2, 30)
    buffers = []
    for i in range(rng.randint(1, 40)):
        kind = rng.choice("ioa")
        size = rng.randint(1, 100)
        if kind == "i":
            buffers.append(Buffer(f"b{i}", size, 0, rng.randint(1, horizon - 1)))
        elif kind == "o":
            buffers.append(Buffer(f"b{i}", size, rng.randint(1, horizon - 1), horizon))
        else:
            buffers.append(Buffer(f"b{i}", size, 0, horizon))
    return Problem(buffers, name=f"long-lived-{seed}")


def featured(seed: int) -> Problem:
    """Long-lived units among transients, with alignments, pins, mandatory and optional
    aliases (in place), and explicit conflicts."""
    rng = random.Random(seed)
    horizon = rng.randint(4, 20)
    buffers, aliases, conflicts = [], [], []
    for i in range(rng.randint(4, 40)):
        kind = rng.random()
        if kind < 0.25:
            start, end = 0, rng.randint(1, horizon - 1)
        elif kind < 0.5:
            start, end = rng.randint(1, horizon - 1), horizon
        else:
            start = rng.randint(0, horizon - 1)
            end = rng.randint(start + 1, horizon)
        buffers.append(Buffer(f"b{i}", rng.randint(1, 200), start, end,
                              alignment=rng.choice((1, 1, 4, 8, 64))))
    if rng.random() < 0.3:
        i = rng.randrange(len(buffers))
        b = buffers[i]
        buffers[i] = Buffer(b.id, b.size, b.start, b.end, alignment=b.alignment,
                            offset=b.alignment * rng.randint(0, 20))
    by_id = {b.id: b for b in buffers}
    for _ in range(rng.randint(0, 6)):
        a, c = rng.sample(sorted(by_id), 2)
        if rng.random() < 0.5:  # in place: c starts where a ends, same size and alignment
            if by_id[a].end - 1 == by_id[c].start and by_id[a].offset is None \
                    and by_id[c].offset is None:
                aliases.append(Alias(a, c, 0, optional=True))
        else:
            conflicts.append((a, c))
    view = Buffer("view", 32, 0, horizon, alignment=8)
    part = Buffer("part", 16, 1, horizon, alignment=8)  # a mandatory group, long-lived
    buffers += [view, part]
    aliases.append(Alias("view", "part", 8))
    problem = Problem(buffers, aliases=aliases, conflicts=conflicts, name=f"featured-{seed}")
    return problem


def test_caches_meet_the_bound_where_the_time_sweep_does_not():
    problem = caches()
    plan = plan_with("long_lived", problem)
    assert validate(problem, plan) == []
    assert plan.arena_size == lower_bound(problem) == plan.best_bound
    assert plan.status == "optimal"
    offsets = dict(zip(problem.ids, plan.offsets.tolist(), strict=True))
    assert [offsets[f"out{i}"] for i in range(4)] == [8, 74, 140, 206]  # stacked by birth
    assert plan_with("time_sweep", problem).arena_size > plan.arena_size


@pytest.mark.parametrize("seed", range(40))
def test_the_band_alone_meets_the_live_load_bound(seed):
    problem = long_lived_only(seed)
    plan = plan_with("long_lived", problem)
    assert validate(problem, plan) == []
    assert plan.arena_size == lower_bound(problem), problem.buffers


@pytest.mark.parametrize("placement", ["best_fit", "first_fit"])
@pytest.mark.parametrize("seed", range(60))
def test_plans_are_valid_with_every_feature(seed, placement):
    problem = featured(seed)
    plan = plan_with("long_lived", problem, placement=placement)
    assert validate(problem, plan) == [], problem.name
    assert plan.arena_size >= lower_bound(problem)
    assert plan.stats["cut"] == 0


def test_a_decoder_takes_its_in_place_aliases_and_is_valid():
    problem = from_onnx(decoder_model(3, 3, seed=1), alignment=64, name="decoder-3x3")
    plan = plan_with("long_lived", problem)
    assert validate(problem, plan) == []
    assert plan.stats["optional_aliases_taken"] > 0
    assert plan.stats["band_units"] >= 2 * 3 * 3 * 2  # the caches: past and updated
    best = plan_with("best", problem)
    assert best.stats["arenas"]["long_lived"] == plan.arena_size
    assert validate(problem, best) == []


def test_out_of_time_it_stacks_the_rest_and_says_so():
    problem = from_onnx(decoder_model(2, 2, seed=0), alignment=64, name="decoder-2x2")
    plan = plan_with("long_lived", problem, time_limit=0)
    assert validate(problem, plan) == []
    assert plan.stats["cut"] > 0


def test_a_problem_without_long_lived_units_is_swept():
    problem = Problem([Buffer(f"t{i}", 8 + i, i, i + 2) for i in range(1, 10)] +
                      [Buffer("first", 4, 0, 1), Buffer("last", 4, 10, 11)], name="chain")
    plan = plan_with("long_lived", problem)
    assert validate(problem, plan) == []
    assert np.all(plan.offsets >= 0)
