"""One rule per setting at every entry point; the command line's errors, help and outputs.

Time limits, worker counts, capacities and sizes with units are checked by
`memplan.limits` wherever they enter (the CLI's commands, `memplan.solve`,
`plan_with`, the exact planner's options, explain, reorder, sweeps); a bad
value stops a command at once with one line and exit 2. ``--gap`` stops the
exact planner early, never with a wrong "optimal"; MiniMalloc CSV holds
mandatory aliases as one row per group.
"""

from __future__ import annotations

import json
import math
import random

import pytest

import memplan
from memplan import Buffer, Problem, api, validate
from memplan.budget import command_pace
from memplan.cli import BAD_INPUT, FAILED, OK, main
from memplan.errors import ProblemError
from memplan.formats import memplan_json, minimalloc_csv
from memplan.limits import (
    MAX_BYTES,
    check_capacity,
    check_time_limit,
    check_workers,
    parse_gap,
    parse_size,
)
from memplan.plan import gap_of
from memplan.problem import Alias, Region
from memplan.shares import COMMAND_LEAST_SHARE
from memplan.solver.exact_options import ExactOptions

from .test_api import OPTIMUM, TRICKY

BAD_LIMITS = [math.nan, -1, -0.5, "3", True]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``memplan ...``: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err




# ---------------------------------------------------------------- the one rule
@pytest.mark.parametrize("text, value", [
    ("4096", 4096), ("1MiB", 1 << 20), ("512KiB", 512 << 10), ("512 kib", 512 << 10),
    ("2MB", 2_000_000), ("1.5KiB", 1536), ("1e3", 1000), (str(MAX_BYTES), MAX_BYTES),
    ("none", None)])
def test_sizes_with_units(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text, words", [
    (" ", "not a memory size"), ("1_000", "not a memory size"),
    ("\u0661\u0662", "not a memory size"), ("-1", "not a memory size"),
    ("0.5", "not a whole number"), ("1e300", "beyond"), ("1e999999999", "beyond"),
    (str(MAX_BYTES + 1), "beyond"), ("12 parsecs", "not a memory size")])
def test_bad_sizes_are_refused(text, words):
    with pytest.raises(ProblemError, match=words):
        parse_size(text)


def test_time_limits_workers_capacities_and_gaps():
    assert check_time_limit(None) is None and check_time_limit(math.inf) is None
    assert check_time_limit(0) == 0.0 and check_time_limit(2) == 2.0
    for bad in BAD_LIMITS:
        with pytest.raises(ProblemError, match="time_limit"):
            check_time_limit(bad)
    with pytest.raises(ProblemError, match="finite"):
        check_time_limit(math.inf, unlimited=False)
    assert check_workers(None) is None and check_workers(3) == 3
    for bad in (0, -3, 1.5, "2", True):
        with pytest.raises(ProblemError, match="workers"):
            check_workers(bad)
    assert check_capacity("1MiB") == 1 << 20 and check_capacity(None) is None
    for bad in (0, -1, 1.0, " ", MAX_BYTES + 1):
        with pytest.raises(ProblemError, match="capacity"):
            check_capacity(bad)
    assert parse_gap("1%") == parse_gap("0.01") == parse_gap(0.01) == (0.01, 0)
    assert parse_gap("4KiB") == parse_gap(4096) == (0.0, 4096)
    for bad in ("4096", "150%", "-1%", math.nan, None):
        with pytest.raises(ProblemError, match="gap"):
            parse_gap(bad)


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_every_library_entry_point_refuses_a_bad_time_limit(bad, tmp_path):
    from memplan.schedule.operator_order import reorder
    from memplan.sweeps.sweep import make_tasks

    problem = Problem(TRICKY)
    model = tmp_path / "m.json"
    memplan_json.write_problem(model, problem)
    calls = [lambda: memplan.plan_with("exact", problem, time_limit=bad),
             lambda: memplan.plan_with("best", problem, time_limit=bad),
             lambda: memplan.solve(problem, time_limit=bad),
             lambda: memplan.solve(problem, heuristic_time_limit=bad),
             lambda: ExactOptions(time_limit=bad),
             lambda: memplan.explain(problem, time_limit=bad),
             lambda: reorder(api.default_model(), time_limit=bad),
             lambda: make_tasks([model], time_limit=bad),
             lambda: make_tasks([model], heuristic_time_limit=bad)]
    for call in calls:
        with pytest.raises(ProblemError, match="time_limit"):
            call()


