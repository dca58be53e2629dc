"""One name per concept across the commands, and the old spellings kept for one release.

Every command's parser is built and its options compared: CP-SAT threads are
``--threads`` (``--workers`` is only Dask's processes, in ``sweep``), a time
limit is ``--time-limit``, JSON output is ``--json``, a file written is
``-o/--output``, ``--seed`` seeds planners only (a proof's inputs take
``--input-seed``), one planner is ``--planner NAME`` and several
``--planners A,B,...``. An old spelling still works, hidden from the help,
with one line on stderr naming the new one. No option is guessed from a
prefix, a negative number is a value, ``none`` is no limit in every command,
and every command that prints a table takes ``--json``.
"""

from __future__ import annotations

import argparse

import pytest

from memplan.cli import build_parser, main
from memplan.cli.exit_codes import OK
from memplan.cli.parser import is_deprecated


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()


def _options(command: str) -> dict[str, argparse.Action]:
    """The options a command shows (its old spellings left out), by each of their flags."""
    return {flag: action for action in COMMANDS[command]._actions
            if not is_deprecated(action) for flag in action.option_strings}


def _help(action: argparse.Action) -> str:
    return (action.help or "").lower()


def test_cp_sat_threads_are_threads_and_workers_are_processes():
    for command in COMMANDS:
        options = _options(command)
        if "--threads" in options:
            assert "cp-sat" in _help(options["--threads"]), command
            assert "thread" in _help(options["--threads"]), command
        if "--workers" in options:
            assert command == "sweep" and "process" in _help(options["--workers"]), command
        for flag, action in options.items():
            if action.dest in ("workers", "threads") and command != "sweep":
                assert flag == "--threads", (command, flag)  # SolveOptions.threads
    assert {c for c in COMMANDS if "--threads" in _options(c)} == {"solve", "compare",
                                                                   "explain", "sweep"}


def test_time_limits_json_and_outputs_are_spelled_alike():
    for command in COMMANDS:
        for flag, action in _options(command).items():
            if action.dest == "time_limit":
                assert flag == "--time-limit", (command, flag)
            if "json" in _help(action) and action.nargs == 0:  # a switch that prints JSON
                assert flag == "--json", (command, flag)
            if {"-o", "--output"} & set(action.option_strings):  # a file written
                assert set(action.option_strings) == {"-o", "--output"}, command
            assert flag not in ("--out", "--workers-threads", "--heuristic"), (command, flag)
    for command in ("solve", "prove", "validate", "info", "explain"):
        assert _options(command)["--json"].nargs == 0, command


def test_a_seed_seeds_planners_and_a_proof_has_its_own():
    for command in COMMANDS:
        options = _options(command)
        if "--seed" in options:
            assert "planner" in _help(options["--seed"]), command
        if "--input-seed" in options:
            assert "input" in _help(options["--input-seed"]), command
    assert "--seed" not in _options("prove") and "--input-seed" in _options("prove")
    assert "--input-seed" in _options("solve")


def test_planners_are_chosen_one_way():
    """``--planner NAME`` picks one, ``--planners A,B,...`` several; no other spelling."""
    for command in COMMANDS:
        for flag, action in _options(command).items():
            if "planner" in action.dest:
                if action.dest.endswith("time_limit") or action.dest == "planner_options":
                    continue
                assert flag in ("--planner", "--planners"), (command, flag)
                metavar = action.metavar or ""
                assert metavar.startswith("NAME" if flag == "--planner" else "A,B,..."), \
                    (command, flag, metavar)
    assert "--planners" in _options("compare") and "--planners" in _options("sweep")
    assert "--planner" in _options("solve") and "--planner" in _options("explain")


def test_the_help_shows_no_old_spelling():
    for command, parser in COMMANDS.items():
        text = parser.format_help()
        for old in ("--heuristic ", "--out ", "--workers"):
            if command == "sweep" and old == "--workers":
                continue
            assert old not in text, (command, old)


@pytest.mark.parametrize("old, new", [
    (["solve", "--workers", "1", "--heuristic", "naive"],
     ["solve", "--threads", "1", "--planner", "naive"]),
    (["compare", "M", "--workers", "2"], ["compare", "M", "--threads", "2"]),
    (["explain", "--workers", "2"], ["explain", "--threads", "2"]),
    (["prove", "m.onnx", "p.json", "--seed", "5"], ["prove", "m.onnx", "p.json",
                                                    "--input-seed", "5"]),
    (["sweep", "M", "--planner", "a,b", "--out", "rows.csv"],
     ["sweep", "M", "--planners", "a,b", "-o", "rows.csv"]),
])
def test_old_spellings_mean_the_new_ones_with_one_line_on_stderr(capsys, old, new):
    parser = build_parser()
    given = vars(parser.parse_args(old))
    err = capsys.readouterr().err
    assert given == vars(build_parser().parse_args(new))
    assert capsys.readouterr().err == ""
    lines = err.strip().splitlines()
    spelled = [flag for flag in old if flag.startswith("--") and flag not in new]
    assert len(lines) == len(spelled), err
    for line, flag in zip(lines, spelled, strict=True):
        assert line.startswith(f"memplan {old[0]}: warning: {flag} is deprecated, use --")


