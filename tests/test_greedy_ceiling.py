"""No plan larger than the cheapest greedy's, whatever the time limit.

`memplan.solve`, ``best`` and ``exact`` run ``greedy_by_size`` first, uncut by
any limit (milliseconds on these problems), and never return a larger plan; a
limit too short for the rest says so in ``stats["cut_short"]``. Before, a limit
of a millisecond left the plan of a pass cut at once: every buffer stacked.
"""

import pytest

import memplan
from benchmarks.generate import network_like
from memplan import Alias, Buffer, Problem, plan_with, validate
from memplan.plan import fits


def pinned_and_aliased() -> Problem:
    """A chain of 900 buffers with views (mandatory aliases), in-place writes (optional),
    pinned inputs and explicit conflicts."""
    buffers = [Buffer(f"t{i}", 64 * (1 + i % 7), i, i + 3 + i % 5, alignment=64,
                      offset=0 if i % 150 == 0 else None) for i in range(900)]
    aliases = [Alias(f"t{i}", f"t{i + 1}", 0) for i in range(3, 900, 40)] + \
        [Alias(f"t{i}", f"t{i + 1}", 0, optional=True) for i in range(20, 900, 40)]
    conflicts = [(f"t{i}", f"t{i + 30}") for i in range(5, 850, 60)]
    return Problem(buffers, aliases=aliases, conflicts=conflicts, name="pinned-aliased")


def capped(problem: Problem) -> Problem:
    """``problem`` with a capacity that its greedy_by_size plan meets."""
    return problem.replace(capacity=plan_with("greedy_by_size", problem).arena_size,
                           name=f"{problem.name}-capped")


PROBLEMS = [network_like(2000, 3), pinned_and_aliased(), capped(network_like(1500, 4))]


def planned(problem: Problem, limit: float) -> dict[str, memplan.Plan]:
    return {"solve": memplan.solve(problem, time_limit=limit),
            "solve from naive": memplan.solve(problem, time_limit=limit, planner="naive"),
            "heuristics only": memplan.solve(problem, time_limit=limit, exact=False,
                                             planner="first_fit"),
            "best": plan_with("best", problem, time_limit=limit),
            "exact": plan_with("exact", problem, time_limit=limit)}


@pytest.mark.parametrize("limit", [0, 0.001, 0.01])
@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_no_plan_is_larger_than_greedy_by_size(problem, limit):
    ceiling = plan_with("greedy_by_size", problem)
    assert validate(problem, ceiling) == []
    for name, plan in planned(problem, limit).items():
        assert [v for v in validate(problem, plan) if v.kind != "capacity"] == [], name
        assert plan.arena_size <= ceiling.arena_size, name
        assert fits(plan) or problem.capacity is None or not fits(ceiling), name


def test_a_search_cut_short_by_the_limit_says_so():
    problem = PROBLEMS[0]
    assert plan_with("best", problem, time_limit=0).stats["cut_short"]
    assert not plan_with("best", problem, time_limit=5, search_evaluations=0).stats["cut_short"]
    assert plan_with("exact", problem, time_limit=0).stats["cut_short"]
    assert memplan.solve(problem, time_limit=0).stats["cut_short"]