def test_every_library_entry_point_refuses_bad_workers_and_capacities(tmp_path):
    from memplan.sweeps.sweep import make_tasks

    problem = Problem(TRICKY)
    model = tmp_path / "m.json"
    memplan_json.write_problem(model, problem)
    for call in (lambda: memplan.solve(problem, threads=0),
                 lambda: memplan.plan_with("exact", problem, threads=-3),
                 lambda: memplan.explain(problem, threads=0),
                 lambda: make_tasks([model], threads=0)):
        with pytest.raises(ProblemError, match="workers|threads"):
            call()
    for bad in (0, " ", "1e300", MAX_BYTES + 1):
        for call in (lambda bad=bad: memplan.solve(problem, capacity=bad, time_limit=1),
                     lambda bad=bad: memplan.explain(problem, capacity=bad),
                     lambda bad=bad: make_tasks([model], capacities=[bad])):
            with pytest.raises(ProblemError, match="capacity"):
                call()
    plan = memplan.solve(problem, capacity="1KiB", time_limit=1)
    assert memplan.api.fits(plan) and plan.arena_size <= 1024


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize("argv, words", [
    (["solve", "--time-limit", "-1"], "--time-limit must be a number of seconds >= 0"),
    (["solve", "--time-limit", "nan"], "--time-limit must be"),
    (["solve", "--heuristic-time-limit", "nan"], "--heuristic-time-limit must be"),
    (["solve", "--threads", "0"], "--threads must be a whole number >= 1, got 0"),
    (["solve", "--capacity", "9007199254740993"], "beyond the largest size"),
    (["solve", "--capacity", " "], "not a memory size"),
    (["solve", "--capacity", "1e300"], "beyond the largest size"),
    (["solve", "--capacity", "0"], "capacity must be >= 1"),
    (["solve", "--gap", "2"], "a relative gap is a share in [0, 1)"),
    (["solve", "--reorder-time-limit", "inf"], "finite"),
    (["compare", "x.json", "--threads", "-3"], "--threads must be"),
    (["explain", "--time-limit", "nan"], "--time-limit must be"),
    (["explain", "--time-limit", "-1"], "--time-limit must be"),
    (["explain", "--threads", "-3"], "--threads must be"),
    (["sweep", "x.json", "--time-limit", "nan"], "--time-limit must be"),
    (["sweep", "x.json", "--time-limit", "-3"], "--time-limit must be"),
    (["sweep", "x.json", "--heuristic-time-limit", "nan"], "--heuristic-time-limit"),
    (["sweep", "x.json", "--capacity", "9007199254740993"], "beyond the largest size"),
    (["sweep", "x.json", "--capacity", " "], "expected capacities"),
    (["sweep", "x.json", "--capacity", "1e300"], "beyond the largest size"),
    (["sweep", "x.json", "--capacity", "0"], "capacity must be >= 1"),
    (["sweep", "x.json", "--workers", "0"], "--workers must be"),
    (["solve", "--tme-limit", "3"], "did you mean --time-limit?"),
    (["slove"], "did you mean solve?"),
])
def test_bad_values_stop_every_command_with_one_line(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == BAD_INPUT and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_units_are_taken_wherever_a_size_is(capsys, tricky, tmp_path):
    plan = str(tmp_path / "plan.json")
    assert run(capsys, "solve", tricky, "-o", plan, "--quiet")[0] == OK
    for argv in (["solve", tricky, "--capacity", "1KiB", "--time-limit", "2"],
                 ["explain", tricky, "--capacity", "1KiB", "--planner", "none"],
                 ["compare", tricky, "--capacity", "1KiB", "--planners", "best"],
                 ["validate", tricky, plan, "--capacity", "1KiB"],
                 ["info", tricky, "--alignment", "1KiB"]):
        code, _, err = run(capsys, *argv)
        assert "error" not in err and code in (OK, FAILED), (argv, err)


def test_a_folder_is_named_as_one(capsys, tmp_path):
    code, _, err = run(capsys, "solve", str(tmp_path))
    assert code == BAD_INPUT and "is a folder; give a model file" in err


def test_help_says_what_negated_flags_turn_off_and_every_model_kind(capsys):
    code, out, _ = run(capsys, "solve", "-h")
    text = " ".join(out.split())
    assert code == OK and "--no-exact do not run the exact planner" in text
    assert "turn off:" not in text and "TFLite" in text and "MiniMalloc CSV" in text
    assert "--gap SHARE|BYTES" in text


def test_outputs_are_checked_before_solving(capsys, tmp_path, tricky):
    conflicted = tmp_path / "c.json"
    memplan_json.write_problem(conflicted, Problem(TRICKY, conflicts=[("a", "b")]))
    for argv, words in (
            (["solve", tricky, "-o", str(tmp_path / "no" / "p.json")], "does not exist"),
            (["solve", tricky, "--csv", str(tmp_path)], "is a folder"),
            (["solve", str(conflicted), "--csv", str(tmp_path / "p.csv")],
             "--csv: MiniMalloc CSV cannot hold explicit conflicts"),
            (["solve", tricky, "--export", "onnx", "-o", str(tmp_path / "p.onnx")],
             "give one ONNX model"),
            (["sweep", tricky, "--report", str(tmp_path / "no" / "r.html")], "does not exist"),
            (["sweep", tricky, "-o", str(tmp_path / "no" / "r.csv")], "does not exist")):
        code, out, err = run(capsys, *argv)
        assert code == BAD_INPUT and out == "" and words in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "seconds" not in out


# ---------------------------------------------------------------- the gap, defined once
def test_the_summary_shows_one_gap_figure(capsys, tricky):
    code, out, _ = run(capsys, "solve", tricky, "--planner", "naive", "--time-limit", "5")
    assert code == OK and "over the bound" not in out
    summary = json.loads(run(capsys, "solve", tricky, "--planner", "naive", "--json",
                             "--time-limit", "5")[1])
    for part in ("heuristic", "exact", "plan"):
        plan = summary[part]
        assert plan["gap"] == gap_of(plan["arena_size"], summary["best_bound"])
        assert f"gap {plan['gap']:.2%}" in out


def test_gap_stops_the_pipeline_when_the_heuristic_plan_is_close_enough():
    report = api.solve_report(TRICKY, time_limit=5, planner="naive", gap="50%")
    assert report.exact is None and "within the gap" in report.skipped_exact
    assert report.plan.status == "feasible" and report.plan.gap <= 0.5
    report = api.solve_report(TRICKY, time_limit=5, planner="naive", gap=7)
    assert report.exact is None and report.plan.arena_size - report.plan.best_bound <= 7


LANES = [{}, {"canonical": False}, {"lns_buffers": 1}]


@pytest.mark.parametrize("lane", LANES)
def test_the_exact_planner_stops_within_the_gap_in_every_lane(lane):
    problem = Problem(TRICKY)
    naive = memplan.plan_with("naive", problem)  # 18 bytes: gap 7/18 to the optimum 11
    greedy = memplan.plan_with("greedy_by_size", problem)  # 14 bytes: the ceiling exact keeps
    for relative, absolute in ((0.4, 0), (0.0, 7)):
        plan = memplan.plan_with("exact", problem, hint=naive, time_limit=5, **lane,
                                 relative_gap=relative, absolute_gap=absolute)
        assert validate(problem, plan) == [] and plan.best_bound <= OPTIMUM
        assert plan.arena_size == min(naive.arena_size, greedy.arena_size) < naive.arena_size
        assert plan.status == "feasible"
    plan = memplan.plan_with("exact", problem, hint=naive, time_limit=5, **lane,
                             relative_gap=0.1)  # 12 at most: the search has to work
    assert validate(problem, plan) == [] and plan.arena_size <= 12


@pytest.mark.parametrize("lane", LANES)
def test_a_gap_never_yields_a_wrong_optimal(lane):
    """Random small problems: with a gap the plan is valid, within the gap of its proven
    bound (or the time ran out), that bound is at most the optimum, and "optimal" means the
    arena meets it."""
    rng = random.Random(7)
    for _ in range(6):
        buffers = []
        for i in range(8):
            start = rng.randrange(6)
            buffers.append(Buffer(f"b{i}", rng.choice([1, 2, 3, 5, 8]), start,
                                  start + rng.randrange(1, 4)))
        problem = Problem(buffers)
        optimum = memplan.plan_with("exact", problem, time_limit=5).arena_size
        for relative in (0.05, 0.3):
            plan = memplan.plan_with("exact", problem, time_limit=2, **lane,
                                     hint=memplan.plan_with("naive", problem),
                                     relative_gap=relative)
            assert validate(problem, plan) == [] and plan.best_bound <= optimum
            assert plan.gap <= relative or plan.seconds >= 1.5  # or the time ran out
            assert (plan.status == "optimal") == (plan.arena_size == plan.best_bound)


def test_gap_on_the_command_line(capsys, tricky):
    code, out, _ = run(capsys, "solve", tricky, "--planner", "naive", "--gap", "50%")
    assert code == OK and "within the gap tolerance" in out and "feasible" in out


# ---------------------------------------------------------------- regions: one meaning
def test_a_region_plan_with_a_gap_is_not_called_optimal(capsys, tmp_path):
    problem = Problem([Buffer("a", 100, 0, 3, regions=("sram",)),
                       Buffer("b", 60, 1, 4, regions=("sram", "dram")),
                       Buffer("c", 40, 2, 5, kind="scratch", max_size=80),
                       Buffer("d", 30, 0, 5, offset=0)],
                      aliases=[Alias("a", "b", 0, optional=True)], conflicts=[("a", "c")],
                      regions=[Region("sram", 128, 0.0), Region("dram", None, 1.0)])
    path = tmp_path / "regions.json"
    memplan_json.write_problem(path, problem)
    code, out, _ = run(capsys, "solve", str(path), "--time-limit", "5", "--json")
    plan = json.loads(out)["plan"]
    assert plan["arena_size"] > plan["best_bound"] and plan["status"] == "feasible"
    # the region model leaves out the sharing an optional alias allows: no cost bound claimed
    assert plan["cost_optimal"] is False
    code, out, _ = run(capsys, "solve", str(path), "--time-limit", "5")
    assert "feasible, gap" in out and "region cost" in out and "optimal," not in out


# ---------------------------------------------------------------- CSV with aliases
def aliased_problem() -> Problem:
    """A view (delta 0), a concat (deltas 0 and 32), an optional in-place alias, alignment."""
    return Problem([Buffer("x", 32, 0, 2, alignment=16), Buffer("x_view", 32, 1, 3),
                    Buffer("left", 32, 2, 4, alignment=16), Buffer("right", 16, 3, 5),
                    Buffer("cat", 48, 4, 7, alignment=16), Buffer("relu", 48, 6, 8),
                    Buffer("other", 40, 0, 8)],
                   aliases=[Alias("x", "x_view", 0), Alias("cat", "left", 0),
                            Alias("cat", "right", 32), Alias("cat", "relu", 0, optional=True)],
                   name="aliased")


def rows_offsets(problem: Problem, plan) -> dict[str, int]:
    return dict(zip(problem.ids, plan.offsets.tolist(), strict=True))


def test_csv_holds_alias_groups_as_one_row_and_plans_come_back_valid(tmp_path):
    problem = aliased_problem()
    path = tmp_path / "aliased.csv"
    minimalloc_csv.write_csv(path, problem)
    rows = minimalloc_csv.read_problem(path)
    assert len(rows) == len(problem) - 3  # x_view, left/right folded into their groups
    for planner in ("naive", "greedy_by_size", "best_fit", "exact"):
        plan = memplan.plan_with(planner, rows, time_limit=2)
        offsets = minimalloc_csv.expand_offsets(problem, rows_offsets(rows, plan))
        assert validate(problem, offsets) == [], planner
    solution = tmp_path / "solution.csv"
    plan = memplan.solve(problem, time_limit=2)
    minimalloc_csv.write_csv(solution, problem, plan)
    offsets = minimalloc_csv.read_solution(solution)[1]
    assert minimalloc_csv.expand_offsets(problem, offsets) == rows_offsets(problem, plan)


def test_convert_and_validate_with_alias_groups(capsys, tmp_path):
    source = tmp_path / "aliased.json"
    memplan_json.write_problem(source, aliased_problem())
    code, out, _ = run(capsys, "convert", str(source), "-o", str(tmp_path / "a.csv"))
    assert code == OK and "in 4 rows (one per alias group" in out
    assert "1 optional aliases left out" in out
    plan = tmp_path / "plan.csv"
    assert run(capsys, "solve", str(source), "--csv", str(plan), "--quiet")[0] == OK
    code, out, _ = run(capsys, "validate", str(source), str(plan))
    assert code == OK and "valid" in out


def test_csv_names_what_it_still_cannot_hold():
    skewed = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3, alignment=8)],
                     aliases=[Alias("a", "b", 4)])
    reason = minimalloc_csv.csv_refusal(skewed)
    assert "cannot hold the alignment of the alias group of 'a'" in reason
    pinned = Problem([Buffer("a", 8, 0, 2, offset=0)])
    assert "pinned offsets" in minimalloc_csv.csv_refusal(pinned)
    assert minimalloc_csv.csv_refusal(aliased_problem()) is None


