"""The ``memplan`` command line: subcommands, outputs, exit codes, live line, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from memplan import Problem, api, validate
from memplan.cli import BAD_INPUT, FAILED, OK, main
from memplan.cli.exit_codes import INTERRUPTED
from memplan.formats import memplan_json

from .conftest import CHALLENGING
from .test_api import OPTIMUM, TRICKY

EXAMPLE = str(CHALLENGING / "example.12.csv")


@pytest.fixture
def tricky(tmp_path) -> str:
    """TRICKY (heuristics 14 bytes, optimum 11) as a problem file."""
    path = tmp_path / "tricky.json"
    memplan_json.write_problem(path, Problem(TRICKY, name="tricky"))
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def memplan_process(*argv: str, **options) -> subprocess.Popen:
    """``memplan ...`` in a child process, as a user would run it."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.Popen([sys.executable, "-m", "memplan.cli", *argv], text=True, **options)


def test_solve_prints_the_summary_and_writes_every_output(capsys, tricky, tmp_path):
    plan_json, plan_csv, plot = (str(tmp_path / n) for n in ("p.json", "p.csv", "l.png"))
    code, out, err = run(capsys, "solve", tricky, "--time-limit", "5", "-o", plan_json,
                         "--csv", plan_csv, "--plot", plot)
    assert code == OK, err
    for word in ("buffers", "lower bound", "naive", "best heuristic", "exact", "optimal",
                 "gap", "seconds"):
        assert word in out
    assert os.path.getsize(plot) > 1000
    problem = memplan_json.read_problem(plan_json)
    plan = memplan_json.read_plan(plan_json, problem)
    assert plan.arena_size == OPTIMUM and validate(problem, plan) == []
    code, out, _ = run(capsys, "validate", tricky, plan_csv)
    assert code == OK and "valid" in out


def test_solve_json_summary(capsys, tricky):
    code, out, _ = run(capsys, "solve", tricky, "--time-limit", "5", "--json",
                       "--planner", "naive")  # the exact planner has work to do
    assert code == OK
    summary = json.loads(out)
    assert summary["buffers"] == len(TRICKY) and summary["lower_bound"] == OPTIMUM
    assert summary["naive"] == sum(b.size for b in TRICKY)
    assert summary["heuristic"]["arena_size"] > OPTIMUM
    assert summary["exact"]["status"] == "optimal"
    assert summary["plan"] == summary["exact"] and summary["plan"]["gap"] == 0


def test_solve_options_reach_the_planners(capsys, tmp_path):
    path = tmp_path / "plan.json"
    code, out, _ = run(capsys, "solve", EXAMPLE, "--capacity", "none", "--alignment", "8",
                       "--planner", "greedy_by_size", "--no-exact", "--seed", "3", "--json",
                       "-o", str(path))
    summary = json.loads(out)
    assert code == OK and summary["capacity"] is None and summary["exact"] is None
    assert summary["heuristic"]["planner"] == "greedy_by_size"
    offsets = json.loads(path.read_text())["plan"]["offsets"].values()
    assert all(offset % 8 == 0 for offset in offsets) and any(offsets)


def test_exact_planner_options_are_passed_on(capsys, tricky):
    code, out, _ = run(capsys, "solve", tricky, "--planner", "naive", "--orders",
                       "area,size", "--strategy", "none", "--threads", "1", "--json")
    assert code == OK and json.loads(out)["exact"]["arena_size"] == OPTIMUM


def test_quiet_prints_nothing(capsys):
    assert run(capsys, "solve", EXAMPLE, "--quiet", "--time-limit", "2") == (OK, "", "")


def test_an_impossible_capacity_exits_1(capsys, tricky):
    code, out, _ = run(capsys, "solve", tricky, "--capacity", str(OPTIMUM - 1),
                       "--time-limit", "5", "--planner", "naive")
    assert code == FAILED and "infeasible" in out


