"""The exact model's geometry: units of mandatory aliases, links of optional ones, the
disjoint boxes of each unit's shape, paths, arrangements and explicit separations.

Each test builds a tiny problem whose units, boxes and links can be written down
by hand, and compares `build_geometry` with that picture.
"""

from __future__ import annotations

import pytest

from memplan import Alias, Buffer, Problem
from memplan.solver import geometry as geometry_module
from memplan.solver.geometry import Box, build_geometry, set_partitions


def shapes(geometry) -> set[tuple[int, int, int, int, int]]:
    """The boxes as (start, end, low, high, unit), for comparing with a drawing."""
    return {(b.start, b.end, b.low, b.high, b.unit) for b in geometry.boxes}


def test_buffers_without_aliases_are_one_unit_and_one_box_each():
    problem = Problem([Buffer("a", 4, 0, 2), Buffer("b", 8, 1, 3), Buffer("c", 2, 5, 6)])
    geometry = build_geometry(problem)
    assert [(u.members, u.rel, u.extent) for u in geometry.units] == [
        ((0,), (0,), 4), ((1,), (0,), 8), ((2,), (0,), 2)]
    assert geometry.unit_of.tolist() == [0, 1, 2]
    assert shapes(geometry) == {(0, 2, 0, 4, 0), (1, 3, 0, 8, 1), (5, 6, 0, 2, 2)}
    assert geometry.links == [] and geometry.loose == [] and geometry.separations == []


def test_in_place_output_larger_than_its_input_is_three_disjoint_rectangles():
    """The drawing of the module docstring: src [0, 3) 4 bytes, dst [2, 5) 6 bytes at src + 0.

        address    +--------+
          ^        |  dst   |
          |  +-----+--+     |
          |  | src    | dst |
          +--+--------+-----+--> time
    """
    problem = Problem([Buffer("src", 4, 0, 3), Buffer("dst", 6, 2, 5)],
                      aliases=[Alias("src", "dst", 0)])
    geometry = build_geometry(problem)
    (unit,) = geometry.units
    assert sorted(zip(unit.members, unit.rel, strict=True)) == [(0, 0), (1, 0)] and unit.extent == 6
    assert shapes(geometry) == {(0, 2, 0, 4, 0), (2, 5, 0, 6, 0)}  # [2,3) x dst covers src
    assert all(not b.live for b in geometry.boxes)


def test_a_view_at_an_offset_moves_with_its_source():
    problem = Problem([Buffer("cat", 8, 0, 4), Buffer("half", 4, 1, 3)],
                      aliases=[Alias("cat", "half", 4)])
    geometry = build_geometry(problem)
    (unit,) = geometry.units
    assert dict(zip(unit.members, unit.rel, strict=True)) == {0: 0, 1: 4} and unit.extent == 8
    assert shapes(geometry) == {(0, 4, 0, 8, 0)}  # the view lies inside its source


def test_optional_aliases_with_one_shift_make_one_link():
    problem = Problem([Buffer("x", 4, 0, 2), Buffer("y", 4, 1, 3), Buffer("z", 4, 2, 4)],
                      aliases=[Alias("x", "y", 0, optional=True),
                               Alias("y", "x", 0, optional=True),
                               Alias("y", "z", 2, optional=True)])
    geometry = build_geometry(problem)
    assert len(geometry.units) == 3
    assert [(link.aliases, link.low, link.high, link.shift) for link in geometry.links] == [
        ((0, 1), 0, 1, 0), ((2,), 1, 2, 2)]
    assert geometry.component[0] == geometry.component[1] == geometry.component[2]


def test_paths_climb_a_tree_of_links_and_add_their_shifts():
    buffers = [Buffer(f"t{i}", 8, i, i + 2) for i in range(4)]
    aliases = [Alias("t0", "t1", 1, optional=True), Alias("t1", "t2", 2, optional=True),
               Alias("t1", "t3", 4, optional=True)]
    geometry = build_geometry(Problem(buffers, aliases=aliases))
    assert geometry.paths(0, 2) == [(3, (0, 1))]
    assert geometry.paths(2, 3) == [(2, (1, 2))]  # up to t1, down to t3: -2 + 4
    assert geometry.paths(3, 0) == [(-5, (2, 0))]


def test_paths_in_a_cycle_of_links_are_every_simple_path():
    buffers = [Buffer(f"t{i}", 8, 0, 1) for i in range(3)]
    aliases = [Alias("t0", "t1", 0, optional=True), Alias("t1", "t2", 0, optional=True),
               Alias("t0", "t2", 8, optional=True)]
    geometry = build_geometry(Problem(buffers, aliases=aliases))
    assert sorted(geometry.paths(0, 2)) == [(0, (0, 1)), (8, (2,))]


def test_units_live_together_get_one_box_set_per_arrangement():
    """x and y live together at step 1 and may alias: apart, or merged at shift 0."""
    problem = Problem([Buffer("x", 4, 0, 2), Buffer("y", 4, 1, 3)],
                      aliases=[Alias("x", "y", 0, optional=True)])
    geometry = build_geometry(problem)
    assert geometry.arrangements == {(0, 1): [(((0, 0),), ((1, 0),)), (((0, 0), (1, 0)),)]}
    together = sorted((b.arrangement, b.unit, b.low, b.high)
                      for b in geometry.boxes if b.live == (0, 1))
    assert together == [(0, 0, 0, 4), (0, 1, 0, 4), (1, 0, 0, 4)]  # apart: two; merged: one
    assert {(b.start, b.end) for b in geometry.boxes if b.live} == {(1, 2)}


def test_a_crowded_link_component_is_left_to_chance(monkeypatch):
    monkeypatch.setattr(geometry_module, "MAX_ARRANGEMENTS", 1)
    problem = Problem([Buffer("x", 4, 0, 2), Buffer("y", 4, 1, 3)],
                      aliases=[Alias("x", "y", 0, optional=True)])
    geometry = build_geometry(problem)
    assert geometry.links == [] and geometry.loose == [0]
    assert shapes(geometry) == {(0, 2, 0, 4, 0), (1, 3, 0, 4, 1)}  # packed apart: sound


def test_only_conflicts_that_lifetimes_do_not_imply_are_separations():
    problem = Problem([Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 4, 4, 5)],
                      conflicts=[("a", "b"), ("c", "a"), ("b", "c")])
    assert build_geometry(problem).separations == [(0, 2), (1, 2)]


@pytest.mark.parametrize("n,bell", [(0, 1), (1, 1), (2, 2), (3, 5), (4, 15)])
def test_set_partitions_are_counted_by_bell_numbers(n, bell):
    partitions = list(set_partitions(tuple(range(n))))
    assert len(partitions) == len(set(partitions)) == bell
    for partition in partitions:
        assert sorted(i for cls in partition for i in cls) == list(range(n))


def test_boxes_of_one_unit_never_overlap():
    problem = Problem([Buffer("a", 4, 0, 3), Buffer("b", 6, 2, 5), Buffer("c", 2, 4, 7)],
                      aliases=[Alias("a", "b", 0), Alias("b", "c", 4)])
    boxes: list[Box] = build_geometry(problem).boxes
    for i, p in enumerate(boxes):
        for q in boxes[i + 1:]:
            assert not (p.start < q.end and q.start < p.end and p.low < q.high
                        and q.low < p.high), (p, q)