# ---------------------------------------------------------------- bytes shown one way
def test_compare_shows_bytes_as_solve_does(capsys, tricky):
    big = Problem([Buffer("a", 3 << 20, 0, 2), Buffer("b", 1 << 20, 1, 3)], name="big")
    path = tricky.replace("tricky.json", "big.json")
    memplan_json.write_problem(path, big)
    code, out, _ = run(capsys, "compare", path, "--planners", "best")
    assert code == OK and "4 MiB (4194304 B)" in out and "gap" in out
    code, out, _ = run(capsys, "solve", path)
    assert "4 MiB (4194304 B)" in out


@pytest.mark.parametrize("name", ["light_squeezenet", "light_inception_v1"])
@pytest.mark.parametrize("inplace", [True, False])
def test_light_onnx_models_go_to_csv_and_back(tmp_path, name, inplace):
    from .conftest import light_models_dir

    problem = api.load(light_models_dir() / f"{name}.onnx", inplace=inplace)
    path = tmp_path / f"{name}.csv"
    minimalloc_csv.write_csv(path, problem)
    rows = minimalloc_csv.read_problem(path)
    plan = memplan.plan_with("best", rows)
    offsets = minimalloc_csv.expand_offsets(problem, rows_offsets(rows, plan))
    assert validate(problem, offsets) == []


