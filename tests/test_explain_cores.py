"""Why a capacity cannot be met, on random problems: every reported set is infeasible alone,
and a set called minimal fits without any one of its members.

The problems mix what made cores go wrong before: mandatory alias groups wider
than their base buffer (a member at a positive delta past the base's end),
optional aliases, explicit conflicts, alignment. Feasible plans are checked
by the validator and by the brute-force pairwise checker of the fuzz tests;
"infeasible alone" by the lower bound or the exact planner.
"""

from __future__ import annotations

import numpy as np
import pytest

from memplan import Alias, Buffer, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.diagnosis.capacity_reason import subproblem
from memplan.diagnosis.explain import explain

from .test_fuzz import brute_force_violations

EXACT = dict(time_limit=120, threads=1)  # milliseconds when idle; the machine may be loaded


def random_problem(rng: np.random.Generator) -> Problem | None:
    n = int(rng.integers(3, 7))
    starts = rng.integers(0, 6, n)
    columns = zip(rng.integers(1, 13, n), starts, starts + rng.integers(1, 4, n),
                  rng.choice([1, 1, 2, 4, 8], n), strict=True)
    buffers = [Buffer(f"b{i}", *map(int, row[:3]), alignment=int(row[3]))
               for i, row in enumerate(columns)]
    ids = [b.id for b in buffers]
    aliases = [Alias(*rng.choice(ids, 2, replace=False).tolist(),
                     int(rng.choice([0, 1, 2, 4, 8])), bool(rng.integers(0, 2)))
               for _ in range(int(rng.integers(1, 4)))]
    conflicts = [tuple(rng.choice(ids, 2, replace=False).tolist())
                 for _ in range(int(rng.integers(0, 3)))]
    try:
        return Problem(buffers, aliases=aliases, conflicts=conflicts, name="random")
    except ProblemError:
        return None


def fits_alone(problem: Problem, members, capacity: int) -> bool:
    """A plan of the buffers ``members`` within ``capacity``, checked twice over."""
    alone = subproblem(problem, members, capacity)
    plan = plan_with("exact", alone, **EXACT)
    if plan.arena_size > capacity:
        return False
    assert validate(alone, plan) == [] and brute_force_violations(alone, plan) == []
    return True


def infeasible_alone(problem: Problem, members, capacity: int) -> bool:
    alone = subproblem(problem, members, capacity)
    if lower_bound(alone) > capacity:
        return True
    plan = plan_with("exact", alone, **EXACT)
    return plan.status == "infeasible" and plan.best_bound > capacity


def check_reason(problem: Problem, capacity: int) -> str:
    found = explain(problem, capacity=capacity, time_limit=120).capacity
    members = [problem.index(t.id) for t in found.tensors]
    if found.kind == "fits":
        assert fits_alone(problem, range(len(problem)), capacity)
    elif found.kind != "undecided":
        assert found.proven and infeasible_alone(problem, members, capacity), found
        if found.minimal:
            for dropped in members:
                rest = [i for i in members if i != dropped]
                assert fits_alone(problem, rest, capacity), (found, problem.ids[dropped])
    return found.kind


def reasons_checked(seed: int, reasons: int) -> tuple[dict[str, int], int]:
    """Check ``reasons`` capacity reasons on random problems (`check_reason`): a capacity
    below the live load, one below and one at the best heuristic plan's arena, per
    problem. Returns how many reasons of each kind, and how many problems had an alias
    group wider than its base. ``python -m benchmarks.full_checks`` runs 36."""
    rng = np.random.default_rng(seed)
    kinds: dict[str, int] = {}
    wide = 0
    while sum(kinds.values()) < reasons:
        problem = random_problem(rng)
        if problem is None:
            continue
        root, delta = problem.alias_groups
        tops = delta + problem.sizes
        wide += any(tops[i] > problem.sizes[root[i]] for i in range(len(problem)))
        best = plan_with("best", problem).arena_size
        for capacity in sorted({lower_bound(problem) - 1, best - 1, best}):
            if capacity > 0:
                kind = check_reason(problem, capacity)
                kinds[kind] = kinds.get(kind, 0) + 1
    return kinds, wide


def test_every_core_on_random_problems_with_wide_alias_groups_is_infeasible_and_minimal():
    kinds, wide = reasons_checked(2029, 14)  # the first six problems of the seed
    assert wide >= 5 and kinds.get("packing", 0) >= 3 and kinds.get("live_load", 0) >= 3, kinds


@pytest.mark.parametrize("capacity", [18, 19])
def test_an_alias_group_wider_than_its_base_is_its_own_core(capacity):
    """b sits 8 bytes below a: together 17 bytes live, but 20 from b's start to a's end."""
    problem = Problem([Buffer("a", 12, 0, 1), Buffer("b", 5, 0, 1)],
                      aliases=[Alias("b", "a", 8)])
    found = explain(problem, capacity=capacity).capacity
    assert found.kind == "packing" and found.proven and found.minimal
    assert {t.id for t in found.tensors} == {"a", "b"}
    assert "aliases" in found.message
    assert explain(problem, capacity=20).capacity.kind == "fits"


def test_a_core_is_minimal_per_buffer_not_only_per_alias_group():
    """b0, b3 and b4 are one mandatory alias group; the set found for 21 bytes needs b0, b2
    and b4 but not b3: without b3 the rest still cannot fit, so b3 goes, its group stays."""
    problem = Problem(
        [Buffer("b0", 12, 0, 1), Buffer("b1", 9, 6, 7, alignment=2), Buffer("b2", 9, 0, 3),
         Buffer("b3", 1, 4, 9), Buffer("b4", 12, 1, 2, alignment=8)],
        aliases=[Alias("b3", "b4", 2), Alias("b4", "b0", 0, optional=True),
                 Alias("b0", "b4", 1)],
        conflicts=[("b3", "b2"), ("b0", "b2"), ("b3", "b1")])
    found = explain(problem, capacity=21).capacity
    assert found.kind == "packing" and found.minimal
    assert {t.id for t in found.tensors} == {"b0", "b2", "b4"}
    assert "minimal set (without any one of them the rest fits)" in found.message
    check_reason(problem, 21)


def test_a_set_alone_keeps_its_alias_groups_whole():
    """Every plan of the problem, cut down to some buffers, is a plan of those buffers alone:
    removing the buffer that links two others leaves them their shared bytes."""
    problem = Problem([Buffer("x", 8, 0, 2), Buffer("link", 8, 0, 2), Buffer("y", 8, 0, 2),
                       Buffer("z", 4, 1, 3)],
                      aliases=[Alias("x", "link", 0), Alias("link", "y", 0),
                               Alias("link", "z", 4, optional=True)])
    plan = plan_with("exact", problem, **EXACT)
    assert plan.arena_size == 8  # x, link and y share bytes; z sits inside them
    for members in ([0, 2], [0, 2, 3], [0, 3], [1, 3]):
        alone = subproblem(problem, members, None)
        cut = type(plan).from_offsets(alone, plan.offsets[members], planner="cut")
        assert validate(alone, cut) == [] and brute_force_violations(alone, cut) == []