@pytest.mark.parametrize("argv, message", [
    (["info", "missing.csv"], "missing.csv: cannot read"),
    (["solve", "model.txt"], "model.txt: unknown file type"),
    (["solve", EXAMPLE, "--dim", "batch=1"], "ONNX models only"),
    (["solve", EXAMPLE, "--planner", "nope"], "unknown planner 'nope'; valid planners:"),
    (["convert", EXAMPLE, "-o", "x.txt"], "must end in .csv or .json"),
    (["solve", EXAMPLE, "--orders", "bogus"], "unknown order(s) ['bogus']"),
    (["info", EXAMPLE, "--no-inplace"], "--no-inplace: for ONNX models only"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == BAD_INPUT
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_malformed_file_names_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\nx,0,2,four\n")
    code, _, err = run(capsys, "info", str(bad))
    assert code == BAD_INPUT and f"{bad}:2: size must be an integer" in err


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(Exception, match="cannot read"):
        main(["info", "missing.csv", "--debug"])


def test_bad_usage_exits_2(capsys):
    assert main(["solve", "--time-limit", "soon"]) == BAD_INPUT
    assert main(["solve", "-h"]) == OK


def test_validate_catches_a_broken_plan(capsys, tricky, tmp_path):
    path = tmp_path / "plan.json"
    assert main(["solve", tricky, "--time-limit", "5", "-o", str(path), "--quiet"]) == OK
    document = json.loads(path.read_text())
    document["plan"]["offsets"]["c"] = document["plan"]["offsets"]["b"]
    path.write_text(json.dumps(document))
    code, out, _ = run(capsys, "validate", tricky, str(path))
    assert code == FAILED and "overlap" in out and "INVALID" in out
    code, out, _ = run(capsys, "validate", tricky, str(path), "--json")
    assert code == FAILED and json.loads(out)["valid"] is False


def test_info_and_convert(capsys, tmp_path):
    code, out, _ = run(capsys, "info", EXAMPLE)
    assert code == OK and "lower bound  12 B" in out and "largest tensors" in out
    assert json.loads(run(capsys, "info", EXAMPLE, "--json")[1])["buffers"] == 5
    for suffix in (".json", ".csv"):
        target = str(tmp_path / f"example{suffix}")
        assert run(capsys, "convert", EXAMPLE, "-o", target)[0] == OK
        assert json.loads(run(capsys, "info", target, "--json")[1])["lower_bound"] == 12


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_compare_formats(capsys, tricky, fmt):
    code, out, _ = run(capsys, "compare", EXAMPLE, tricky, "--format", fmt,
                       "--planners", "naive,best,exact", "--time-limit", "5")
    assert code == OK
    lines = out.strip().splitlines()
    assert len(lines) == 1 + (fmt == "markdown") + 2 * 3
    assert "gap" in lines[0] and "exact" in out
    if fmt == "markdown":
        assert lines[1].startswith("|---")
    if fmt == "csv":
        assert lines[0].startswith("problem,buffers,planner,arena_size")


def test_the_console_script_runs_on_a_pipe_without_live_line(tricky):
    done = memplan_process("solve", tricky, "--time-limit", "5")
    out, err = done.communicate(timeout=120)
    assert done.returncode == OK and "optimal" in out
    assert err == ""  # no live line on a pipe


def test_a_terminal_gets_the_live_line(tricky):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    chunks: list[bytes] = []

    def drain():  # read the terminal while the child writes, so it never blocks
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child is gone and the terminal closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    child = memplan_process("solve", tricky, "--time-limit", "5", "--planner", "naive",
                            stderr=follower,
                            env={**os.environ, "TERM": "xterm"})
    out, _ = child.communicate(timeout=120)
    os.close(follower)
    reader.join(timeout=10)
    os.close(leader)
    shown = b"".join(chunks)
    assert child.returncode == OK and "optimal" in out
    assert b"exact  best" in shown and b"bound" in shown


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is POSIX")
def test_ctrl_c_keeps_the_best_plan(challenging, tmp_path):
    output = tmp_path / "plan.json"
    began = time.perf_counter()  # how slow starting is on this machine now (it may be busy)
    subprocess.run([sys.executable, "-c", "import memplan.cli"], check=True)
    starting = time.perf_counter() - began
    child = memplan_process("solve", str(challenging / "D.1048576.csv"), "--capacity", "none",
                            "--time-limit", "120", "-o", str(output), "--json")
    time.sleep(2 + 4 * starting)  # loading and the heuristics: well under a second when idle
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == INTERRUPTED, err
    summary = json.loads(out)
    assert summary["interrupted"] and summary["seconds"] < 60
    problem = memplan_json.read_problem(output)
    plan = memplan_json.read_plan(output, problem)
    assert validate(problem, plan) == [] and plan.arena_size == summary["plan"]["arena_size"]
    assert plan.arena_size <= summary["heuristic"]["arena_size"]


def test_default_model_needs_no_argument(capsys):
    if not api.default_model().is_file():
        pytest.fail(f"the bundled model is missing: {api.default_model()}")
    code, out, _ = run(capsys, "solve", "--time-limit", "5")
    assert code == OK and "(bundled)" in out


def test_live_line_text():
    from memplan.cli.progress import LiveLine
    from memplan.solver.exact_options import Progress

    line = LiveLine(10, enabled=False)
    assert str(line.line()).startswith("planning  0.0 s")
    line(Progress(arena_size=2048, best_bound=1536, seconds=2.0))
    text = str(line.line())
    assert text.startswith("exact  best 2 KiB  bound 1.5 KiB  gap 25.0%  2.0/10 s")
    assert text.endswith("Ctrl-C: keep best")


@pytest.mark.parametrize("mode, arena", [("exclusive", 12), ("concurrent", OPTIMUM + 12)])
def test_several_models_share_one_arena(capsys, tricky, mode, arena):
    code, out, _ = run(capsys, "solve", tricky, EXAMPLE, f"--{mode}", "--planner", "naive",
                       "--time-limit", "10", "--json")
    summary = json.loads(out)
    assert code == OK and summary["plan"]["arena_size"] == arena
    assert summary["buffers"] == len(TRICKY) + 5
    models = summary["models"]
    assert [m["arena_size"] for m in models.values()] == ([OPTIMUM, 12] if mode == "exclusive"
                                                           else [OPTIMUM, OPTIMUM + 12])
    assert [m["base"] for m in models.values()] == [0, 0 if mode == "exclusive" else OPTIMUM]


def test_several_models_need_a_mode(capsys, tricky):
    code, _, err = run(capsys, "solve", tricky, EXAMPLE)
    assert code == BAD_INPUT and "--exclusive" in err and "--concurrent" in err


def test_export_formats(capsys, tricky, tmp_path):
    header = tmp_path / "plan.h"
    assert run(capsys, "solve", tricky, "-o", str(header), "--quiet")[0] == OK
    assert "#define" in header.read_text()
    code, _, err = run(capsys, "solve", tricky, "-o", str(tmp_path / "x"), "--export", "onnx")
    assert code == BAD_INPUT and "give one ONNX model" in err
