"""Shapes ONNX's inference leaves unknown: onnxruntime's symbolic inference fills them, on
the user's own graph and without its weights; a dimension that depends on data is named."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from memplan import ProblemError, plan_with
from memplan.cli import OK, main
from memplan.onnx import onnx_shapes
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_graph import infer, load_graph
from memplan.onnx.onnx_shapes import unknown_tensors

F, I64 = TensorProto.FLOAT, TensorProto.INT64
D = 256  # the projection's weight: 256 KiB, read without its values


def class_token(tmp_path) -> str:
    """A class token expanded to the batch and concatenated, as torch's legacy exporter
    writes it (CLIP, ViT): ONNX's inference cannot fold the Expand's shape."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "cls"),
               numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), "W"),
               helper.make_tensor("pattern", I64, [3], [1, 1, -1]),
               helper.make_tensor("rank", I64, [1], [3]),
               helper.make_tensor("minus", I64, [], [-1])]
    nodes = [helper.make_node("ConstantOfShape", ["rank"], ["ones"],
                              value=helper.make_tensor("one", I64, [1], [1])),
             helper.make_node("Mul", ["ones", "minus"], ["negative"]),
             helper.make_node("Equal", ["pattern", "negative"], ["keep"]),
             helper.make_node("Where", ["keep", "ones", "pattern"], ["shape"]),
             helper.make_node("Expand", ["cls", "shape"], ["token"]),
             helper.make_node("Concat", ["token", "x"], ["joined"], name="join", axis=1),
             helper.make_node("MatMul", ["joined", "W"], ["h"]),
             helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", F, [1, 4, D])],
                              [helper.make_tensor_value_info("y", F, [1, 5, D])], weights)
    path = tmp_path / "cls.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def nonzero(tmp_path) -> str:
    """The indices of x's non-zero elements: their count depends on the data."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("NonZero", ["r"], ["nz"], name="where"),
             helper.make_node("Cast", ["nz"], ["y"], to=F)]
    graph = helper.make_graph(nodes, "nz", [helper.make_tensor_value_info("x", F, [8, 16])],
                              [helper.make_tensor_value_info("y", F, None)])
    path = tmp_path / "nz.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_onnx_leaves_the_class_token_concat_unknown(tmp_path):
    proto, source = load_graph(class_token(tmp_path))
    assert proto.graph.initializer[1].name == "W" and not proto.graph.initializer[1].raw_data
    assert unknown_tensors(infer(proto, strict=True, source=source)) == ["token", "joined", "h"]


@pytest.mark.parametrize("fold", [True, False])
def test_folds_or_symbolic_inference_plan_the_users_graph(fold, tmp_path, monkeypatch):
    if not fold:  # onnxruntime's symbolic inference alone
        monkeypatch.setattr(onnx_shapes, "FOLD_ELEMENTS", 0)
    problem = from_onnx(class_token(tmp_path))
    assert set(problem.ids) == {"x", "joined", "h", "y"}  # the file's tensors, nothing else
    assert [step.op for step in problem.steps] == ["Concat", "MatMul", "Relu"]
    assert problem.buffer(problem.index("joined")).size == 5 * D * 4
    assert problem.buffer(problem.index("y")).size == 5 * D * 4
    plan = plan_with("best", problem)
    assert plan.arena_size >= 2 * 5 * D * 4


def test_the_class_token_model_is_proven(capsys, tmp_path):
    path = class_token(tmp_path)
    plan = tmp_path / "plan.json"
    assert main(["solve", path, "--quiet", "-o", str(plan)]) == OK
    assert main(["prove", path, str(plan)]) == OK
    assert capsys.readouterr().out.startswith("PROVEN")


def test_a_dimension_that_depends_on_data_names_tensor_node_and_dim(capsys, tmp_path):
    path = nonzero(tmp_path)
    with pytest.raises(ProblemError) as caught:
        from_onnx(path)
    message = str(caught.value)
    assert "tensor 'nz': dimension 1 is unknown after shape inference" in message
    assert "depends on the data" in message and "node 'where' (NonZero)" in message
    symbol = message.split("dims={'")[1].split("'")[0]
    assert main(["solve", path, "--quiet"]) == 2
    assert f"--dim {symbol}=..." in capsys.readouterr().err
    problem = from_onnx(path, dims={symbol: 7})
    assert problem.buffer(problem.index("nz")).size == 2 * 7 * 8


def test_without_onnxruntime_folds_still_plan_and_the_error_says_what_to_install(
        tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime.tools.symbolic_shape_infer", None)
    path = class_token(tmp_path)
    assert from_onnx(path).buffer(1).size == 5 * D * 4  # folding needs no onnxruntime
    monkeypatch.setattr(onnx_shapes, "FOLD_ELEMENTS", 0)
    with pytest.raises(ProblemError, match=r"tensor 'joined': dimension 1 is unknown .* "
                                           r"install memplan\[prove\] \(onnxruntime\)"):
        from_onnx(path)


def test_folds_stay_within_their_budget(tmp_path, monkeypatch):
    """A shape computation above the budget is left to the symbolic inference."""
    monkeypatch.setattr(onnx_shapes, "FOLD_BUDGET", 2)
    monkeypatch.setitem(sys.modules, "onnxruntime.tools.symbolic_shape_infer", None)
    with pytest.raises(ProblemError, match="install memplan"):
        from_onnx(class_token(tmp_path))


def test_a_fold_whose_values_ask_for_more_than_the_types_said_is_not_run():
    """A file may declare a small type over a ConstantOfShape of 10^10 elements: the values
    decide, before anything is allocated."""
    big = helper.make_tensor("big", I64, [2], [100_000, 100_000])
    node = helper.make_node("ConstantOfShape", ["big"], ["c"])
    graph = helper.make_graph([node], "lie", [], [helper.make_tensor_value_info("c", F, [2])],
                              [big])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    values, budget = {}, [onnx_shapes.FOLD_BUDGET]
    types = {"c": helper.make_tensor_type_proto(F, [2])}
    assert not onnx_shapes._fold(model, types, values, budget) and "c" not in values


def test_a_constant_whose_data_disagrees_with_its_dims_is_not_folded(tmp_path):
    """A shape constant of dims [2] holding one value: the folding passes it by, and the model
    is refused in one line (no ValueError from numpy)."""
    path = class_token(tmp_path)
    model = load_graph(path)[0]
    rank = next(t for t in model.graph.initializer if t.name == "rank")
    rank.dims[:] = [2]
    save(model, path)
    assert main(["info", path, "--no-strict"]) == 2


def test_a_shape_input_declared_billions_long_is_refused_at_once(tmp_path):
    """ConstantOfShape's input declared 2^31 long (its data dropped): onnxruntime's symbolic
    inference would make a symbol per dimension (minutes, gigabytes); it is not given it."""
    import subprocess

    path = class_token(tmp_path)
    model = load_graph(path)[0]
    rank = next(t for t in model.graph.initializer if t.name == "rank")
    rank.dims[:] = [2**31]
    rank.ClearField("int64_data")
    model.graph.input.append(helper.make_tensor_value_info("rank", I64, [1]))
    save(model, path)
    run = subprocess.run([sys.executable, "-c", "import sys; from memplan.cli import main; "
                          "sys.exit(main(sys.argv[1:]))", "info", path, "--no-strict"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "'rank' of node '' (ConstantOfShape) is declared 2147483648 long" in run.stderr
