"""Every command on malformed and extreme input, in bounded time.

What each run is held to:

- the exit code is one the command documents (`EXIT`);
- no traceback; an error (exit 2) is one line ``memplan COMMAND: error: ...``
  (argparse's usage line may precede it for a value argparse itself refuses;
  warnings are one line each, ``memplan COMMAND: warning: ...``);
- it ends within its time limit plus `MARGIN` (each run is watched from a
  thread, so a hang fails the test instead of stalling the suite);
- a plan it writes passes `memplan.validate` and the brute-force pairwise
  checker of `tests.test_fuzz`; a sweep's rows say they were validated and
  never claim an arena below the lower bound or a fit above the capacity.

The inputs: good and broken models of every format (`inputs`), and per
command a table of cases (`CASES`) plus generated combinations of a model
and extreme option values (`OPTIONS`). To cover a new refusal, add a file to
`inputs`, a row to `CASES` or a value to `OPTIONS`. In-process runs
(`memplan.cli.main`) keep the whole file within about a minute on a loaded
machine; sweeps share one small Dask cluster.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memplan
from memplan import Alias, Buffer, Problem, validate
from memplan.cli import main
from memplan.formats import memplan_json

from .test_fuzz import brute_force_violations
from .test_refusals import float_input, onnx_model

try:
    from .test_tflite import chain as tflite_chain
except pytest.skip.Exception:  # the tflite extra is not installed
    tflite_chain = None

EXIT = {"solve": {0, 1, 2}, "compare": {0, 2}, "validate": {0, 1, 2}, "info": {0, 2},
        "convert": {0, 2}, "explain": {0, 1, 2}, "prove": {0, 1, 2}, "sweep": {0, 1, 2}}
MARGIN = 30.0  # seconds past a run's own limits before it counts as a hang (a loaded machine)
LIMITS = ["--time-limit", "0.5", "--heuristic-time-limit", "0.1"]


# ------------------------------------------------------------------ running one command
def run(argv: list, *, limit: float = 2.0) -> tuple[int, str, str]:
    """``memplan *argv`` in this process, watched: (exit code, stdout, stderr)."""
    argv = [str(a) for a in argv]
    out, err, result = io.StringIO(), io.StringIO(), {}

    def target():
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                result["code"] = main(argv)
        except SystemExit as stop:  # argparse refusing a value
            result["code"] = stop.code
        except BaseException as error:  # noqa: BLE001 - what escapes is the failure
            result["error"] = error

    worker = threading.Thread(target=target, daemon=True)
    began = time.monotonic()
    worker.start()
    worker.join(limit + MARGIN)
    assert not worker.is_alive(), f"memplan {' '.join(argv)}: still running after " \
                                  f"{time.monotonic() - began:.0f} s"
    assert "error" not in result, f"memplan {' '.join(argv)}: {result.get('error')!r}"
    code, text = result["code"], err.getvalue()
    command = argv[0]
    assert code in EXIT[command], (argv, code, text)
    assert "Traceback" not in text, (argv, text)
    if code == 2:
        lines = [line for line in text.splitlines() if ": warning: " not in line]
        errors = [line for line in lines if line.startswith((f"memplan {command}: error: ",
                                                             "memplan: error: "))]
        assert len(errors) == 1 and lines[-1] == errors[0], (argv, text)
        assert all(line.startswith("usage: ") or line.startswith(" ") for line in lines[:-1]), \
            (argv, text)
    return code, out.getvalue(), text


def check_plan_file(model: Path, plan_file: Path) -> None:
    """A plan a command wrote: valid for the model's problem, twice over."""
    if not plan_file.exists():
        return
    problem = memplan.load(model)
    plan = memplan_json.read_plan(plan_file, problem)
    violations = [v for v in validate(problem, plan)
                  if not (v.kind == "capacity" and plan.status in ("infeasible", "unknown"))]
    assert violations == [] and brute_force_violations(problem, plan) == [], (model, violations)
    plan_file.unlink()


