"""The library API: solve from a list of buffers, load with options, compare, info."""

from __future__ import annotations

import math

import numpy as np
import pytest

import memplan
from memplan import Alias, Buffer, Problem, ProblemError, api, validate
from memplan.formats import memplan_json

from .conftest import CHALLENGING

EXAMPLE = CHALLENGING / "example.12.csv"

# Six buffers whose optimum is their lower bound, 11 bytes (found by exhaustive
# search); the one-pass heuristics stop at 14. Tests that need the exact planner
# to work start it from the naive plan, whatever the heuristics reach.
TRICKY = [Buffer("a", 2, 2, 6), Buffer("b", 2, 0, 6), Buffer("c", 4, 2, 3),
          Buffer("d", 3, 3, 6), Buffer("e", 4, 4, 6), Buffer("f", 3, 0, 4)]
OPTIMUM = 11


def test_solve_takes_a_list_of_buffers_and_proves_optimality():
    progress = []
    plan = memplan.solve(TRICKY, time_limit=5, planner="naive", on_progress=progress.append)
    problem = Problem(TRICKY)
    assert validate(problem, plan) == []
    assert plan.status == "optimal" and plan.arena_size == OPTIMUM == plan.best_bound
    assert progress, "the exact planner reported no progress"
    assert progress[-1].arena_size == OPTIMUM == progress[-1].best_bound


def test_solve_report_keeps_each_step():
    report = api.solve_report(TRICKY, time_limit=5, planner="all", heuristic_time_limit=0.2)
    problem = report.problem
    assert set(report.heuristics) == set(api.heuristic_names())
    assert report.naive == int(problem.sizes.sum())
    assert report.heuristic.arena_size == min(p.arena_size for p in report.heuristics.values())
    assert report.plan.arena_size <= report.heuristic.arena_size
    if report.exact is None:
        assert report.skipped_exact == "not needed, the heuristic plan reaches the lower bound"
        assert report.heuristic.status == "optimal"
    else:
        assert report.exact.planner == api.EXACT
    for plan in [report.plan, *report.heuristics.values()]:
        assert validate(problem, plan) == []


def test_solve_without_exact_returns_the_heuristic_plan():
    report = api.solve_report(TRICKY, exact=False)
    assert report.exact is None
    assert report.skipped_exact in ("not asked",
                                    "not needed, the heuristic plan reaches the lower bound")
    assert report.plan is report.heuristic


def test_solve_honours_aliases_and_alignment():
    buffers = [Buffer("x", 96, 0, 2, alignment=64), Buffer("y", 96, 1, 3, alignment=64),
               Buffer("z", 32, 2, 4, alignment=64), Buffer("w", 64, 0, 4, alignment=64)]
    problem = Problem(buffers, aliases=[Alias("x", "z", delta=64)])
    plan = memplan.solve(problem, time_limit=5)
    assert validate(problem, plan) == []
    assert plan.offsets[2] == plan.offsets[0] + 64
    assert (plan.offsets % 64 == 0).all()


def test_an_impossible_capacity_gives_an_infeasible_plan():
    plan = memplan.solve(TRICKY, capacity=OPTIMUM - 1, time_limit=5, planner="naive")
    assert plan.status == "infeasible"


def test_capacity_that_fits_gives_a_plan_within_it():
    plan = memplan.solve(TRICKY, capacity=OPTIMUM, time_limit=5, planner="naive")
    assert plan.status == "optimal" and plan.arena_size == OPTIMUM


def test_unknown_option_is_refused():
    with pytest.raises(TypeError):
        memplan.solve(TRICKY, time_limt=3)


def test_load_reads_by_extension_with_alignment(challenging, tmp_path):
    problem = memplan.load(EXAMPLE)
    assert len(problem) == 5 and problem.capacity == 12
    aligned = memplan.load(EXAMPLE, alignment=4)
    assert (aligned.alignments == 4).all()
    path = tmp_path / "example.json"
    memplan_json.write_problem(path, aligned)
    assert memplan.load(path).alignments.tolist() == [4] * 5


def test_load_refuses_dims_for_files_that_are_not_onnx(challenging):
    with pytest.raises(ProblemError, match="example.12.csv.*ONNX models only"):
        memplan.load(EXAMPLE, dims={"batch": 1})


def test_load_names_a_missing_onnx_file(tmp_path):
    with pytest.raises(ProblemError, match="missing.onnx: no such file"):
        memplan.load(tmp_path / "missing.onnx")


def test_with_alignment_keeps_larger_alignments():
    problem = Problem([Buffer("a", 8, 0, 1, alignment=6), Buffer("b", 8, 0, 1)])
    assert api.with_alignment(problem, 4).alignments.tolist() == [12, 4]
    assert api.with_alignment(problem, 1) is problem


def test_compare_lines_up_every_planner(challenging):
    problems = {"example": memplan.load(EXAMPLE, capacity=None), "tricky": Problem(TRICKY)}
    table = memplan.compare(problems, time_limit=5, heuristic_time_limit=0.2)
    planners = [*api.heuristic_names(), api.EXACT]
    assert table["planner"].tolist() == planners * 2
    assert table.groupby("problem")["lower_bound"].first().to_dict() == {"example": 12,
                                                                          "tricky": OPTIMUM}
    exact = table[table["planner"] == api.EXACT].set_index("problem")
    assert (exact["status"] == "optimal").all()
    assert (exact["arena_size"] == exact["optimum"]).all()
    assert (table["over_optimum"] >= 0).all() and (table["over_lower_bound"] >= 0).all()
    naive = table[table["planner"] == "naive"].set_index("problem")
    assert naive.loc["example", "arena_size"] == 20
    assert math.isclose(naive.loc["example", "over_lower_bound"], 20 / 12 - 1)


