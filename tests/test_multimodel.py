"""Several models in one arena: exclusive and concurrent combinations, split, replay."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from memplan.deploy.multimodel import combine, flatten, report, stack
from memplan.deploy.replay import events, live_blocks, max_live_blocks
from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.problem import Alias, Buffer, Problem, Region
from memplan.registry import plan_with, planners
from memplan.validate import check

HEURISTIC = "greedy_by_size"


def _chain(name: str, sizes: list[int], alignment: int = 1) -> Problem:
    """A chain of operators: buffer i lives [i, i + 2), like activations of a plain CNN."""
    return Problem([Buffer(f"t{i}", size, i, i + 2, alignment) for i, size in enumerate(sizes)],
                   name=name)


A = _chain("a", [64, 32, 96, 16])  # peak 128 at step 2 (32 + 96)
B = _chain("b", [48, 48, 8])  # peak 96 at step 1


def plan_models(problems, mode: str, planner: str, **options):
    """Combine the models and plan them with ``planner``: the combined problem at once
    (exclusive), or each model alone, stacked (concurrent)."""
    multi = combine(problems, mode)
    if mode == "exclusive":
        return multi, plan_with(planner, multi.problem, **options)
    return multi, stack(multi, [plan_with(planner, part, **options) for part in multi.parts])


def _disjoint_across_models(multi, offsets, sizes) -> bool:
    for k, j in itertools.combinations(range(len(multi.parts)), 2):
        for a in range(*multi.members(k).indices(len(multi.problem))):
            for b in range(*multi.members(j).indices(len(multi.problem))):
                if offsets[a] < offsets[b] + sizes[b] and offsets[b] < offsets[a] + sizes[a]:
                    return False
    return True


def test_exclusive_models_reuse_each_other_memory():
    multi, plan = plan_models({"a": A, "b": B}, "exclusive", HEURISTIC)
    check(multi.problem, plan)
    assert multi.problem.ids[:2] == ("a/t0", "a/t1") and multi.problem.ids[4] == "b/t0"
    assert multi.shifts == (0, A.horizon)
    assert multi.problem.horizon == A.horizon + B.horizon
    assert plan.lower_bound == 128  # the larger model's peak, not the sum
    assert plan.arena_size == 128
    for name, model_plan in multi.split(plan).items():
        part = {"a": A, "b": B}[name]
        check(part, model_plan)
        assert model_plan.stats["shared_arena_size"] == 128


def test_concurrent_models_never_share_a_byte():
    multi, plan = plan_models([A, B], "concurrent", HEURISTIC)
    assert multi.names == ("a", "b")
    check(multi.problem, plan)  # each model in its own region
    assert plan.arena_size == 128 + 96 and plan.best_bound == 128 + 96
    assert plan.status == "optimal"
    flat, flat_plan = flatten(multi, plan)
    check(flat, flat_plan)
    sizes = flat.sizes
    assert _disjoint_across_models(multi, flat_plan.offsets, sizes)
    assert int((flat_plan.offsets + sizes).max()) == plan.arena_size
    for name, model_plan in multi.split(plan).items():
        check({"a": A, "b": B}[name], model_plan)
    assert multi.bases(plan).tolist() == [0, 128]


def test_concurrent_bases_respect_alignment_and_the_bound_stays_valid():
    aligned = _chain("c", [20, 20], alignment=16)
    multi, plan = plan_models({"odd": _chain("odd", [3, 5]), "c": aligned}, "concurrent",
                              HEURISTIC)
    check(multi.problem, plan)
    base = multi.bases(plan)[1]
    assert base % 16 == 0 and base >= 8
    assert plan.best_bound == 8 + 40  # the sum of the live loads, not of the aligned optima
    flat, flat_plan = flatten(multi, plan)
    check(flat, flat_plan)
    assert _disjoint_across_models(multi, flat_plan.offsets, flat.sizes)


@pytest.mark.skipif("exact" not in planners(), reason="the exact planner is not registered")
@pytest.mark.parametrize("mode", ["exclusive", "concurrent"])
def test_exact_is_never_worse_than_the_heuristic(mode):
    c = Problem([Buffer("x", 40, 0, 3), Buffer("y", 24, 1, 2), Buffer("z", 40, 2, 4),
                 Buffer("w", 16, 0, 1)], name="c")
    models = {"a": A, "b": B, "c": c}
    multi, heuristic = plan_models(models, mode, HEURISTIC)
    _, exact = plan_models(models, mode, "exact", time_limit=10)
    check(multi.problem, heuristic)
    check(multi.problem, exact)
    assert exact.arena_size <= heuristic.arena_size
    assert exact.best_bound >= heuristic.lower_bound


def test_aliases_conflicts_and_regions_carry_over():
    sram = Region("sram", 256)
    p = Problem([Buffer("x", 8, 0, 2, regions=("sram",)), Buffer("y", 8, 1, 3),
                 Buffer("z", 4, 5, 6)], aliases=[Alias("x", "y", 0, optional=True)],
                conflicts=[("x", "z")], regions=[sram], name="p")
    q = Problem([Buffer("x", 4, 0, 1)], regions=[sram], name="q")
    multi = combine([p, q], "exclusive")
    assert multi.problem.aliases == (Alias("p/x", "p/y", 0, True),)
    assert multi.problem.conflicts.tolist() == [[0, 2]]
    assert multi.problem.regions == (sram,) and multi.problem.allowed_regions[0] == ("sram",)
    assert multi.problem.starts[3] == 6
    with pytest.raises(ProblemError, match="regions themselves"):
        combine([p, q], "concurrent")
    other = Problem([Buffer("x", 4, 0, 1)], regions=[Region("sram", 128)], name="r")
    with pytest.raises(ProblemError, match="differently"):
        combine([p, other], "exclusive")


def test_bad_model_names_and_modes():
    with pytest.raises(ProblemError, match="free of '/'"):
        combine({"a/b": A})
    with pytest.raises(ValueError, match="valid modes: exclusive, concurrent"):
        combine([A], "parallel")
    assert combine([A, A]).names == ("a", "a1")


def test_replay_events_release_before_placing():
    plan = Plan.from_offsets(A, [32, 0, 32, 0], planner="hand")
    check(A, plan)
    steps = events(A, plan)
    assert [s.step for s in steps] == [0, 1, 2, 3, 4, 5]
    assert steps[2].releases == ("t0",)
    assert [(p.id, p.offset, p.size) for p in steps[2].placements] == [("t2", 32, 96)]
    assert steps[-1].releases == ("t3",) and steps[-1].placements == ()
    placed = [p.id for s in steps for p in s.placements]
    released = [id for s in steps for id in s.releases]
    assert sorted(placed) == sorted(released) == sorted(A.ids)


def test_live_blocks_count_alias_groups_once():
    p = Problem([Buffer("in", 16, 0, 2), Buffer("view", 16, 1, 3), Buffer("other", 8, 1, 2),
                 Buffer("maybe", 16, 2, 4)],
                aliases=[Alias("in", "view"), Alias("view", "maybe", optional=True)])
    assert max_live_blocks(p) == 2  # {in, view} and other at step 1
    times, counts = live_blocks(p)
    assert dict(zip(times.tolist(), counts.tolist(), strict=True)) == {0: 1, 1: 2, 2: 2, 3: 1, 4: 0}
    took = Plan.from_offsets(p, [0, 0, 16, 0], planner="hand")
    check(p, took)
    assert live_blocks(p, took)[1].tolist() == [1, 2, 1, 0]  # maybe joined the block


def test_report_per_model():
    multi, plan = plan_models({"a": A, "b": B}, "concurrent", HEURISTIC)
    reports = report(multi, plan)
    assert reports["a"].base == 0 and reports["b"].base == 128
    assert reports["a"].max_live_blocks == 2 and reports["b"].max_live_blocks == 2
    b_offsets = [p.offset for s in reports["b"].events for p in s.placements]
    assert min(b_offsets) >= 128  # offsets in the shared arena
    assert reports["b"].arena_size == plan.arena_size
    exclusive, shared = plan_models({"a": A, "b": B}, "exclusive", HEURISTIC)
    assert np.all([r.base == 0 for r in report(exclusive, shared).values()])