def test_sample_outputs_come_from_the_real_command():
    from .sample_output import render, same_output

    shown = render("memplan solve --no-exact")
    assert "3.747 MiB (3928576 B)" in shown and shown.splitlines()[-1] == "seconds         …"
    documented = shown.replace("seconds         …", "seconds         0.03")
    assert same_output(documented, "memplan solve --no-exact")
    assert not same_output(documented.replace("3.747", "3.748"), "memplan solve --no-exact")


def test_a_mistyped_planner_or_choice_gets_a_suggestion(capsys):
    code, _, err = run(capsys, "solve", "--planner", "bset")
    assert code == BAD_INPUT and "unknown planner 'bset' (did you mean 'best'?)" in err
    code, _, err = run(capsys, "solve", "--export", "jsn")
    assert code == BAD_INPUT and "did you mean json?" in err


def test_a_plan_with_variable_scratch_goes_to_csv_with_its_granted_sizes(capsys, tmp_path):
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("s", 4, 1, 2, kind="scratch", max_size=16)])
    source = tmp_path / "scratch.json"
    memplan_json.write_problem(source, problem)
    assert "variable-size scratch" in minimalloc_csv.csv_refusal(problem)
    code, _, err = run(capsys, "solve", str(source), "--csv", str(tmp_path / "p.csv"), "--quiet")
    assert code == OK and err == ""
    assert run(capsys, "convert", str(source), "-o",
               str(tmp_path / "c.csv"))[0] == BAD_INPUT


