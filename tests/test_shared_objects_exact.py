"""``shared_objects_exact`` and its bound against an exhaustive search on small problems.

Every assignment of buffers to objects is enumerated (each object as large as
its largest buffer, no two buffers of one object live at once nor in explicit
conflict): the ranked live bound never exceeds that optimum, the planner meets
it and says so, and every plan passes the validator.
"""

from __future__ import annotations

import random

import pytest

import memplan
from memplan import Buffer, Problem, plan_with, validate
from memplan.bounds import live_load_bound, ranked_live_bound
from memplan.solver import shared_objects_exact


def exhaustive(problem: Problem, conflicts: set[tuple[int, int]]) -> int:
    """The least total of objects over every assignment (buffer by buffer: join an
    object it fits in time, or open one)."""
    sizes, starts, ends = (a.tolist() for a in (problem.sizes, problem.starts, problem.ends))
    best = [sum(sizes)]

    def fits(i: int, members: list[int]) -> bool:
        return all((ends[u] <= starts[i] or starts[u] >= ends[i])
                   and (min(u, i), max(u, i)) not in conflicts for u in members)

    def place(i: int, objects: list[list[int]]) -> None:
        if i == len(sizes):
            best[0] = min(best[0], sum(max(sizes[u] for u in o) for o in objects))
            return
        for members in objects:
            if fits(i, members):
                members.append(i)
                place(i + 1, objects)
                members.pop()
        objects.append([i])
        place(i + 1, objects)
        objects.pop()

    place(0, [])
    return best[0]


def small_problems(count: int, seed: int = 0):
    rng = random.Random(seed)
    for k in range(count):
        n = rng.randint(1, 8)
        buffers = []
        for i in range(n):
            start = rng.randint(0, 6)
            buffers.append(Buffer(f"b{i}", 64 * rng.randint(1, 9), start,
                                  start + rng.randint(1, 4), alignment=64))
        pairs = {(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.1}
        yield Problem(buffers, conflicts=[(f"b{a}", f"b{b}") for a, b in sorted(pairs)],
                      name=f"small-{k}"), pairs


CASES = list(small_problems(40))


@pytest.mark.parametrize(("problem", "conflicts"), CASES, ids=[p.name for p, _ in CASES])
def test_meets_the_exhaustive_optimum_and_the_bound_stays_below(problem, conflicts):
    optimum = exhaustive(problem, conflicts)
    assert live_load_bound(problem) <= ranked_live_bound(problem.sizes, problem.starts,
                                                         problem.ends) <= optimum
    plan = plan_with("shared_objects_exact", problem, time_limit=10, threads=1)
    assert validate(problem, plan) == []
    assert plan.stats["object_total"] == optimum
    assert plan.stats["objects_status"] == "optimal" and plan.stats["objects_gap"] == 0
    assert plan.stats["object_total"] <= plan.stats["greedy_total"]


def test_ranked_bound_above_the_live_load():
    """Live at step 0: 10 and 1; at step 1: 5 and 5. The live load is 11, yet two objects
    hold them: one of at least 10, one of at least 5."""
    problem = Problem([Buffer("a", 10, 0, 1), Buffer("b", 1, 0, 1), Buffer("c", 5, 1, 2),
                       Buffer("d", 5, 1, 2)])
    assert live_load_bound(problem) == 11
    assert ranked_live_bound(problem.sizes, problem.starts, problem.ends) == 15
    plan = plan_with("shared_objects_exact", problem, time_limit=10)
    assert plan.stats["object_total"] == 15 and plan.stats["objects_status"] == "optimal"


def test_a_hint_warm_starts_it_and_its_total_is_reported():
    """The hint's objects (one per offset) count as a warm start: the plan is never above
    them nor the greedy's."""
    problem = Problem([Buffer("a", 64, 0, 2), Buffer("b", 128, 2, 4), Buffer("c", 128, 0, 1),
                       Buffer("d", 64, 1, 4)])
    hint = memplan.Plan.from_offsets(problem, [0, 0, 128, 128], planner="hint")
    plan = plan_with("shared_objects_exact", problem, time_limit=10, hint=hint)
    assert plan.stats["hint_total"] == 256
    assert plan.stats["object_total"] <= min(256, plan.stats["greedy_total"])
    assert validate(problem, plan) == []


def test_past_its_pair_limit_the_warm_start_stays_with_its_gap(monkeypatch):
    problem, _ = CASES[5]
    monkeypatch.setattr(shared_objects_exact, "MAX_PAIRS", -1)
    plan = plan_with("shared_objects_exact", problem, time_limit=10)
    assert plan.stats["search"].startswith("not built") or plan.stats["search"] == "not run"
    assert plan.stats["objects_bound"] <= plan.stats["object_total"]
    assert plan.stats["object_total"] <= plan.stats["greedy_total"]
    assert validate(problem, plan) == []