# ------------------------------------------------------------------ the inputs
def _onnx_files(folder: Path) -> None:
    from onnx import helper, numpy_helper

    relu = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    onnx_model(folder / "tiny.onnx", [
        helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Reshape", ["c", "s"], ["y"])],
        [float_input("x", [1, 4, 8])], [float_input("y", [1, 32])],
        [numpy_helper.from_array(np.array([1, -1], np.int64), "s")])
    onnx_model(folder / "sym.onnx", relu, [float_input("x", ["N", 8])],
               [float_input("y", ["N", 8])])
    onnx_model(folder / "rank1.onnx", relu, [float_input("x", [7])], [float_input("y", [7])])
    onnx_model(folder / "empty.onnx", relu, [float_input("x", [0, 8])],
               [float_input("y", [0, 8])])
    onnx_model(folder / "twoerrors.onnx", [
        helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Cast", ["a"], ["b"], to=99),
        helper.make_node("Reshape", ["b", "x"], ["y"])], [float_input("x", [2, 4])],
        [float_input("y", [2, 4])])
    (folder / "cut.onnx").write_bytes((folder / "tiny.onnx").read_bytes()[:57])


def _problem_files(folder: Path) -> None:
    (folder / "chain.32.csv").write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,1,5,2\n"
                                         "b4,0,9,8\nb5,2,4,16\n")
    (folder / "digits.csv").write_text("id,lower,upper,size\na,0,1,1_000\n")
    (folder / "arabic.csv").write_text("id,lower,upper,size\na,0,1,\u0661\u0662\n",
                                       encoding="utf-8")
    (folder / "empty.csv").write_text("")
    (folder / "junk.json").write_bytes(b"\xff\xfe{not json")
    (folder / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (folder / "huge.json").write_text(json.dumps({"format": "memplan-problem", "version": 1,
                                                  "buffers": [{"id": "a", "size": 2 ** 60,
                                                               "start": 0, "end": 1}]}))
    wide = Problem([Buffer("a", 12, 0, 1), Buffer("b", 5, 0, 1), Buffer("c", 6, 1, 3),
                    Buffer("d", 3, 2, 4, alignment=4)],
                   aliases=[Alias("b", "a", 8), Alias("c", "d", 0, optional=True)],
                   conflicts=[("c", "d")], name="wide")
    memplan_json.write_problem(folder / "wide.json", wide)
    large = Problem([Buffer(f"t{i}", 2 ** 41 + 2 ** 38 * i, i % 3, i % 3 + 2) for i in range(5)],
                    name="large")
    memplan_json.write_problem(folder / "large.json", large)
    (folder / "folder.csv").mkdir()


def _tflite_files(folder: Path) -> None:
    if tflite_chain is None:
        return
    data = tflite_chain()
    (folder / "chain.tflite").write_bytes(data)
    flipped = bytearray(data)
    flipped[146] = (flipped[146] + 28) % 256  # an operator's tensor index past the list
    (folder / "flipped.tflite").write_bytes(bytes(flipped))
    (folder / "cut.tflite").write_bytes(data[:100])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz_inputs")
    _onnx_files(folder)
    _problem_files(folder)
    _tflite_files(folder)
    return folder


def models(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".csv", ".json", ".onnx",
                                                                ".tflite")) + \
        [folder / "missing.onnx"]


# ------------------------------------------------------------------ every model, every command
@pytest.mark.parametrize("command", ["info", "solve", "explain", "convert", "compare"])
def test_every_command_on_every_input(inputs, command, tmp_path):
    extra = {"solve": [*LIMITS, "-o", tmp_path / "plan.json"], "explain": ["--time-limit", "1"],
             "convert": ["-o", tmp_path / "out.json"],
             "compare": ["--planners", "naive,greedy_by_size", "--time-limit", "0.5"]}
    codes = set()
    for model in models(inputs):
        code, _, _ = run([command, model, *extra.get(command, [])])
        codes.add(code)
        if command == "solve":
            check_plan_file(model, tmp_path / "plan.json")
    assert 0 in codes and 2 in codes  # both good and broken inputs were met


