"""The live-load layout experiments (`benchmarks.live_load_search`) against brute force.

On tiny random problems (exhaustive optimum from `tests.test_canonical`), the
restarts find a layout at the optimum and prove the height below it infeasible
(the kernel's search is complete when a restart ends), and the packed-area
search, started from the stacked layout, never returns an invalid layout and
finds one at the optimum. Correctness only, never speed.
"""

from __future__ import annotations

import pytest

from benchmarks.live_load_search import packed, restarts
from memplan import Plan, validate
from memplan.solver import canonical
from tests.test_canonical import exhaustive_optimum, random_problem

pytestmark = pytest.mark.skipif(not canonical.available(),
                                reason="the compiled kernel is not built (no C compiler)")


def valid_at(problem, layout, height) -> bool:
    plan = Plan.from_offsets(problem, layout, planner="test")
    return not validate(problem, plan) and plan.arena_size <= height


@pytest.mark.parametrize("seed", range(12))
def test_restarts_settle_tiny_problems_at_their_optimum(seed):
    problem = random_problem(900 + seed, 4 + seed % 3)
    optimum = exhaustive_optimum(problem)
    found = restarts(problem, optimum, seconds=10, per=5, seed=seed)
    assert found.layout is not None and valid_at(problem, found.layout, optimum)
    below = restarts(problem, optimum - 1, seconds=10, per=5, seed=seed)
    assert below.layout is None and below.proven_infeasible


@pytest.mark.parametrize("seed", range(8))
def test_packed_search_reaches_the_optimum_with_valid_layouts(seed):
    problem = random_problem(950 + seed, 4 + seed % 3)
    optimum = exhaustive_optimum(problem)
    found = packed(problem, optimum, canonical.stacked(problem), seconds=20, seed=seed)
    assert found.layout is not None and valid_at(problem, found.layout, optimum)
    assert found.stats["missing"] == 0
    below = packed(problem, optimum - 1, canonical.stacked(problem), seconds=1, seed=seed)
    assert below.layout is None and below.stats["missing"] > 0
