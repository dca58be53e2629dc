"""The exact planner's preprocessing and geometry: divisor, parts, boxes of alias groups."""

from __future__ import annotations

import numpy as np

from memplan import Alias, Buffer, Problem
from memplan.solver.geometry import build_geometry, set_partitions
from memplan.solver.model import conflict_cliques, sections
from memplan.solver.preprocess import (
    assemble,
    components,
    part_offsets,
    scale_of,
    sink_spanning,
    split,
)


def test_divisor_divides_sizes_deltas_and_pins_and_fits_the_alignments():
    problem = Problem([Buffer("a", 1024, 0, 2, alignment=64), Buffer("b", 3072, 1, 3),
                       Buffer("c", 2048, 2, 4, offset=4096)], aliases=[Alias("a", "b", 1024)])
    assert scale_of(problem) == 1024  # 64 divides 1024: every multiple of 1024 is aligned
    odd = Problem([Buffer("a", 1024, 0, 2, alignment=48), Buffer("b", 3072, 1, 3)])
    assert scale_of(odd) == 16  # neither divides the other: down to gcd(1024, 48)


def test_parts_are_joined_by_lifetimes_aliases_and_conflicts():
    problem = Problem([Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 4, 3, 5),
                       Buffer("d", 4, 5, 6), Buffer("e", 4, 7, 8)],
                      aliases=[Alias("c", "d", 0, optional=True)], conflicts=[("a", "e")])
    assert sorted(m.tolist() for m in components(problem)) == [[0, 1, 4], [2, 3]]


def test_split_renumbers_time_and_assemble_restores_bytes():
    problem = Problem([Buffer("a", 4096, 10, 20), Buffer("b", 8192, 15, 40),
                       Buffer("c", 4096, 100, 300)])
    parts = split(problem)
    assert [len(p.buffers) for p in parts] == [1, 2]
    big = parts[1].problem
    assert big.sizes.tolist() == [1, 2] and big.starts.tolist() == [0, 1]
    assert big.ends.tolist() == [2, 3]
    offsets = np.array([0, 4096, 8192])
    pieces = [part_offsets(part, offsets) for part in parts]
    assert assemble(problem, parts, pieces).tolist() == offsets.tolist()


def test_in_place_shape_is_cut_into_disjoint_rectangles():
    """The docstring's picture: src [0, 3), dst [2, 5) at src + 0 and larger."""
    problem = Problem([Buffer("src", 2, 0, 3), Buffer("dst", 3, 2, 5)],
                      aliases=[Alias("src", "dst", 0)])
    geometry = build_geometry(problem)
    assert len(geometry.units) == 1
    boxes = sorted((b.start, b.end, b.low, b.high) for b in geometry.boxes)
    assert boxes == [(0, 2, 0, 2), (2, 5, 0, 3)]


def test_optional_in_place_alias_gives_one_arrangement_per_choice():
    problem = Problem([Buffer("src", 2, 0, 3), Buffer("dst", 3, 2, 5)],
                      aliases=[Alias("src", "dst", 0, optional=True)])
    geometry = build_geometry(problem)
    assert len(geometry.units) == 2 and len(geometry.links) == 1
    assert list(geometry.arrangements.values()) == [[(((0, 0),), ((1, 0),)),
                                                     (((0, 0), (1, 0)),)]]


def test_set_partitions_are_counted_by_bell_numbers():
    assert [len(list(set_partitions(tuple(range(n))))) for n in range(6)] == [1, 1, 2, 5, 15, 52]


def test_sections_are_the_maximal_sets_live_together():
    problem = Problem([Buffer("a", 1, 0, 4), Buffer("b", 1, 1, 2), Buffer("c", 1, 2, 3),
                       Buffer("d", 1, 5, 6)])
    assert sections(build_geometry(problem).boxes) == [[0, 1], [0, 2]]


def test_a_long_chain_of_optional_aliases_is_one_tree():
    n = 3000  # deeper than Python's recursion limit
    problem = Problem([Buffer(f"t{i}", 4, i, i + 2) for i in range(n)],
                      aliases=[Alias(f"t{i}", f"t{i + 1}", 0, optional=True) for i in range(n - 1)])
    geometry = build_geometry(problem)
    assert len(geometry.links) == n - 1 and geometry.loose == []
    assert geometry.paths(0, n - 1) == [(0, tuple(range(n - 1)))]
    assert len(geometry.arrangements) == n - 1  # each pair at its handover step


def test_conflict_cliques_cover_the_heavy_cliques_of_a_conflict_graph():
    sizes = np.array([5, 10, 8, 20, 2, 6, 15, 3])  # the graph, buffers 1..8 as 0..7
    pairs = [(int(a) - 1, int(b) - 1) for a, b in
             "12 23 24 25 34 35 36 45 46 47 56 57 58 67 78".split()]
    cliques = conflict_cliques(pairs, sizes)
    assert [3, 4, 5, 6] in cliques  # 20 + 2 + 6 + 15 = 43, the optimum
    assert all(len(c) > 2 for c in cliques)


def test_spanning_buffers_sink_to_the_bottom_and_the_plan_stays_valid():
    from memplan.plan import Plan
    from memplan.registry import plan_with
    from memplan.validate import validate

    rng = np.random.default_rng(3)
    for trial in range(20):
        count = int(rng.integers(5, 60))
        starts = rng.integers(0, 30, count)
        ends = starts + rng.integers(1, 12, count)
        starts[: count // 5 + 1], ends[: count // 5 + 1] = starts.min(), ends.max()
        problem = Problem.from_arrays(rng.integers(1, 9, count) * 64, starts, ends,
                                      alignments=np.full(count, 64))
        plan = plan_with(("greedy_by_size", "first_fit", "best_fit")[trial % 3], problem)
        sunk = sink_spanning(problem, plan.offsets)
        moved = Plan.from_offsets(problem, sunk.tolist(), planner="sunk")
        assert validate(problem, moved) == [] and moved.arena_size <= plan.arena_size
        spanning = (problem.starts == starts.min()) & (problem.ends == ends.max())
        assert (sunk[spanning] + problem.sizes[spanning]).max() <= sunk[~spanning].min()
    odd = Problem([Buffer("a", 96, 0, 4), Buffer("b", 64, 1, 2, alignment=64)])
    assert sink_spanning(odd, np.array([64, 0])).tolist() == [64, 0]  # 96: not aligned