CASES = {  # command -> argv after the command ({m} a folder of inputs, {o} a scratch folder)
    "solve": [
        ["{m}/tiny.onnx", "--reorder", "--reorder-method", "exact", "--reorder-time-limit", "1"],
        ["{m}/empty.onnx", "--reorder", "--reorder-method", "exact"],
        ["{m}/sym.onnx", "--reorder"], ["{m}/twoerrors.onnx", "--reorder"],
        ["{m}/chain.32.csv", "--capacity", "1", *LIMITS, "-o", "{o}/plan.json"],
        ["{m}/wide.json", "--capacity", "18", *LIMITS, "-o", "{o}/plan.json"],
        ["{m}/large.json", *LIMITS, "-o", "{o}/plan.json"],
        ["{m}/chain.32.csv", "{m}/wide.json", "--exclusive", *LIMITS],
        ["{m}/chain.32.csv", "{m}/chain.32.csv"],
        ["{m}/tiny.onnx", "--prove", *LIMITS], ["{m}/chain.tflite", "--prove", *LIMITS],
        ["{m}/flipped.tflite", "--prove"], ["{m}/chain.32.csv", "--prove"],
        ["{m}/chain.32.csv", "-o", "{o}/plan.tflite"],
        ["{m}/tiny.onnx", "--dim", "N=x"], ["{m}/chain.32.csv", "--no-inplace"],
        ["{m}/chain.32.csv", "--no-such-option"],
    ],
    "explain": [
        ["{m}/wide.json", "--capacity", c, "--time-limit", "5"] for c in ("13", "18", "20", "0")
    ] + [["{m}/chain.32.csv", "--planner", "nosuch"], ["{m}/chain.32.csv", "--planner", "none"],
         ["{m}/wide.json", "--time-limit", "none", "--seed", "3", "-o", "{o}/why.json"],
         ["{m}/chain.32.csv", "-o", "{o}/missing/why.json"]],
    "compare": [["{m}/wide.json", "--planners", "naive,best_fit", "--json", "-o", "{o}/t.csv"],
                ["{m}/chain.32.csv", "--planners", "naive", "-o", "{o}", "--quiet"],
                ["{m}/chain.32.csv", "--heuristic", "naive"]],
    "info": [["{m}/tiny.onnx", "--reorder", "--reorder-method", "exact"],
             ["{m}/empty.onnx", "--reorder", "--reorder-method", "exact"],
             ["{m}/chain.32.csv", "--reorder"], ["{m}/tiny.onnx", "--largest", "0"]],
    "convert": [["{m}/wide.json", "-o", "{o}/out.csv"], ["{m}/chain.32.csv", "-o", "{o}/x.txt"],
                ["{m}/chain.32.csv", "-o", "{o}/missing/out.json"]],
    "validate": [["{m}/chain.32.csv", "{m}/junk.json"], ["{m}/chain.32.csv", "{m}/missing.json"],
                 ["{m}/chain.32.csv", "{m}/chain.32.csv"], ["{m}/wide.json", "{m}/wide.json"]],
    "prove": [["{m}/chain.32.csv", "{m}/junk.json"], ["{m}/tiny.onnx", "{m}/junk.json"],
              ["{m}/flipped.tflite", "{m}/junk.json"], ["{m}/chain.tflite", "{m}/missing.json"]],
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_the_cases_of_each_command(inputs, command, tmp_path):
    for case in CASES[command]:
        if any("tflite" in str(a) for a in case) and tflite_chain is None:
            continue
        argv = [command, *(str(a).format(m=inputs, o=tmp_path) for a in case)]
        run(argv, limit=8.0)
        if command == "solve" and "-o" in argv and argv[argv.index("-o") + 1].endswith(".json"):
            check_plan_file(Path(argv[1]), Path(argv[argv.index("-o") + 1]))


def test_validate_and_prove_on_plans_written_then_broken(inputs, tmp_path):
    for model in ("wide.json", "tiny.onnx", "chain.tflite"):
        if model.endswith("tflite") and tflite_chain is None:
            continue
        plan_file = tmp_path / "plan.json"
        assert run(["solve", inputs / model, *LIMITS, "-o", plan_file])[0] in (0, 1)
        assert run(["validate", inputs / model, plan_file])[0] == 0
        document = json.loads(plan_file.read_text())
        offsets = document["plan"]["offsets"]
        for broken in ({k: 0 for k in offsets}, {k: -5 for k in offsets},
                       {k: 2 ** 62 for k in offsets}, {k: "x" for k in offsets}, {}):
            plan_file.write_text(json.dumps({**document, "plan": {**document["plan"],
                                                                  "offsets": broken}}))
            assert run(["validate", inputs / model, plan_file])[0] in (1, 2)
            if model != "wide.json":
                assert run(["prove", inputs / model, plan_file], limit=20)[0] in (1, 2)


# ------------------------------------------------------------------ generated combinations
OPTIONS = {  # option -> values, extreme and malformed among them
    "--capacity": ["0", "1", "17", "none", "9007199254740992", "9007199254740993", "-3", "x",
                   " ", "1e300", "1MiB", "512KiB"],
    "--alignment": ["1", "3", "64", "0", "-8", "4096"],
    "--seed": ["0", "-1", "99999999999999999999", "x"],
    "--dim": ["N=2", "N=0", "N=x", "M=3", "N=99999999999", "=3"],
    "--time-limit": ["-1", "0", "nan", "1e-9", "inf", "x", "-inf", "-1e3", "none"],
    "--threads": ["1", "0", "-3", "x"],
}
COMMANDS = {"solve": LIMITS, "explain": ["--time-limit", "2"], "info": [],
            "compare": ["--planners", "best_fit", "--time-limit", "0.5"]}


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(COMMANDS)), pick=st.integers(0, 10 ** 6),
       options=st.lists(st.sampled_from(sorted(OPTIONS)), max_size=3, unique=True),
       values=st.lists(st.integers(0, 10 ** 6), min_size=3, max_size=3))
