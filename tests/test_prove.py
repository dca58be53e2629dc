"""``memplan prove MODEL PLAN.json`` and ``memplan solve MODEL --prove``: the user's own plan,
run in one arena under the model options it was planned with."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from memplan import ProblemError
from memplan.cli import BAD_INPUT, FAILED, OK, main
from memplan.onnx.prove import model_options, prove, read_plan_file

F = TensorProto.FLOAT


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mlp(tmp_path) -> str:
    """x[N, 64] -> MatMul W -> Add a view of bias B -> Relu -> y; x returned as well."""
    w = helper.make_tensor("W", F, [64, 64], [0.01 * (i % 7) for i in range(64 * 64)])
    b = helper.make_tensor("B", F, [64], [0.1 * (i % 5) - 0.2 for i in range(64)])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Shape", ["x"], ["shp"], start=1),
             helper.make_node("Reshape", ["B", "shp"], ["Wv"]),
             helper.make_node("Add", ["h", "Wv"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, ["N", 64])],
                              [helper.make_tensor_value_info("y", F, ["N", 64]),
                               helper.make_tensor_value_info("x", F, ["N", 64])],
                              initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    path = tmp_path / "mlp.onnx"
    save(model, str(path))
    return str(path)


def plan_with_options(capsys, mlp, tmp_path, *options) -> str:
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", mlp, "--time-limit", "2", "-o", plan, *options)
    assert code == OK, err
    return str(plan)


def test_solve_stores_the_model_options_and_prove_uses_them(capsys, mlp, tmp_path):
    options = ("--dim", "N=64", "--weights", "region", "--alignment", "64", "--no-inplace")
    plan = plan_with_options(capsys, mlp, tmp_path, *options)
    stored = json.load(open(plan))["plan"]["stats"]["model_options"]
    assert stored == model_options(dims={"N": 64}, weights="region", alignment=64,
                                   inplace=False)
    code, out, err = run(capsys, "prove", mlp, plan)  # no options: the file's apply
    assert code == OK, out + err
    assert out.startswith("PROVEN") and "weights=region" in out and "dims N=64" in out
    assert "output y: bit for bit equal" in out and "output x: bit for bit equal" in out
    code, out, _ = run(capsys, "prove", mlp, plan, "--alignment", "64", "--json")
    result = json.loads(out)
    assert code == OK and result["proven"] and result["outputs"]["y"]["bitwise"]
    assert len(result["arena_bytes"]) == 2  # activations and weights


def test_solve_prove_runs_the_plan_it_made(capsys, mlp, tmp_path):
    code, out, err = run(capsys, "solve", mlp, "--dim", "N=3", "--prove", "--time-limit", "2",
                         "--concat-inplace")
    assert code == OK, out + err
    assert "PROVEN: the plan on" in out and "concat_inplace=True" in out
    csv = tmp_path / "p.csv"
    csv.write_text("id,lower,upper,size\nA,0,2,4\n")
    code, _, err = run(capsys, "solve", "--prove", csv, "--time-limit", "1")
    assert code == BAD_INPUT and "--prove runs one ONNX model" in err


def mangled(plan: str, tmp_path, change) -> str:
    document = json.load(open(plan))
    change(document)
    path = tmp_path / f"mangled{len(list(tmp_path.glob('mangled*')))}.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_a_plan_whose_buffers_overlap_fails_with_exit_1(capsys, mlp, tmp_path):
    plan = plan_with_options(capsys, mlp, tmp_path, "--dim", "N=2")

    def onto_x(document):  # h over the input x, which the model still returns
        offsets = document["plan"]["offsets"]
        offsets["h"] = offsets["x"]

    code, out, _ = run(capsys, "prove", mlp, mangled(plan, tmp_path, onto_x))
    assert code == FAILED
    assert out.startswith("MISMATCH") and "the validator finds" in out
    assert "'x' read by" in out and "output x: MISMATCH" in out


def test_bad_input_exits_2_with_one_line(capsys, mlp, tmp_path):
    plan = plan_with_options(capsys, mlp, tmp_path, "--dim", "N=2")
    cases = {
        "planned with inplace=True, not False": (plan, "--no-inplace"),
        "made for another model or other model options: buffer 'x' has size 512":
            (mangled(plan, tmp_path, lambda d: d["plan"]["stats"]["model_options"]
                     .update(dims={"N": 4})), ),
        "stats.model_options: model options: weights must be one of":
            (mangled(plan, tmp_path, lambda d: d["plan"]["stats"]["model_options"]
                     .update(weights="nowhere")), ),
        "not a memplan JSON plan": (mlp, ),
        "cannot read": (str(tmp_path / "missing.json"), ),
    }
    for message, (plan_file, *flags) in cases.items():
        code, out, err = run(capsys, "prove", mlp, plan_file, *flags)
        assert code == BAD_INPUT and message in err and err.count("\n") == 1, (message, err)


def test_a_plan_without_stored_options_is_proven_with_those_given(capsys, mlp, tmp_path):
    plan = plan_with_options(capsys, mlp, tmp_path, "--dim", "N=2", "--no-inplace")

    def forget(document):
        del document["plan"]["stats"]["model_options"]
        del document["problem"]

    bare = mangled(plan, tmp_path, forget)
    proof = prove(mlp, bare, options={"dims": {"N": 2}, "inplace": False})
    assert proof.ok and "stores no model options" in "\n".join(proof.lines())
    wrong = prove(mlp, bare, options={"dims": {"N": 8}, "inplace": False})  # 4x the bytes
    assert not wrong.ok and any(v.kind == "overlap" for v in wrong.violations)
    with pytest.raises(ProblemError, match="buffers missing"):
        prove(mlp, bare, options={"dims": {"N": 2}, "weights": "region"})  # W, B, Wv too
    assert read_plan_file(bare)[2] is None


def test_an_unbound_dimension_on_the_command_line_suggests_dim(capsys, mlp):
    code, _, err = run(capsys, "info", mlp)
    assert code == BAD_INPUT and "--dim N=..." in err and "dims=" not in err


def test_the_c_header_lists_an_input_the_model_returns_as_both(capsys, mlp, tmp_path):
    header = tmp_path / "plan.h"
    code, _, err = run(capsys, "solve", mlp, "--dim", "N=1", "-o", header, "--time-limit", "1")
    assert code == OK, err
    text = header.read_text()
    assert "'x': lifetime [0, 5), input, output */" in text
    assert "'y': lifetime [4, 5), output */" in text


def test_a_backend_that_cannot_run_the_model_is_one_line_exit_2(capsys, tmp_path):
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.5),
             helper.make_node("Relu", ["y"], ["z"])]
    graph = helper.make_graph(nodes, "d9", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("z", F, [4]),
                               helper.make_tensor_value_info("mask", F, [4])])
    model = tmp_path / "dropout9.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=8),
         str(model))
    code, out, err = run(capsys, "solve", model, "--prove", "-o", tmp_path / "p.json")
    assert code == OK and "output mask: bit for bit equal" in out, out + err
    code, out, err = run(capsys, "prove", model, tmp_path / "p.json", "--backend", "reference")
    assert code == BAD_INPUT and err.count("\n") == 1
    assert "'mask' (written by node #0 (Dropout), backend reference) has 4 bytes (bool" in err


def test_solve_prove_json_is_one_json_document(capsys, mlp):
    code, out, err = run(capsys, "solve", mlp, "--dim", "N=2", "--prove", "--json",
                         "--time-limit", "1")
    summary = json.loads(out)
    assert code == OK and summary["proof"]["proven"] and summary["plan"]["arena_size"] > 0
    assert summary["proof"]["outputs"]["y"] == {"bitwise": True, "close": True,
                                                "whole_model_difference": 0.0}
    code, out, _ = run(capsys, "solve", mlp, "--dim", "N=2", "--json", "--time-limit", "1")
    assert json.loads(out)["proof"] is None


@pytest.fixture
def chained(tmp_path) -> str:
    """h0 = x W0; h1 = h0 W1; y = h1 W2 + h0: the whole-model session prepacks the weights,
    the node sessions read them as inputs (their results may round otherwise)."""
    rng = np.random.default_rng(0)
    d = 256
    weights = [numpy_helper.from_array((rng.standard_normal((d, d)) / 16).astype(np.float32),
                                       f"W{i}") for i in range(3)]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h0"]),
             helper.make_node("MatMul", ["h0", "W1"], ["h1"]),
             helper.make_node("MatMul", ["h1", "W2"], ["h2"]),
             helper.make_node("Add", ["h2", "h0"], ["y"], name="skip")]
    graph = helper.make_graph(nodes, "chained", [helper.make_tensor_value_info("x", F, [64, d])],
                              [helper.make_tensor_value_info("y", F, [64, d])], weights)
    path = tmp_path / "chained.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_the_verdict_is_the_arena_run_against_the_same_node_run(capsys, chained, tmp_path):
    plan = plan_with_options(capsys, chained, tmp_path)
    code, out, _ = run(capsys, "prove", chained, plan)
    assert code == OK and out.startswith("PROVEN"), out
    assert "output y: bit for bit equal to a normal run" in out
    assert "whole-model run (apart from the verdict), output y: " in out
    proof = prove(chained, plan)
    report = proof.report
    report.expected = {"y": report.expected["y"] + np.float32(1e-3)}  # rounded far off
    assert proof.ok and report.largest_difference("y") == pytest.approx(1e-3, rel=0.01)
    assert "largest difference from the normal run 0.001" in report.whole_model_lines()[0]


def test_a_planted_overlap_of_two_live_tensors_is_caught(capsys, chained, tmp_path):
    plan = plan_with_options(capsys, chained, tmp_path)

    def h1_onto_h0(document):  # h0 is still to be read by the skip Add when h1 is written
        offsets = document["plan"]["offsets"]
        offsets["h1"] = offsets["h0"]

    code, out, _ = run(capsys, "prove", chained, mangled(plan, tmp_path, h1_onto_h0))
    assert code == FAILED and out.startswith("MISMATCH"), out
    assert "'h0' read by node skip (Add) after h1 overwrote its bytes" in out
    assert "output y: MISMATCH in" in out
