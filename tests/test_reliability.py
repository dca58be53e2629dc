"""Inputs that once broke memplan, each kept as a regression test.

Every test builds its own input. What they hold memplan to: a problem it
cannot represent is refused (exit 2, one line naming the file, line or buffer
and the field); a plan that breaks its problem is reported (exit 1); never a
traceback, never a wrong "valid" or "optimal".
"""

from __future__ import annotations

import builtins
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from memplan import Alias, Buffer, Problem, ProblemError, Region, plan_with, planners, validate
from memplan.api import SolveOptions
from memplan.cli import BAD_INPUT, FAILED, OK, main
from memplan.formats import memplan_json, minimalloc_csv
from memplan.limits import MAX_BYTES
from tests.test_onnx_frontend import to_external_data, weights_model

INT64_MAX = (1 << 63) - 1


def memplan_planners() -> list[str]:
    """The planners memplan registers (not the test doubles other tests may add)."""
    return [name for name, fn in planners().items() if fn.__module__.startswith("memplan.")]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv, naming: str = "") -> str:
    """Run the command; it must exit 2 with one line on stderr (naming ``naming``)."""
    code, out, err = run(capsys, *argv)
    assert code == BAD_INPUT, (code, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert naming in err, err
    return err


def write_json(path: Path, document) -> Path:
    path.write_text(json.dumps(document))
    return path


def problem_doc(buffers, **fields) -> dict:
    return {"format": "memplan-problem", "version": 1, "buffers": buffers, **fields}


def plan_doc(offsets: dict, **fields) -> dict:
    top = 0
    return {"format": "memplan-plan", "version": 1, "planner": "hand", "status": "feasible",
            "arena_size": top, "lower_bound": 0, "best_bound": 0, "offsets": offsets, **fields}


ABC = [{"id": "a", "size": 8, "start": 0, "end": 3}, {"id": "b", "size": 4, "start": 0, "end": 3},
       {"id": "c", "size": 4, "start": 0, "end": 3}]


# ------------------------------------------------------------ 1, 2, 3: int64
def test_an_offset_near_2_63_is_not_called_valid(capsys, tmp_path):
    problem = write_json(tmp_path / "abc.json", problem_doc(ABC))
    offsets = {"a": INT64_MAX - 7, "b": INT64_MAX - 3, "c": 0}  # a and b share bytes
    plan = write_json(tmp_path / "plan.json", plan_doc(offsets))
    code, out, err = run(capsys, "validate", problem, plan)
    assert code != OK and "valid," not in out
    mapping = validate(Problem([Buffer(b["id"], b["size"], 0, 3) for b in ABC]), offsets)
    assert [v.kind for v in mapping] == ["offset", "offset"]


def test_offsets_at_the_limit_are_checked_exactly(tmp_path):
    problem = Problem([Buffer(b["id"], b["size"], 0, 3) for b in ABC])
    overlapping = {"a": MAX_BYTES - 8, "b": MAX_BYTES - 4, "c": 0}
    assert [v.kind for v in validate(problem, overlapping)] == ["overlap"]
    apart = {"a": MAX_BYTES - 16, "b": MAX_BYTES - 8, "c": 0}
    assert validate(problem, apart) == []


def test_sums_beyond_the_limit_are_refused_not_wrapped(capsys, tmp_path):
    huge = [{"id": k, "size": 1 << 62, "start": 0, "end": 2} for k in "ab"]
    path = write_json(tmp_path / "huge.json", problem_doc(huge))
    refused(capsys, "info", path, naming="huge.json")
    refused(capsys, "solve", path, naming="huge.json")
    with pytest.raises(ProblemError, match="beyond the largest arena"):
        Problem([Buffer("a", MAX_BYTES // 2 + 1, 0, 2), Buffer("b", MAX_BYTES // 2, 0, 2)])


def test_the_largest_accepted_sizes_give_exact_totals(capsys, tmp_path):
    half = MAX_BYTES // 2 - 8
    big = [{"id": k, "size": half, "start": 0, "end": 2} for k in "ab"]
    path = write_json(tmp_path / "big.json", problem_doc(big))
    code, out, err = run(capsys, "info", path, "--json")
    assert code == OK, err
    facts = json.loads(out)
    assert facts["lower_bound"] == facts["total_size"] == 2 * half
    code, out, err = run(capsys, "solve", path, "--json", "--time-limit", "5")
    assert code == OK, err
    summary = json.loads(out)
    assert summary["plan"]["arena_size"] == 2 * half and summary["plan"]["gap"] == 0


@pytest.mark.parametrize("field", ["size", "start", "end", "offset", "alignment"])
def test_numbers_beyond_int64_in_json_are_refused(capsys, tmp_path, field):
    buffer = {"id": "x", "size": 8, "start": 0, "end": 2, field: 10 ** 30}
    path = write_json(tmp_path / "p.json", problem_doc([buffer]))
    err = refused(capsys, "info", path, naming="p.json")
    assert "'x'" in err and "beyond" in err


def test_numbers_beyond_int64_in_csv_are_refused(capsys, tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,0,2,1000000000000000000000000000000\n")
    err = refused(capsys, "info", path, naming="p.csv:3")
    assert "'b'" in err and "size" in err


def test_capacity_beyond_int64_is_refused(capsys, tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\n")
    refused(capsys, "solve", path, "--capacity", str(10 ** 30), naming="capacity")


def symbolic_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]),
                               helper.make_node("Relu", ["a"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_dims_beyond_the_limit_are_refused(capsys, tmp_path):
    path = tmp_path / "sym.onnx"
    path.write_bytes(symbolic_model().SerializeToString())
    refused(capsys, "info", path, "--dim", f"n={1 << 40}", "--dim", f"m={1 << 40}",
            naming="sym.onnx")
    refused(capsys, "info", path, "--dim", f"n={10 ** 30}", "--dim", "m=2")
    refused(capsys, "info", path, "--dim", "n=²", "--dim", "m=2", naming="--dim")


# ------------------------------------------------------------ 4: regions
def test_duplicate_region_names_are_refused(capsys, tmp_path):
    regions = [{"name": "sram", "capacity": 64}, {"name": "sram", "capacity": 1024}]
    path = write_json(tmp_path / "r.json", problem_doc(ABC, regions=regions))
    refused(capsys, "solve", path, naming="duplicate region name")
    with pytest.raises(ProblemError, match="duplicate region"):
        Problem([Buffer("a", 8, 0, 1)], regions=[Region("x"), Region("x")])


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "-1", "true"])
def test_a_region_cost_that_is_not_a_number_is_refused(capsys, tmp_path, cost):
    text = json.dumps(problem_doc(ABC, regions=[{"name": "sram", "capacity": 64, "cost": 0}]))
    path = tmp_path / "r.json"
    path.write_text(text.replace('"cost": 0', f'"cost": {cost}'))
    refused(capsys, "solve", path, naming="r.json")


# ------------------------------------------------------------ 5: exact planner's hint
def pinned_twice() -> Problem:
    buffers = [Buffer(f"b{i}", 8 * (1 + i % 5), i, i + 3) for i in range(10)]
    buffers += [Buffer("p1", 16, 0, 2, offset=0), Buffer("p2", 16, 5, 7, offset=0)]
    return Problem(buffers)


def test_two_pinned_buffers_at_one_offset_make_a_valid_hint():
    from ortools.sat.python import cp_model

    from memplan.solver.model import build_model

    problem = pinned_twice()
    model = build_model(problem, lower_bound=0, upper_bound=None, minimize=True)
    model.hint(plan_with("naive", problem).offsets)  # both pinned bases: one CP-SAT constant
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 5
    assert solver.status_name(solver.solve(model.cp)) in ("OPTIMAL", "FEASIBLE")


def test_the_exact_planner_plans_two_pinned_buffers_at_one_offset():
    problem = pinned_twice()
    for hint in (None, plan_with("naive", problem)):
        plan = plan_with("exact", problem, time_limit=1, hint=hint)
        assert validate(problem, plan) == []


# ------------------------------------------------------------ 6: capacity below the divisor
def test_a_capacity_below_the_size_divisor_is_infeasible(capsys, tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    code, out, err = run(capsys, "solve", path, "--capacity", "7")
    assert code == FAILED, err
    assert "infeasible" in out and "Traceback" not in err
    plan = plan_with("exact", minimalloc_csv.read_problem(path, capacity=7), time_limit=5)
    assert plan.status == "infeasible" and plan.best_bound > 7


# ------------------------------------------------------------ 7, 8: types and versions
@pytest.mark.parametrize("make", [
    lambda: Buffer("a", 8.5, 0, 3), lambda: Buffer("a", 8, 0.5, 3), lambda: Buffer("a", 8, 0, 3.0),
    lambda: Buffer("a", 8, 0, 3, offset=4.7), lambda: Buffer("a", 8, 0, 3, alignment=True),
    lambda: Buffer("a", "8", 0, 3), lambda: Buffer("a", None, 0, 3)])
def test_non_integers_are_refused_by_the_problem(make):
    with pytest.raises(ProblemError, match="buffer 'a'.*whole number"):
        Problem([make()])


def test_a_non_integer_alias_delta_is_refused():
    with pytest.raises(ProblemError, match="delta must be a whole number"):
        Problem([Buffer("a", 8, 0, 3), Buffer("b", 4, 0, 3)], aliases=[Alias("a", "b", 2.5)])
    with pytest.raises(ProblemError, match="whole number"):
        Problem.from_arrays(np.array([8.0, 4.0]), [0, 0], [1, 1])


@pytest.mark.parametrize("offset", [8.9, 8.0, None, "8", True, [8], {"x": 1}])
def test_plan_offsets_that_are_not_integers_are_refused(capsys, tmp_path, offset):
    problem = write_json(tmp_path / "abc.json", problem_doc(ABC))
    plan = write_json(tmp_path / "plan.json", plan_doc({"a": 0, "b": offset, "c": 12}))
    refused(capsys, "validate", problem, plan, naming="'b'")
    assert [v.kind for v in validate(memplan_json.read_problem(problem),
                                     {"a": 0, "b": offset, "c": 12})] == ["offset"]


def test_a_csv_solution_offset_of_8_9_is_refused(capsys, tmp_path):
    problem = tmp_path / "p.csv"
    problem.write_text("id,lower,upper,size\na,0,2,8\nb,2,4,8\n")
    solution = tmp_path / "s.csv"
    solution.write_text("id,lower,upper,size,offset\na,0,2,8,0\nb,2,4,8,8.9\n")
    refused(capsys, "validate", problem, solution, naming="s.csv:3")


def test_deeply_nested_json_is_refused(capsys, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    refused(capsys, "info", path, naming="deep.json")
    problem = write_json(tmp_path / "abc.json", problem_doc(ABC))
    refused(capsys, "validate", problem, path, naming="deep.json")


@pytest.mark.parametrize("widths", [[1.5, 2], ["x"], [True], [-1], [10 ** 30], 7])
def test_widths_that_are_not_whole_numbers_are_refused(capsys, tmp_path, widths):
    path = write_json(tmp_path / "w.json", problem_doc(ABC, widths=widths))
    refused(capsys, "info", path, naming="w.json")


@pytest.mark.parametrize("version", [99, 0, "1", True])
def test_unknown_versions_are_refused(capsys, tmp_path, version):
    path = write_json(tmp_path / "v.json", problem_doc(ABC, version=version))
    refused(capsys, "info", path, naming="version")
    problem = write_json(tmp_path / "abc.json", problem_doc(ABC))
    plan = write_json(tmp_path / "plan.json", plan_doc({"a": 0, "b": 8, "c": 12},
                                                       version=version))
    refused(capsys, "validate", problem, plan, naming="version")


# ------------------------------------------------------------ 9, 10: ONNX external data
def external_model(tmp_path: Path, location: str) -> Path:
    m = weights_model()
    to_external_data(m.graph.initializer[2], location)
    path = tmp_path / "external.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.fixture
def opened(monkeypatch):
    """Every path Python's open() is asked for while the test runs."""
    seen: list[str] = []
    real = builtins.open

    def spy(file, *args, **kwargs):
        seen.append(str(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    return seen


@pytest.mark.parametrize("location", ["/etc/passwd", "../x.bin", "secret.bin"])
@pytest.mark.parametrize("command", [
    ("solve", "-o", "{out}.onnx"), ("solve", "-o", "{out}.json"), ("solve", "-o", "{out}.h"),
    ("solve", "-o", "{out}.bin"), ("solve", "--export", "onnx", "-o", "{out}.model"),
    ("info",), ("convert", "-o", "{out}.json"), ("compare", "--planners", "naive")])
def test_no_path_named_in_a_model_is_ever_opened(capsys, tmp_path, opened, location, command):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 64)
    path = external_model(tmp_path, location)
    out = str(tmp_path / "out")
    argv = [command[0], path, *(part.format(out=out) for part in command[1:])]
    if command[0] == "solve":
        argv += ["--time-limit", "2"]
    code, stdout, err = run(capsys, *argv)
    assert "Traceback" not in err and err.count("\n") <= 1, err
    assert code in (OK, BAD_INPUT), err
    assert not [p for p in opened if Path(p).name in ("passwd", "x.bin", "secret.bin")]
    if command[1:3] == ("-o", "{out}.onnx") and code == OK:
        import onnx

        written = onnx.load_model_from_string(Path(out + ".onnx").read_bytes())
        tensor = written.graph.initializer[2]
        assert tensor.data_location == TensorProto.EXTERNAL and not tensor.raw_data
        assert any(p.key == "memplan.plan" for p in written.metadata_props)


def test_prove_refuses_broken_models_in_one_line(capsys, tmp_path):
    whole = weights_model().SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(whole[: len(whole) // 2])
    plan = write_json(tmp_path / "plan.json", plan_doc({"x": 0, "a": 0, "y": 0}))
    for path in (truncated, external_model(tmp_path, "/etc/passwd"), tmp_path / "none.onnx"):
        refused(capsys, "prove", path, plan, naming=path.name)


# ------------------------------------------------------------ 11: Ctrl-C and options
def test_ctrl_c_while_importing_prints_no_traceback(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    command = [sys.executable, "-m", "memplan.cli", "info", str(path)]
    for delay in (0.05, 0.15, 0.3, 0.5, 0.8):
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        if "init_import_site" in err or (err.count("memplan/") == 1
                                         and "import memplan.startup" in err):
            continue  # the interpreter's own start, before memplan's first module ran
        assert "Traceback" not in err, (delay, err)
        assert child.returncode in (OK, 130, -signal.SIGINT), (delay, child.returncode, err)


@pytest.mark.parametrize("option", [("--time-limit", "-1"), ("--time-limit", "nan"),
                                    ("--heuristic-time-limit", "-1"), ("--threads", "-3"),
                                    ("--threads", "0")])
def test_nonsense_run_options_are_refused(capsys, tmp_path, option):
    path = tmp_path / "two.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    refused(capsys, "solve", path, *option, naming=option[0])
    if option[0] != "--heuristic-time-limit":
        refused(capsys, "compare", path, *option)


def test_run_options_are_checked_in_the_library():
    for bad in (dict(time_limit=-1), dict(time_limit=float("nan")), dict(threads=-3),
                dict(heuristic_time_limit=float("nan")), dict(seed=1.5)):
        with pytest.raises(ProblemError):
            SolveOptions(**bad)


# ------------------------------------------------------------ 12: aliases and conflicts
def two_outputs() -> Problem:
    """a -> b and a -> c may both be taken: b and c live together (an in-place write twice)."""
    return Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3), Buffer("c", 8, 1, 4),
                    Buffer("d", 8, 2, 4)],
                   aliases=[Alias("a", "b", optional=True), Alias("a", "c", optional=True),
                            Alias("b", "d", optional=True)])


def test_an_in_place_write_cannot_serve_two_live_outputs():
    problem = two_outputs()
    found = validate(problem, {"a": 0, "b": 0, "c": 0, "d": 16})
    assert [(v.kind, v.buffers) for v in found] == [("overlap", ("b", "c"))]
    # a chain a -> b -> d does not let its ends share either (a and d are never live
    # together here, so it is allowed); each side of one alias may share
    assert validate(problem, {"a": 0, "b": 0, "c": 8, "d": 0}) == []
    for name in memplan_planners():
        plan = plan_with(name, problem, time_limit=2)
        assert validate(problem, plan) == [], name
        b, c = plan.offset_of(problem, "b"), plan.offset_of(problem, "c")
        assert abs(b - c) >= 8, name
    assert plan_with("exact", problem, time_limit=5).arena_size == 16  # a and b, then c


def test_the_validator_lets_only_the_two_sides_of_an_optional_alias_share():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3), Buffer("v", 8, 1, 3)],
                      aliases=[Alias("a", "b", optional=True), Alias("b", "v")])
    assert validate(problem, {"a": 0, "b": 0, "v": 0}) == []  # v is b's view: one group
    chain = Problem([Buffer("a", 8, 0, 3), Buffer("b", 8, 1, 2), Buffer("c", 8, 2, 3)],
                    aliases=[Alias("a", "b", optional=True), Alias("b", "c", optional=True)])
    assert [v.kind for v in validate(chain, {"a": 0, "b": 0, "c": 0})] == ["overlap"]


def test_a_mandatory_alias_and_a_conflict_between_the_same_buffers_are_refused(capsys, tmp_path):
    buffers = [Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3)]
    with pytest.raises(ProblemError, match="buffer '[ab]': conflicts with '[ab]'"):
        Problem(buffers, aliases=[Alias("a", "b")], conflicts=[("a", "b")])
    # a conflict between the two sides of an optional alias: the alias is never taken
    both = Problem(buffers, aliases=[Alias("a", "b", optional=True)], conflicts=[("b", "a")])
    for name in memplan_planners():
        plan = plan_with(name, both, time_limit=2)
        assert validate(both, plan) == [] and plan.arena_size == 16, name
    # a conflict between two slices of one Concat holds by itself: accepted
    slices = [Buffer("x", 8, 0, 2), Buffer("y", 8, 0, 2), Buffer("cat", 16, 1, 3)]
    Problem(slices, aliases=[Alias("cat", "x", 0), Alias("cat", "y", 8)], conflicts=[("x", "y")])
    path = write_json(tmp_path / "ac.json", problem_doc(
        [{"id": k, "size": 8, "start": 0, "end": 2} for k in "ab"],
        aliases=[{"src": "a", "dst": "b"}], conflicts=[["a", "b"]]))
    refused(capsys, "solve", path, naming="conflicts with")


def test_explicit_conflicts_hold_whatever_the_aliases_say():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3), Buffer("c", 8, 2, 4)],
                      aliases=[Alias("a", "b", optional=True)], conflicts=[("a", "c")])
    assert [v.kind for v in validate(problem, {"a": 0, "b": 8, "c": 0})] == ["conflict"]


# ------------------------------------------------------------ 13: CSV with a BOM
def test_a_csv_with_a_byte_order_mark_is_read(capsys, tmp_path):
    path = tmp_path / "excel.12.csv"
    path.write_bytes("id,lower,upper,size\r\na,0,2,8\r\nb,1,3,4\r\n".encode("utf-8-sig"))
    problem = minimalloc_csv.read_problem(path)
    assert problem.ids == ("a", "b") and problem.capacity == 12
    code, out, err = run(capsys, "solve", path, "--time-limit", "2")
    assert code == OK, err
