"""The CP-SAT model of one part (`memplan.solver.model`): its variables, links and boxes,
and both directions of its exactness on tiny problems:

- every solution CP-SAT finds is a valid plan (checked by `memplan.validate`),
  and the optimum of the minimise model is the exhaustive optimum;
- every valid plan satisfies the model (its hint, fixed, is feasible).
"""

from __future__ import annotations

import numpy as np
import pytest
from ortools.sat.python import cp_model

from memplan import Alias, Buffer, Problem, ProblemError, lower_bound, validate
from memplan.solver.geometry import Box
from memplan.solver.model import build_model, conflict_cliques, sections
from tests.test_solver import exhaustive_optimum, small_problems


def solve(model, *, fixed_hint: bool = False) -> tuple[int, cp_model.CpSolver]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20.0
    solver.parameters.fix_variables_to_their_hinted_value = fixed_hint
    return solver.solve(model.cp), solver


def offsets_map(problem: Problem, offsets: np.ndarray) -> dict[str, int]:
    return dict(zip(problem.ids, offsets.tolist(), strict=True))


def minimise(problem: Problem):
    return build_model(problem, lower_bound=lower_bound(problem), upper_bound=None,
                       minimize=True)


def test_three_buffers_have_three_bases_three_boxes_and_the_optimum():
    problem = Problem([Buffer("a", 4, 0, 2), Buffer("b", 8, 1, 3), Buffer("c", 2, 2, 4)])
    model = minimise(problem)
    proto = model.cp.proto
    assert len(model.base) == 3 and model.take == [] and model.peak is not None
    assert [v.name for v in model.base] == ["offset[a]", "offset[b]", "offset[c]"]
    packings = [c for c in proto.constraints if c.has_no_overlap_2d()]
    assert len(packings) == 1 and len(list(packings[0].no_overlap_2d.x_intervals)) == 3
    status, solver = solve(model)
    assert status == cp_model.OPTIMAL
    assert solver.objective_value == 12 == exhaustive_optimum(problem)
    offsets = model.offsets(solver)
    assert validate(problem, offsets_map(problem, offsets)) == []


def test_a_mandatory_alias_is_one_base_and_an_optional_one_a_take_literal():
    problem = Problem([Buffer("x", 4, 0, 2), Buffer("y", 4, 1, 3), Buffer("v", 2, 0, 2),
                       Buffer("z", 4, 0, 3)],
                      aliases=[Alias("x", "v", 2), Alias("x", "y", 0, optional=True)])
    model = minimise(problem)
    assert len(model.base) == 3  # {x, v}, y, z
    assert [t.name for t in model.take] == ["take[x->y]"]
    status, solver = solve(model)
    assert status == cp_model.OPTIMAL and solver.objective_value == 8  # y takes x's bytes
    assert solver.boolean_value(model.take[0])
    offsets = model.offsets(solver)
    assert offsets[2] == offsets[0] + 2 and offsets[1] == offsets[0]
    assert validate(problem, offsets_map(problem, offsets)) == []


def test_alignment_is_a_quotient_variable_and_pinned_units_are_constants():
    problem = Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 4, 0, 2, offset=0)])
    model = minimise(problem)
    (k, modulus, residue), fixed = model.quotient
    assert (modulus, residue) == (4, 0) and fixed is None
    proto = model.cp.proto
    assert list(proto.variables[model.base[1].index].domain) == [0, 0]
    status, solver = solve(model)
    assert status == cp_model.OPTIMAL and model.offsets(solver).tolist() == [4, 0]


def test_a_pinned_offset_off_its_groups_alignment_names_the_buffer():
    problem = Problem([Buffer("a", 4, 0, 2, alignment=4), Buffer("b", 2, 0, 2, offset=6)],
                      aliases=[Alias("a", "b", 1)])
    with pytest.raises(ProblemError, match="'b'"):
        minimise(problem)


def test_explicit_conflicts_become_below_literals_and_keep_buffers_apart():
    problem = Problem([Buffer("a", 4, 0, 1), Buffer("b", 4, 2, 3)], conflicts=[("a", "b")])
    model = minimise(problem)
    assert [(lit.name, a, b) for lit, a, b in model.below] == [
        ("below[a,b]", 0, 1), ("below[b,a]", 1, 0)]
    status, solver = solve(model)
    assert status == cp_model.OPTIMAL and solver.objective_value == 8


def test_fit_mode_has_no_peak_and_is_infeasible_below_the_optimum():
    problem = Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                       Buffer("c", 2, 0, 3)])
    optimum = exhaustive_optimum(problem)
    for capacity, expected in ((optimum, cp_model.OPTIMAL), (optimum - 1, cp_model.INFEASIBLE)):
        fit = problem.replace(capacity=capacity)
        model = build_model(fit, lower_bound=0, upper_bound=None, minimize=False)
        assert model.peak is None
        status, solver = solve(model)
        assert status == expected
        if status == cp_model.OPTIMAL:
            assert validate(fit, offsets_map(fit, model.offsets(solver))) == []


@pytest.mark.parametrize("aliases", [0, 2, 6])
def test_the_optimum_of_the_model_is_the_exhaustive_optimum(aliases):
    for _seed, problem in small_problems(8, aliases=aliases):
        model = minimise(problem)
        status, solver = solve(model)
        assert status == cp_model.OPTIMAL
        offsets = model.offsets(solver)
        assert validate(problem, offsets_map(problem, offsets)) == []
        assert solver.objective_value == int((offsets + problem.sizes).max())
        assert solver.objective_value == exhaustive_optimum(problem)


@pytest.mark.parametrize("aliases", [0, 2, 6])
def test_every_valid_plan_satisfies_the_model_through_its_hint(aliases):
    for _seed, problem in small_problems(8, aliases=aliases):
        model = minimise(problem)
        status, solver = solve(model)  # a valid plan: the model's own optimum ...
        plan = model.offsets(solver)
        stacked = model.stacked  # ... and one that shares nothing
        assert validate(problem, offsets_map(problem, stacked)) == []
        for offsets in (plan, stacked):
            fresh = build_model(problem, lower_bound=0, upper_bound=None, minimize=True)
            fresh.hint(offsets)
            status, solver = solve(fresh, fixed_hint=True)
            assert status == cp_model.OPTIMAL
            assert np.array_equal(fresh.offsets(solver), offsets)


def test_sections_are_the_maximal_sets_of_boxes_live_together():
    boxes = [Box(0, 3, 0, 1, 0), Box(1, 4, 0, 1, 1), Box(2, 5, 0, 1, 2), Box(4, 6, 0, 1, 3)]
    assert sections(boxes) == [[0, 1, 2], [2, 3]]


def test_conflict_cliques_cover_triangles_heaviest_first():
    pairs = [(0, 1), (1, 2), (0, 2), (2, 3)]
    assert conflict_cliques(pairs, np.array([5, 5, 5, 1])) == [[0, 1, 2]]
    assert conflict_cliques([(0, 1)], np.array([1, 1])) == []
