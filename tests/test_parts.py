"""Independent parts planned apart (`memplan.parts`) and the ceiling sized to the limit.

Correctness only: every stitched plan through the validator on the whole problem,
the bound the largest part's, links across parts keeping them together; how much
time the split saves on 500k buffers is in BENCHMARKS.md.
"""

import numpy as np
import pytest

import memplan
from benchmarks.generate import network_like
from benchmarks.traces import tiled, training_step_trace
from memplan import Alias, Buffer, Problem, lower_bound, plan_with, validate
from memplan import parts as parts_module
from memplan.registry import CEILING, ceiling_fits, ceiling_planner


def copies(problem: Problem, count: int, *, aliases=(), conflicts=(), pinned=None) -> Problem:
    """``count`` copies of ``problem`` end to end in time, with links between buffers
    (ids "0", "1", ... of the tiled problem) and pinned offsets added."""
    whole = tiled(problem, count)
    return Problem.from_arrays(whole.sizes, whole.starts, whole.ends,
                               alignments=whole.alignments, aliases=aliases,
                               conflicts=conflicts, pinned=pinned, name=whole.name)


@pytest.fixture
def split_small(monkeypatch):
    """Split problems of any size (the default leaves small ones whole)."""
    monkeypatch.setattr(parts_module, "PART_BUFFERS", 2)


def test_groups_follow_time_and_links():
    one = network_like(200, 1)
    n = len(one)
    assert len(parts_module.groups(copies(one, 4))) == 4
    # a conflict and an alias across copies join them: three and two parts left
    linked = copies(one, 4, conflicts=[("5", str(n + 7))])
    assert len(parts_module.groups(linked)) == 3
    aliased = copies(one, 4, conflicts=[("5", str(n + 7))],
                     aliases=[Alias(str(2 * n + 3), str(3 * n + 1), 0)])
    found = parts_module.groups(aliased)
    assert len(found) == 2
    assert sorted(np.concatenate(found).tolist()) == list(range(4 * n))
    assert any({5, n + 7} <= set(group.tolist()) for group in found)


def test_groups_are_bounded_in_number():
    problem = copies(network_like(20, 0), 300)
    found = parts_module.groups(problem, most=16)
    assert 1 < len(found) <= 17
    assert sorted(np.concatenate(found).tolist()) == list(range(len(problem)))


def test_identical_parts_are_planned_once_and_the_whole_is_valid(split_small):
    one = training_step_trace(2000, 3)
    whole = copies(one, 5)
    report = memplan.api.solve_report(whole, time_limit=4)
    plan = report.plan
    assert validate(whole, plan) == []
    assert (plan.stats["parts"], plan.stats["distinct_parts"]) == (5, 1)
    assert plan.best_bound >= lower_bound(whole) == lower_bound(one)
    assert plan.arena_size <= plan_with(CEILING, whole).arena_size
    n = len(one)  # every copy laid out as the first
    assert all(np.array_equal(plan.offsets[:n], plan.offsets[k * n:(k + 1) * n])
               for k in range(1, 5))
    assert validate(whole, report.heuristic) == []


def test_parts_of_different_heights_keep_the_highest_bound(split_small):
    low, high = network_like(300, 2), network_like(500, 5)
    shift = int(low.ends.max())
    both = Problem.from_arrays(np.r_[low.sizes, high.sizes], np.r_[low.starts, high.starts +
                               shift], np.r_[low.ends, high.ends + shift],
                               alignments=np.r_[low.alignments, high.alignments],
                               pinned=np.r_[np.full(len(low) - 1, -1), 0,
                                            np.full(len(high), -1)])
    plan = memplan.solve(both, time_limit=3)
    assert validate(both, plan) == []
    assert plan.stats["distinct_parts"] == 2
    assert plan.offsets[len(low) - 1] == 0  # the pinned buffer stays
    assert plan.best_bound >= max(lower_bound(low), lower_bound(high))
    assert plan.arena_size >= plan.best_bound


def test_parts_under_a_capacity_fit_or_say_they_do_not(split_small):
    one = network_like(300, 4)
    whole = copies(one, 3)
    roomy = memplan.solve(whole, time_limit=3, capacity=2 * lower_bound(one))
    assert roomy.status in ("optimal", "feasible") and validate(whole, roomy) == []
    tight = memplan.solve(whole, time_limit=2, capacity=lower_bound(one) - 1)
    assert tight.status == "infeasible"


