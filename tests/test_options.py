"""Options are records passed explicitly: one frozen dataclass per planner (and one for the
`solve` pipeline), each field with its help in metadata; a record or keywords, never both."""

from __future__ import annotations

import threading
from dataclasses import fields

import pytest

from memplan import Buffer, Problem, plan_with, validate
from memplan.api import SolveOptions, exact_settings, solve, solve_report
from memplan.errors import ProblemError
from memplan.heuristics.greedy import GreedyOptions
from memplan.options import option_help
from memplan.registry import planners
from memplan.solver import exact
from memplan.solver.exact_options import ExactOptions

PROBLEM = Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                   Buffer("c", 2, 0, 3), Buffer("d", 5, 2, 4)])


def test_every_options_field_has_its_help_in_metadata():
    records = [SolveOptions, ExactOptions] + [type(fn.options) for fn in planners().values()
                                              if hasattr(fn, "options")]
    assert len(records) > 5
    for record in records:
        for field in fields(record):
            assert option_help(field), f"{record.__name__}.{field.name} has no help"


def test_a_heuristic_takes_its_record_or_keywords_not_both():
    by_record = plan_with("greedy_by_size", PROBLEM, options=GreedyOptions(order="start"))
    by_keyword = plan_with("greedy_by_size", PROBLEM, order="start")
    assert by_record.offsets.tolist() == by_keyword.offsets.tolist()
    assert validate(PROBLEM, by_record) == []
    with pytest.raises(TypeError, match="not both"):
        plan_with("greedy_by_size", PROBLEM, options=GreedyOptions(), order="start")
    with pytest.raises(TypeError, match="takes options=GreedyOptions"):
        plan_with("greedy_by_size", PROBLEM, options=ExactOptions())


def test_the_exact_planner_takes_its_record_and_the_time_limit_beside_it():
    record = ExactOptions(threads=1, deterministic=True, warm_start=None)
    plan = plan_with("exact", PROBLEM, time_limit=10.0, options=record)
    assert plan.status == "optimal" and validate(PROBLEM, plan) == []
    same = plan_with("exact", PROBLEM, time_limit=10.0, threads=1, deterministic=True,
                     warm_start=None)
    assert same.offsets.tolist() == plan.offsets.tolist()
    with pytest.raises(TypeError, match="not both"):
        plan_with("exact", PROBLEM, options=record, threads=2)


def test_the_exact_records_time_limit_and_cpu_still_bound_the_run_for_one_release(monkeypatch):
    for field in ("time_limit", "cpu"):
        with pytest.warns(DeprecationWarning, match=f"ExactOptions\\({field}=...\\) is "
                                                    f"deprecated: use budget="):
            record = ExactOptions(**{field: 0.5}, threads=1, warm_start=None)
        assert getattr(record, field) == 0.5
    seen = {}
    real = exact._Run

    def spy(problem, options, hint, budget, **kwargs):
        seen.update(limit=budget.limit, cpu=budget.cpu)
        return real(problem, options, hint, budget, **kwargs)

    monkeypatch.setattr(exact, "_Run", spy)
    plan = plan_with("exact", PROBLEM, options=record, time_limit=7.0)
    assert seen == {"limit": 7.0, "cpu": 0.5} and validate(PROBLEM, plan) == []


def test_solve_takes_a_solve_options_record_or_its_fields():
    settings = SolveOptions(time_limit=10.0, planner="best", threads=1)
    plan = solve(PROBLEM, settings)
    assert validate(PROBLEM, plan) == [] and plan.status == "optimal"
    assert solve(PROBLEM, time_limit=10.0, threads=1).arena_size == plan.arena_size
    with pytest.raises(TypeError, match="not both"):
        solve(PROBLEM, settings, seed=3)
    with pytest.raises(TypeError):
        solve(PROBLEM, time_limt=3)  # a misspelt field is refused


def test_the_seed_and_threads_go_from_solve_options_into_the_exact_record():
    stop = threading.Event()
    record = exact_settings(SolveOptions(time_limit=3.5, seed=7, threads=1),
                            {"deterministic": True}, stop=stop)
    assert (record.time_limit, record.seed, record.threads) == (None, 7, 1)  # plan_with's
    assert record.deterministic and record.stop is stop
    kept = exact_settings(SolveOptions(time_limit=None), ExactOptions(orders=("area",)))
    assert kept.time_limit is None and kept.orders == ("area",) and kept.threads == 0


def test_the_report_runs_the_exact_planner_with_the_record():
    seen = []
    fragmenting = Problem([Buffer("a", 3, 0, 2, alignment=4),
                           Buffer("b", 3, 1, 3, alignment=4), Buffer("c", 2, 0, 3)])
    report = solve_report(fragmenting, SolveOptions(time_limit=10.0, threads=1),
                          exact_options=ExactOptions(orders=("area",)), on_progress=seen.append)
    assert report.heuristic.status == "feasible"  # above the lower bound: the exact planner runs
    assert report.exact is not None and report.exact.status == "optimal"
    assert seen and seen[-1].best_bound == report.exact.arena_size  # the callback came along
    assert validate(fragmenting, report.plan) == []


def test_heuristic_is_the_old_name_of_the_solve_planner_for_one_release():
    """The planner `solve` starts from is ``planner``, as ``--planner`` on the command line;
    ``heuristic`` still works, with a warning."""
    with pytest.warns(DeprecationWarning, match="use planner"):
        assert SolveOptions(heuristic="naive").planner == "naive"
    with pytest.warns(DeprecationWarning, match="use planner"):
        assert SolveOptions(planner="naive").heuristic == "naive"
    with pytest.raises(ProblemError, match="old name"):
        SolveOptions(heuristic="naive", planner="best")
    with pytest.warns(DeprecationWarning, match="use planner"):
        report = solve_report(PROBLEM, time_limit=10.0, heuristic="naive", exact=False)
    assert "naive" in report.heuristics and not validate(PROBLEM, report.plan)


def test_workers_is_the_old_name_of_threads_for_one_release():
    """CP-SAT's threads are ``threads`` everywhere; ``workers`` still works, with a warning."""
    import memplan

    with pytest.warns(DeprecationWarning, match="use threads"):
        assert SolveOptions(workers=2).threads == 2
    with pytest.warns(DeprecationWarning, match="use threads"):
        assert ExactOptions(workers=3).threads == 3
    with pytest.warns(DeprecationWarning, match="use threads"):
        assert ExactOptions(threads=3).workers == 3
    with pytest.raises(ProblemError, match="old name"):
        SolveOptions(workers=2, threads=1)
    with pytest.warns(DeprecationWarning, match="workers="):
        plan = plan_with("exact", PROBLEM, time_limit=10.0, workers=1)
    assert plan.status == "optimal" and not validate(PROBLEM, plan)
    with pytest.warns(DeprecationWarning, match="workers="):
        assert memplan.explain(PROBLEM, time_limit=10.0, workers=1).peaks