def test_the_sweep_table_shows_bytes_in_human_units():
    import pandas as pd

    from memplan.cli.sweep import _shown
    from memplan.sweeps.sweep_io import COLUMNS

    row = {name: None for name in COLUMNS}
    row.update(model="m", arena_size=3 << 20, lower_bound=1 << 20, best_bound=1 << 20,
               capacity=None, peak_memory=90 << 20, gap=2 / 3, status="feasible")
    shown = _shown(pd.DataFrame([row], columns=list(COLUMNS)).astype(COLUMNS))
    assert shown.loc[0, "arena_size"] == "3 MiB" and shown.loc[0, "capacity"] == ""
    assert shown.loc[0, "gap"] == "66.67%"


def test_cp_sat_optimal_within_a_gap_limit_is_not_taken_as_proof():
    """CP-SAT says OPTIMAL when it stops at its gap limit: the outcome takes the bound."""
    from types import SimpleNamespace

    import numpy as np
    from ortools.sat.python import cp_model

    from memplan.solver.cp_search import _ended

    model = SimpleNamespace(peak=object(), problem=SimpleNamespace(sizes=np.array([4, 6])))
    best = np.array([0, 4])  # peak 10
    within = _ended(model, cp_model.OPTIMAL, best, 9, {}, final=True)
    assert within.status == "feasible" and within.bound == 9
    proven = _ended(model, cp_model.OPTIMAL, best, 10, {}, final=True)
    assert proven.status == "optimal" and proven.bound == 10