def test_links_across_parts_keep_the_plan_valid(split_small):
    one = network_like(250, 6)
    n = len(one)
    whole = copies(one, 3, conflicts=[("10", str(n + 10))],
                   aliases=[Alias(str(2 * n + 4), str(n + 20), 0)])
    plan = memplan.solve(whole, time_limit=3)
    assert validate(whole, plan) == []
    assert plan.offsets[2 * n + 4] == plan.offsets[n + 20]  # the alias honoured


def test_a_cut_where_only_pinned_buffers_live_splits_and_each_part_keeps_them(split_small):
    one = network_like(250, 7)
    n, tiles = len(one), copies(one, 3)
    horizon = int(tiles.ends.max())
    # a pinned weight over all three copies, one over the cut between the first two only,
    # one in a moment where nothing else lives, and an aliased pin (that one joins parts)
    sizes = np.r_[tiles.sizes, 4096, 1024, 512]
    starts = np.r_[tiles.starts, 0, int(one.ends.max()) - 1, horizon]
    ends = np.r_[tiles.ends, horizon + 1, int(one.ends.max()) + 1, horizon + 1]
    pinned = np.r_[np.full(3 * n, -1), 0, 4096, 8192]
    whole = Problem.from_arrays(sizes, starts, ends, pinned=pinned,
                                alignments=np.r_[tiles.alignments, 64, 64, 64])
    found = parts_module.groups(whole)
    assert len(found) == 3
    assert all(3 * n in group for group in found)  # the weight in every part
    assert sum(3 * n + 1 in group for group in found) == 2  # the crossing pin in two
    assert sum(3 * n + 2 in group for group in found) == 1  # the lone one in one
    assert set(np.concatenate(found).tolist()) == set(range(3 * n + 3))
    plan = memplan.solve(whole, time_limit=3)
    assert plan.stats["parts"] == 3 and validate(whole, plan) == []
    assert plan.offsets[3 * n:].tolist() == [0, 4096, 8192]
    assert lower_bound(whole) <= plan.best_bound <= plan.arena_size
    aliased = whole.replace(aliases=[Alias(str(3 * n), "0", 0)])  # the weight a view's base
    assert len(parts_module.groups(aliased)) == 1


def test_small_problems_are_planned_whole():
    plan = memplan.solve(copies(network_like(100, 0), 3), time_limit=2)
    assert "parts" not in plan.stats


def test_the_ceiling_is_the_time_sweep_where_the_greedy_pass_would_not_fit_the_limit():
    crowded = Problem([Buffer(f"w{i}", 64, 0, 4000) for i in range(300)] +
                      [Buffer(f"a{i}", 64 * (1 + i % 5), i, i + 3) for i in range(4000)])
    assert ceiling_planner(crowded) == CEILING and ceiling_fits(crowded, None)
    assert ceiling_planner(crowded, 60) == CEILING
    assert ceiling_planner(network_like(300, 0), 0) == CEILING  # small: always the greedy
    many = tiled(training_step_trace(10_000, 0), 2)  # 20k buffers, 20 M+ overlapping pairs
    assert ceiling_planner(many, 1.0) == "time_sweep"
    plan = plan_with("best", many, time_limit=1.0)
    assert validate(many, plan) == []
    assert CEILING in plan.stats["skipped"]  # the sweep, uncut, is the ceiling
    sweep = plan_with("time_sweep", many)
    assert plan.arena_size <= sweep.arena_size


def test_solve_says_in_one_line_when_its_limit_cannot_be_kept(tmp_path, capsys, monkeypatch):
    from memplan.cli import OK, checks, main
    from memplan.formats.memplan_json import write_problem

    path = tmp_path / "chain.json"
    write_problem(path, network_like(400, 0))
    assert main(["solve", str(path), "--time-limit", "2", "--quiet"]) == OK
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(checks, "CEILING_CPU_PER_BUFFER", 0.01)  # 4 s of work
    assert main(["solve", str(path), "--time-limit", "2", "--quiet"]) == OK
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "400 buffers" in said[0] and "--time-limit 2" in said[0]