def test_generated_commands(inputs, command, pick, options, values):
    files = models(inputs)
    argv = [command, files[pick % len(files)], *COMMANDS[command]]
    for option, value in zip(options, values, strict=False):
        if option == "--seed" and command in ("info", "explain"):
            continue
        argv += [option, OPTIONS[option][value % len(OPTIONS[option])]]
    run(argv, limit=8.0)


# ------------------------------------------------------------------ sweeps on one small cluster
@pytest.fixture(scope="module")
def scheduler():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def check_rows(path: Path) -> None:
    from memplan.sweeps.sweep_io import read_rows

    rows = read_rows(path)
    planned = rows[rows["arena_size"].notna()]
    assert planned["valid"].all()
    assert (planned["arena_size"] >= planned["lower_bound"]).all()
    fits = planned[planned["status"].isin(["optimal", "feasible"])]
    assert (fits["capacity"].isna() | (fits["arena_size"] <= fits["capacity"])).all()
    assert (fits["best_bound"] <= fits["arena_size"]).all()


def test_sweep_on_malformed_and_extreme_input(inputs, scheduler, tmp_path):
    out = tmp_path / "rows.csv"
    common = ["--scheduler", scheduler, "--time-limit", "1", "--heuristic-time-limit", "0.1",
              "--quiet"]
    files = [model for model in models(inputs) if model.is_file()]  # broken ones: error rows
    assert run(["sweep", *files, *common, "--planners", "naive,exact", "--capacity",
                "file,none,64", "-o", out], limit=60)[0] == 1
    for model in set(models(inputs)) - set(files):  # a folder without models, a missing file
        assert run(["sweep", model, *common, "-o", out])[0] == 2
    check_rows(out)
    out = tmp_path / "resumed.csv"  # its last row cut inside its quoted key, as a crash leaves it
    good = [inputs / name for name in ("chain.32.csv", "wide.json", "tiny.onnx")]
    assert run(["sweep", *good, *common, "--planners", "naive,exact", "-o", out])[0] == 0
    out.write_bytes(out.read_bytes()[:-7])
    code, _, err = run(["sweep", *good, *common, "--planners", "naive,exact", "-o", out])
    assert code == 0 and "dropped a row cut short" in err
    check_rows(out)
    for argv in (["--scheduler", "tcp://127.0.0.1:notaport"], ["--planners", "nosuch"],
                 ["-o", tmp_path / "rows.txt"], ["--batch", "1,2", "-o", out],
                 ["--option", "x.y=1"], ["--capacity", "12XB"]):
        run(["sweep", inputs / "rank1.onnx", *common[2:], *(argv if "--scheduler" in argv
                                                            else [*common[:2], *argv])],
            limit=30)
    check_rows(out)



@pytest.mark.parametrize("case", [["sweep", "{m}/chain.32.csv", "--scheduler",
                                   "tcp://127.0.0.1:notaport"],
                                  ["info", "{m}/flipped.tflite"],
                                  ["solve", "{m}/twoerrors.onnx", "--reorder"]])
def test_a_real_process_exits_2_with_one_line(inputs, case):
    """The same refusals in a process of their own: nothing but the one line on stderr."""
    import subprocess
    import sys

    if "tflite" in case[1] and tflite_chain is None:
        pytest.skip("the tflite extra is not installed")
    argv = [str(a).format(m=inputs) for a in case]
    done = subprocess.run([sys.executable, "-m", "memplan.cli", *argv], capture_output=True,
                          text=True, timeout=60 + MARGIN)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"memplan {case[0]}: error: ")
