"""Bad input on every surface: one line naming the problem, the documented exit code.

Each test builds its own small input (a model, a rows file, a corrupt
flatbuffer) and checks what the command or the function says about it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from memplan.cli import main
from memplan.errors import ProblemError


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def one_line_error(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and err.startswith("memplan ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


def onnx_model(path: Path, nodes, inputs, outputs, initializers=()) -> Path:
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return path


def float_input(name: str, shape):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# ------------------------------------------------------------------ sweep
def test_a_scheduler_address_that_is_not_one_is_refused_in_one_line(tmp_path):
    pytest.importorskip("distributed")
    from memplan.sweeps.sweep import scheduler_address

    model = tmp_path / "m.csv"
    model.write_text("id,lower,upper,size\nb1,0,3,4\n")
    for address in ("tcp://127.0.0.1:notaport", "tcp://127.0.0.1:70000", "tcp://", "a b:1"):
        code, _, err = run_cli("sweep", model, "--scheduler", address)
        assert code == 2
        one_line_error(err, "--scheduler", repr(address))
    assert scheduler_address("tcp://127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    assert scheduler_address("localhost:8786") == "localhost:8786"


# ------------------------------------------------------------------ reorder and ONNX messages
def test_reordering_a_model_without_buffers_keeps_the_file_order_and_says_so(tmp_path):
    from onnx import helper

    path = onnx_model(tmp_path / "empty.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                      [float_input("x", [0, 4])], [float_input("y", [0, 4])])
    for method in ("exact", "fast"):
        code, out, err = run_cli("solve", path, "--reorder", "--reorder-method", method)
        assert code == 0 and err == "", err
        (line,) = [row for row in out.splitlines() if row.startswith("operator order")]
        assert "file order kept: no buffers to plan" in line


def test_errors_of_the_reorder_path_name_the_file(tmp_path):
    from onnx import helper

    path = onnx_model(tmp_path / "sym.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                      [float_input("x", ["N", 4])], [float_input("y", ["N", 4])])
    for extra in ([], ["--reorder"], ["--reorder", "--reorder-method", "exact"]):
        code, _, err = run_cli("solve", path, *extra)
        assert code == 2
        one_line_error(err, f"{path}: tensor 'x'", "--dim N=")


def test_shape_inference_errors_are_one_line(tmp_path):
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Cast", ["a"], ["b"], to=99),
             helper.make_node("Reshape", ["b", "x"], ["y"])]  # two errors: ONNX gives two lines
    path = onnx_model(tmp_path / "two.onnx", nodes, [float_input("x", [2, 4])],
                      [float_input("y", [2, 4])])
    for extra in ([], ["--reorder"]):
        code, _, err = run_cli("solve", path, *extra)
        assert code == 2
        one_line_error(err, str(path), "shape inference failed", "Cast", "Reshape", "--no-strict")
    with pytest.raises(ProblemError) as error:
        from memplan.frontends.onnx import from_onnx

        from_onnx(path)
    assert "\n" not in str(error.value)