def test_the_time_limit_counts_from_the_start_of_the_command(monkeypatch):
    import time

    from memplan import startup
    from memplan.cli import solve

    monkeypatch.setattr(startup, "COMMAND_STARTED", time.perf_counter() - 3.0)  # loaded in 3 s
    monkeypatch.setattr(startup, "COMMAND_CPU", time.process_time() - 3.0)  # on a whole core
    assert 6.0 < solve._from_start(api.SolveOptions(time_limit=10), 10, 1).time_limit <= 7.0
    least = COMMAND_LEAST_SHARE * 2
    assert solve._from_start(api.SolveOptions(time_limit=2), 10, 1).time_limit == \
        pytest.approx(least)
    assert solve._from_start(api.SolveOptions(time_limit=None), 10, 1).time_limit is None


def test_the_time_limit_keeps_the_writing_of_the_outputs_at_the_commands_pace(monkeypatch):
    import time

    from memplan import startup
    from memplan.cli import solve

    # 4 s on the clock for 1 s of CPU: beside busy processes, a quarter of a core
    monkeypatch.setattr(startup, "COMMAND_STARTED", time.perf_counter() - 4.0)
    monkeypatch.setattr(startup, "COMMAND_CPU", time.process_time() - 1.0)
    assert command_pace() == pytest.approx(4.0, rel=0.05)
    writing = 4.0 * 2 * 50_000 * solve.OUTPUT_CPU_PER_BUFFER  # two files of 50k buffers
    left = solve._from_start(api.SolveOptions(time_limit=20), 50_000, 2).time_limit
    assert left == pytest.approx(20 - 4.0 - writing, abs=0.1)
    assert solve._from_start(api.SolveOptions(time_limit=20), 50_000, 0).time_limit == \
        pytest.approx(16.0, abs=0.1)