def test_compare_without_a_proof_leaves_the_optimum_unknown():
    problem = Problem(TRICKY)
    table = memplan.compare([problem], planners=["naive"])
    assert table["problem"].tolist() == ["problem 0"]
    assert np.isnan(table["optimum"][0]) and np.isnan(table["over_optimum"][0])


def test_info_describes_the_problem(challenging):
    facts = api.info(memplan.load(EXAMPLE), largest=2)
    assert facts["buffers"] == 5 and facts["lower_bound"] == 12 and facts["max_width"] == 12
    assert facts["total_size"] == 20 and facts["capacity"] == 12 and facts["steps"] == 21
    assert [t["size"] for t in facts["largest"]] == [4, 4]
    live = memplan.live_bytes(memplan.load(EXAMPLE))
    assert math.isclose(facts["mean_width"], live.mean())


def test_default_model_is_bundled():
    path = api.default_model()
    assert path.is_file(), f"bundled model missing at {path}"
    problem = memplan.load(path)
    assert len(problem) > 10 and len(problem.aliases) > 0


def test_compare_keeps_plans_that_do_not_fit_the_capacity():
    problem = Problem(TRICKY, capacity=OPTIMUM - 1)
    table = memplan.compare([problem], planners=["greedy_by_size", "exact"], time_limit=5)
    assert (table["status"] == "infeasible").all()
    assert (table["arena_size"] > OPTIMUM - 1).all()


@pytest.mark.parametrize("mode", ["exclusive", "concurrent"])
def test_solve_models_plans_several_models_in_one_arena(mode):
    models = {"tricky": Problem(TRICKY), "copy": Problem(TRICKY)}
    multi, report = api.solve_models(models, mode, time_limit=5, planner="naive")
    assert report.plan.arena_size == (OPTIMUM if mode == "exclusive" else 2 * OPTIMUM)
    assert validate(multi.problem, report.plan) == []
    for name, plan in multi.split(report.plan).items():
        assert plan.stats["model_base"] == (OPTIMUM if mode == "concurrent" and name == "copy"
                                            else 0)


def test_solve_plans_memory_regions_and_variable_scratch():
    from memplan import Region

    buffers = [Buffer("a", 100, 0, 2, regions=("sram", "dram")),
               Buffer("b", 100, 1, 3, regions=("sram", "dram")), Buffer("c", 50, 2, 4),
               Buffer("s", 10, 1, 2, kind="scratch", max_size=60)]
    problem = Problem(buffers, regions=[Region("sram", 150, 0.0), Region("dram", None, 1.0)])
    plan = memplan.solve(problem, time_limit=5)
    assert validate(problem, plan) == [] and plan.regions is not None
    assert sorted(plan.regions[:2].tolist()) == [0, 1]  # a and b cannot both fit the SRAM
    scratch = Problem([*buffers[2:], Buffer("d", 30, 0, 4)])
    plan = memplan.solve(scratch, time_limit=5)
    assert validate(scratch, plan) == [] and plan.sizes is not None
    assert 10 <= plan.sizes[0] <= 60 and plan.arena_size == 80


def test_large_problems_give_the_order_search_its_own_time_before_the_exact_planner():
    from memplan.solver.exact_options import ExactOptions

    count = ExactOptions().lns_buffers + 1  # the exact planner would search neighbourhoods
    large = Problem.from_arrays(np.full(count, 64), np.arange(count), np.arange(count) + 3)
    short = api.solve_options(time_limit=5)
    assert api._search_seconds(large, short, ExactOptions(), 5) == pytest.approx(4.5)  # 90 %
    assert api._search_seconds(large, short, ExactOptions(), 60) == pytest.approx(10.0)  # 1/6
    assert api._search_seconds(large.replace(capacity=1 << 20), short, ExactOptions(),
                               5) is None
    assert api._search_seconds(Problem.from_arrays([64, 64], [0, 1], [2, 3]), short,
                               ExactOptions(), 5) is None
    report = api.solve_report(large, short)
    assert validate(large, report.plan) == []


def test_half_the_limit_goes_to_best_where_only_its_sweeps_run_and_long_first_takes_it(
        monkeypatch):
    from memplan import registry
    from memplan.solver.exact_options import ExactOptions

    count = ExactOptions().lns_buffers + 1
    starts, ends = np.arange(count), np.arange(count) + 3
    ends[0] = count  # one buffer lives the whole schedule: long_first takes the problem
    few_long = Problem.from_arrays(np.full(count, 64), starts, ends)
    short_only = Problem.from_arrays(np.full(count, 64), np.arange(count), np.arange(count) + 3)
    settings = api.solve_options(time_limit=60)
    # the ceiling fits: a sixth, as on every large problem
    assert api._search_seconds(few_long, settings, ExactOptions(), 60) == pytest.approx(10.0)
    # its work does not fit the limit (as 370 M pairs in 60 s): half, with long_first only
    monkeypatch.setattr(registry, "CEILING_PAIRS_PER_SECOND", 1)
    monkeypatch.setattr(registry, "CEILING_LEAST_WORK", 0)
    assert api._search_seconds(few_long, settings, ExactOptions(), 60) == pytest.approx(30.0)
    assert api._search_seconds(short_only, settings, ExactOptions(), 60) == pytest.approx(10.0)
