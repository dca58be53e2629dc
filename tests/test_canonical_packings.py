"""The canonical search on perfect packings: capacity = the live load, no byte to spare.

Perfect packings (every time step exactly full) are where the search's cover
check prunes most: at the lowest free offset of a section with no byte to
spare, some unplaced buffer must start exactly there. These tests check that
pruning against the exhaustive optimum of `tests.test_canonical` on small
tilings and on tilings changed by one byte or one step (which may no longer
pack at their live load), and that a tiling of a hundred buffers settles in
few nodes.

    address                      a tiling of time x capacity (here 6 tiles);
      ^ +------+---------+       a pinwheel splits a tile into four blades
      | |  d   |    e    |       around a centre, so that no straight cut
      | +---+--+----+----+       crosses it
      | | b |   c   | f  |
      | +---+-------+    |
      | |     a     |    |
      +-+-----------+----+--> time
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.generate import pinwheel
from benchmarks.peers import reversed_problem
from memplan import Problem, lower_bound
from memplan.solver import canonical

from .test_canonical import check, exhaustive_optimum

pytestmark = pytest.mark.skipif(not canonical.available(),
                                reason="the compiled kernel is not built (no C compiler)")


def _split(tile, rng):
    """Two tiles cut across time or address, or a five-piece pinwheel."""
    start, end, offset, size = tile
    width = end - start
    if width >= 3 and size >= 3 and rng.random() < 0.4:
        p = int(rng.integers(1, (width - 1) // 2 + 1))
        q = int(rng.integers(1, (size - 1) // 2 + 1))
        return [(start, end - p, offset, q), (end - p, end, offset, size - q),
                (start + p, end, offset + size - q, q), (start, start + p, offset + q, size - q),
                (start + p, end - p, offset + q, size - 2 * q)]
    if width >= 2 and (size < 2 or rng.random() < 0.5):
        cut = int(rng.integers(start + 1, end))
        return [(start, cut, offset, size), (cut, end, offset, size)]
    cut = int(rng.integers(1, size))
    return [(start, end, offset, cut), (start, end, offset + cut, size - cut)]


def tiling(seed: int, n: int, steps: int = 12, capacity: int = 24) -> Problem:
    """About ``n`` buffers that tile ``steps`` x ``capacity`` exactly (random cuts)."""
    rng = np.random.default_rng(seed)
    tiles = [(0, steps, 0, capacity)]
    while len(tiles) < n:
        able = [i for i, (s, e, _, z) in enumerate(tiles) if e - s >= 2 or z >= 2]
        if not able:
            break
        tiles += _split(tiles.pop(int(rng.choice(able))), rng)
    order = rng.permutation(len(tiles))
    starts, ends, _, sizes = (np.array([tiles[i][k] for i in order]) for k in range(4))
    return Problem.from_arrays(sizes, starts, ends, capacity=capacity, name=f"tiling{seed}")


def nudged(problem: Problem, rng) -> Problem:
    """The problem with one buffer one byte larger or smaller, or one step longer or
    shorter, at its new live load: it may or may not pack there."""
    sizes, starts, ends = problem.sizes.copy(), problem.starts.copy(), problem.ends.copy()
    b = int(rng.integers(len(problem)))
    change = int(rng.integers(4))
    if change == 0:
        sizes[b] += 1
    elif change == 1 and sizes[b] > 1:
        sizes[b] -= 1
    elif change == 2:
        ends[b] += 1
    elif ends[b] - starts[b] > 1:
        ends[b] -= 1
    nudge = Problem.from_arrays(sizes, starts, ends)
    return nudge.replace(capacity=lower_bound(nudge))


@pytest.mark.parametrize("seed", range(30))
def test_small_tilings_fit_at_their_capacity_in_every_order(seed):
    problem = tiling(seed, 4 + seed % 5)
    for order in canonical.KEYS:
        race = canonical.Race(problem, problem.capacity, orders=(order,), sweeps=())
        race.start(1, None)
        canonical.wait(race, None, None)
        check(problem, race.result(), problem.capacity)


@pytest.mark.parametrize("seed", range(60))
def test_nudged_tilings_agree_with_the_exhaustive_optimum(seed):
    rng = np.random.default_rng(1000 + seed)
    problem = nudged(tiling(seed, 4 + seed % 4, steps=8, capacity=12), rng)
    optimum = exhaustive_optimum(problem)
    verdict = canonical.fit(problem, problem.capacity, threads=1)
    assert verdict.status == ("feasible" if optimum <= problem.capacity else "infeasible")
    check(problem, canonical.fit(problem, optimum, threads=1), optimum)
    assert canonical.fit(problem, optimum - 1, threads=1).status == "infeasible"


@pytest.mark.parametrize("seed", range(20))
def test_aligned_tight_problems_agree_with_the_exhaustive_optimum(seed):
    # even sizes on a 2-aligned grid, a few odd ones: sections often have no byte to spare
    rng = np.random.default_rng(2000 + seed)
    base = tiling(seed, 5 + seed % 3, steps=8, capacity=16)
    alignments = rng.choice([1, 2, 4], len(base))
    problem = Problem.from_arrays(base.sizes, base.starts, base.ends, alignments=alignments)
    optimum = exhaustive_optimum(problem)
    check(problem, canonical.fit(problem, optimum, threads=1), optimum)
    assert canonical.fit(problem, optimum - 1, threads=1).status == "infeasible"


def test_a_tiling_of_a_hundred_buffers_settles_in_few_nodes():
    # without the cover check, pinwheel tilings of this size took 10^5 to 10^6 nodes
    problem = tiling(7, 100, steps=400, capacity=4000)
    verdict = canonical.fit(problem, problem.capacity, threads=1)
    check(problem, verdict, problem.capacity)
    assert verdict.stats["nodes"] < 20 * len(problem)


@pytest.mark.parametrize("reverse", [False, True])
def test_nested_pinwheels_settle_in_the_first_sweep(reverse):
    # in lifetime order alone, 501 pieces took over 400,000 nodes and 60 s were not enough
    problem = pinwheel(501, 3)
    if reverse:
        problem = reversed_problem(problem)
    verdict = canonical.fit(problem, problem.capacity, threads=1, node_budget=4 * len(problem))
    check(problem, verdict, problem.capacity)
    assert verdict.stats["settled_by"][0] in canonical.SWEEPS


def test_a_race_is_slow_only_after_its_first_cpu_second_under_its_pace():
    race = canonical.Race(tiling(1, 6), 24)
    assert race.cpu() == 0 and not race.slow()  # not started
    spent = [2 * canonical.PACE_AFTER_SECONDS]  # CPU seconds of its threads, not wall time
    race.cpu = lambda: spent[0]
    assert race.slow()
    race.nodes = 4 * canonical.HEAD_START_PACE * canonical.PACE_AFTER_SECONDS
    assert not race.slow()
    spent[0], race.nodes = 0.5 * canonical.PACE_AFTER_SECONDS, 0
    assert not race.slow()  # under a CPU second: too soon to judge


@pytest.mark.parametrize("order", [None, "start"])
def test_the_tilings_benchmark_plans_and_checks_a_reversed_pinwheel(order):
    pytest.importorskip("omnimalloc")
    from benchmarks import tilings

    row = tilings.one("pinwheel", 101, 1, "reversed", 10.0, order)
    assert row["problem"] == "pinwheel-101-s1-reversed"
    assert row["status"] == ("optimal" if order is None else "feasible")