def test_an_old_spelling_still_runs(capsys, tmp_path):
    problem = tmp_path / "two.csv"
    problem.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    code = main(["solve", str(problem), "--heuristic", "greedy_by_size", "--workers", "1",
                 "--time-limit", "5", "--quiet"])
    err = capsys.readouterr().err
    assert code == OK
    assert "--heuristic is deprecated, use --planner" in err
    assert "--workers is deprecated, use --threads" in err


def _usage_error(capsys, argv: list[str]) -> str:
    """The one line ``memplan ARGV`` refuses with (exit 2)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_no_option_is_guessed_from_a_prefix(capsys):
    for command, parser in COMMANDS.items():
        assert parser.allow_abbrev is False, command
    assert build_parser().allow_abbrev is False
    for command, new in (("compare", "--planners"), ("sweep", "--planners")):
        err = _usage_error(capsys, [command, "m.csv", "--heuristic", "greedy_by_size"])
        assert "unrecognized arguments: --heuristic greedy_by_size" in err
        assert f"did you mean {new}?" in err and "time-limit" not in err
    err = _usage_error(capsys, ["solve", "m.csv", "--heur", "1"])  # a prefix of two options
    assert "unrecognized arguments: --heur" in err


@pytest.mark.parametrize("value", ["-inf", "-1", "-0.5", "-1e3", "-nan", "-Infinity"])
def test_a_negative_time_limit_is_a_value_in_every_command(capsys, value):
    for command in COMMANDS:
        if "--time-limit" not in _options(command):
            continue
        spaced = _usage_error(capsys, [command, "m.csv", "--time-limit", value])
        joined = _usage_error(capsys, [command, "m.csv", f"--time-limit={value}"])
        assert spaced == joined and "expected one argument" not in spaced, (command, spaced)
        assert "--time-limit must be a number of seconds" in spaced, (command, spaced)


@pytest.mark.parametrize("value", ["none", "inf", "Infinity", "1e400"])
def test_no_limit_is_spelled_alike_in_every_command(value):
    for command in COMMANDS:
        if "--time-limit" in _options(command):
            args = build_parser().parse_args([command, "m.csv", "--time-limit", value])
            assert args.time_limit is None, command


def test_every_table_can_be_json_and_every_planner_takes_a_seed():
    for command in ("solve", "compare", "validate", "info", "explain", "sweep", "prove"):
        assert _options(command)["--json"].nargs == 0, command
    for command in ("solve", "compare", "explain", "sweep"):  # the commands that plan
        assert "--seed" in _options(command), command
    for command in ("solve", "compare", "explain", "sweep"):
        assert "-o" in _options(command) and "--quiet" in _options(command), command


def test_compare_writes_and_prints_its_table_as_asked(capsys, tmp_path):
    import json

    problem = tmp_path / "two.csv"
    problem.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    argv = ["compare", str(problem), "--planners", "naive,greedy_by_size", "--seed", "3"]
    assert main([*argv, "--json"]) == OK
    rows = json.loads(capsys.readouterr().out)
    assert [row["planner"] for row in rows] == ["naive", "greedy_by_size"]
    assert all(row["arena_size"] == 16 for row in rows)
    for suffix, starts in ((".json", "["), (".csv", "problem,"), (".md", "| problem"),
                           (".txt", "problem")):
        out = tmp_path / f"table{suffix}"
        assert main([*argv, "-o", str(out), "--quiet"]) == OK
        assert capsys.readouterr().out == ""
        assert out.read_text().lstrip().startswith(starts), suffix
    err = _usage_error(capsys, [*argv, "-o", str(tmp_path / "missing" / "t.csv")])
    assert "does not exist" in err


def test_explain_takes_no_limit_a_seed_and_an_output(capsys, tmp_path):
    import json

    problem = tmp_path / "two.csv"
    problem.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    out = tmp_path / "why.json"
    assert main(["explain", str(problem), "--time-limit", "none", "--seed", "2",
                 "--capacity", "16", "-o", str(out), "--quiet"]) == OK
    assert capsys.readouterr().out == ""
    found = json.loads(out.read_text())
    assert found["capacity"]["kind"] == "fits" and found["lower_bound"] == 16
    err = _usage_error(capsys, ["explain", str(problem), "-o", str(tmp_path / "why.txt")])
    assert "unknown suffix '.txt'; expected .json" in err and not (tmp_path / "why.txt").exists()
