"""ONNX files built to hurt the reader and the writer: each is planned right or refused in one line.

The files are built here: external data naming a FIFO, a NUL byte or 2^62
elements, a lookup table of integers, float shape constants stored as
external data, a graph stored as two fields, text that is not UTF-8,
millions of tiny fields, empty messages by the million; and `-o` into
another folder than the model's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.onnx_reading import PEAK
from memplan import ProblemError
from memplan.cli import main
from memplan.formats.memplan_json import problem_to_dict
from memplan.onnx import onnx_weightless
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_graph import load_graph
from tests.conftest import light_models_dir

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def varint(value: int) -> bytes:
    return onnx_weightless.encode_varint(value)


def field(number: int, wire: int, payload: bytes = b"") -> bytes:
    key = varint(number << 3 | wire)
    return key + varint(len(payload)) + payload if wire == 2 else key + payload


def opset17(graph):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def external(model, path):
    """Save ``model`` with every initializer in ``weights.bin`` beside it."""
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path


def reshape_by_vector():
    """Reshape's shape sliced from a 300-element INT64 vector (read by shape inference)."""
    vector = np.concatenate([[16, 32], np.zeros(298)]).astype(np.int64)
    nodes = [helper.make_node("Slice", ["vector", "starts", "ends"], ["shape"]),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    inits = [numpy_helper.from_array(vector, "vector"),
             numpy_helper.from_array(np.array([0], np.int64), "starts"),
             numpy_helper.from_array(np.array([2], np.int64), "ends")]
    return opset17(helper.make_graph(nodes, "reshape", [helper.make_tensor_value_info(
        "x", F, [8, 64])], [helper.make_tensor_value_info("y", F, None)], inits))


def edit_vector(path, dims=None, **entries):
    """Change the external ``vector``'s dims or external-data entries in the model file."""
    model = onnx.load(str(path), load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.name == "vector")
    if dims is not None:
        del tensor.dims[:]
        tensor.dims.extend(dims)
    for entry in tensor.external_data:
        if entry.key in entries:
            entry.value = entries.pop(entry.key)
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    path.write_bytes(model.SerializeToString())


def refusal(capsys, *argv) -> str:
    """The one line ``memplan ARGV`` prints when it refuses with exit 2."""
    assert main(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]
    return lines[0]


def mlp(rows=64, seed=0):
    weights = np.random.default_rng(seed).standard_normal((rows, 64)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    return opset17(helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", F, [1, rows])],
        [helper.make_tensor_value_info("y", F, [1, 64])], [numpy_helper.from_array(weights, "W")]))


# ------------------------------------------------------------------ external data
def test_external_data_that_is_no_regular_file_is_refused_without_blocking(tmp_path):
    path = external(reshape_by_vector(), tmp_path / "model.onnx")
    edit_vector(path, location="fifo.bin")
    os.mkfifo(tmp_path / "fifo.bin")
    run = subprocess.run([sys.executable, "-c", "import sys; from memplan.cli import main; "
                          "sys.exit(main(sys.argv[1:]))", "info", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "'vector': external data:" in run.stderr and "is not a regular file" in run.stderr
    (tmp_path / "model.onnx").unlink()
    os.mkfifo(tmp_path / "model.onnx")  # the model itself
    with pytest.raises(ProblemError, match="the model: .* is not a regular file"):
        load_graph(path)


@pytest.mark.parametrize("edit, words", [
    ({"dims": [2**62]}, "'r': (no inferred shape|dimension 0 is unknown)"),  # values unread
    ({"location": "wei\0ghts.bin"}, "'vector': external data location 'wei\\\\x00ghts.bin'"),
    ({"offset": "-8"}, "'vector': external data offset '-8' is not a whole number"),
    ({"offset": "9" * 30}, "'vector': external data .* cannot read 2400 bytes at offset 9"),
    ({"offset": "1e3"}, "offset '1e3' is not a whole number"),
    ({"location": "missing.bin"}, "'vector': external data: cannot read .*No such file"),
])
def test_bad_external_data_is_refused_in_one_line(tmp_path, capsys, edit, words):
    path = external(reshape_by_vector(), tmp_path / "model.onnx")
    edit_vector(path, **edit)
    assert re.search(words, refusal(capsys, "info", str(path)))


def test_small_float_constants_in_external_data_are_read_for_shape_inference(tmp_path):
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    kernel = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "kernel")
    resize = opset17(helper.make_graph(
        [helper.make_node("Conv", ["x", "kernel"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Resize", ["c", "", "scales"], ["r"], mode="nearest"),
         helper.make_node("Relu", ["r"], ["y"])], "resize",
        [helper.make_tensor_value_info("x", F, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", F, None)], [scales, kernel]))
    bounds = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("start", 0), ("limit", 100), ("delta", 1))]
    ranged = opset17(helper.make_graph(
        [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
         helper.make_node("Add", ["r", "x"], ["y"])], "range",
        [helper.make_tensor_value_info("x", F, [100])],
        [helper.make_tensor_value_info("y", F, None)], bounds))
    for name, model, dims in (("resize", resize, {"N": 2}), ("range", ranged, {})):
        (tmp_path / name).mkdir()
        inline = tmp_path / f"{name}.onnx"
        onnx.save_model(model, str(inline))
        stored = external(model, tmp_path / name / f"{name}.onnx")
        assert problem_to_dict(from_onnx(stored, dims=dims)) == \
            problem_to_dict(from_onnx(inline, dims=dims))


def test_small_external_tensors_pass_no_total(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_weightless, "EXTERNAL_VALUES", 1000)  # 2400 bytes for 'vector'
    path = external(reshape_by_vector(), tmp_path / "model.onnx")
    with pytest.raises(ProblemError, match="small tensors stored as external data pass 1000"):
        load_graph(path)


# ------------------------------------------------------------------ integer vectors
def size(problem, name: str) -> int:
    return problem.buffer(problem.index(name)).size


def test_an_integer_lookup_table_is_a_weight_not_a_shape(tmp_path):
    table = numpy_helper.from_array(np.arange(1 << 16, dtype=np.int64), "table")
    model = opset17(helper.make_graph(
        [helper.make_node("Gather", ["table", "x"], ["g"]),
         helper.make_node("Cast", ["g"], ["y"], to=F)], "table",
        [helper.make_tensor_value_info("x", I64, [4096])],
        [helper.make_tensor_value_info("y", F, None)], [table]))
    path = tmp_path / "table.onnx"
    onnx.save_model(model, str(path))
    kept = load_graph(path)[0].graph.initializer[0]
    assert list(kept.dims) == [1 << 16] and not kept.raw_data and not kept.int64_data
    problem = from_onnx(path)
    assert size(problem, "y") == 4096 * 4  # the table's length is not needed, nor read
    assert size(problem, "g") == 4096 * 8


@pytest.mark.parametrize("weights", ["exclude", "region"])
def test_an_integer_table_in_a_constant_node_is_a_weight_too(weights):
    table = numpy_helper.from_array(np.arange(5000, dtype=np.int64), "value")
    model = opset17(helper.make_graph(
        [helper.make_node("Constant", [], ["table"], value=table),
         helper.make_node("Gather", ["table", "x"], ["g"]),
         helper.make_node("Shape", ["table"], ["length"]),
         helper.make_node("Expand", ["x", "length"], ["e"])], "constant",
        [helper.make_tensor_value_info("x", I64, [1])],
        [helper.make_tensor_value_info(n, I64, None) for n in ("g", "e")]))
    kept = load_graph(model)[0].graph.node[0].attribute[0].t
    assert list(kept.dims) == [5000] and not kept.raw_data
    problem = from_onnx(model, weights=weights)
    assert size(problem, "g") == 8 and size(problem, "e") == 8 * 5000  # the length is known
    assert (weights == "region") == ("table" in problem.ids)
    if weights == "region":
        assert size(problem, "table") == 8 * 5000


def test_a_models_own_symbol_never_gets_a_vectors_length():
    model = opset17(helper.make_graph(
        [helper.make_node("Neg", ["t"], ["n"]), helper.make_node("NonZero", ["x"], ["z"])],
        "symbols", [helper.make_tensor_value_info("t", I64, [1 << 12]),
                    helper.make_tensor_value_info("x", I64, [4])],
        [helper.make_tensor_value_info("n", I64, None),
         helper.make_tensor_value_info("z", I64, [1, "memplan:length of t"])]))
    with pytest.raises(ProblemError, match="'z': dimension 1 is unknown"):
        from_onnx(model)  # NonZero's count is unknown: the symbol stays one


def test_a_long_integer_input_gets_its_shapes_from_its_length():
    model = opset17(helper.make_graph(
        [helper.make_node("Gather", ["t", "x"], ["g"]), helper.make_node("Neg", ["t"], ["n"])],
        "long", [helper.make_tensor_value_info("t", I64, [1 << 24]),
                 helper.make_tensor_value_info("x", I64, [4])],
        [helper.make_tensor_value_info("g", I64, None),
         helper.make_tensor_value_info("n", I64, None)]))
    problem = from_onnx(model)  # ONNX's data propagation would make 1 GB of this vector
    assert size(problem, "n") == 8 << 24 and size(problem, "g") == 32


# ------------------------------------------------------------------ the writer
def run_model(path, rows=64):
    import onnxruntime

    x = np.ones((1, rows), np.float32)
    return onnxruntime.InferenceSession(str(path)).run(None, {"x": x})[0]


@pytest.mark.parametrize("reorder", [[], ["--reorder"]])
def test_a_model_written_into_another_folder_reads_its_own_weights(tmp_path, capsys, reorder):
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "model.onnx"
    onnx.save_model(mlp(), str(source), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    target = tmp_path / "out.onnx"  # a folder above the model's
    assert main(["solve", str(source), "-o", str(target), "--time-limit", "1", *reorder]) == 0
    written = onnx.load(str(target), load_external_data=False)
    locations = [e.value for e in written.graph.initializer[0].external_data
                 if e.key == "location"]
    assert locations == [os.path.join("src", "weights.bin")]
    assert np.array_equal(run_model(target), run_model(source))
    (tmp_path / "other").mkdir()  # another model's weights.bin, same size, other values
    (tmp_path / "other" / "weights.bin").write_bytes(np.ones(64 * 64, np.float32).tobytes())
    capsys.readouterr()
    line = refusal(capsys, "solve", str(source), "-o", str(tmp_path / "other" / "m.onnx"),
                   "--time-limit", "1", *reorder)
    assert "tensor 'W' keeps its data in 'weights.bin' beside the model" in line
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["weights.bin"]


def test_a_model_written_into_its_own_folder_keeps_its_locations(tmp_path):
    source = tmp_path / "model.onnx"
    onnx.save_model(mlp(), str(source), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    assert main(["solve", str(source), "-o", str(tmp_path / "out.onnx"), "--time-limit",
                 "1"]) == 0
    assert np.array_equal(run_model(tmp_path / "out.onnx"), run_model(source))


def two_graph_fields(model) -> bytes:
    """``model`` serialised with its graph as two ``graph`` fields (protobuf merges them)."""
    first, second = onnx.GraphProto(), onnx.GraphProto()
    first.CopyFrom(model.graph)
    del first.node[2:]
    second.node.extend(model.graph.node[2:])
    head = onnx.ModelProto()
    head.CopyFrom(model)
    head.ClearField("graph")
    return head.SerializeToString() + b"".join(
        field(7, 2, part.SerializeToString()) for part in (first, second))


@pytest.mark.parametrize("reorder", [[], ["--reorder"]])
def test_a_graph_stored_as_two_fields_is_written_whole(tmp_path, reorder):
    weights = [numpy_helper.from_array(np.ones((32, 32), np.float32), n) for n in "AB"]
    nodes = [helper.make_node("MatMul", ["x", "A"], ["a"]),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("MatMul", ["x", "B"], ["c"]),
             helper.make_node("Add", ["b", "c"], ["d"]),
             helper.make_node("Softmax", ["d"], ["y"])]
    model = opset17(helper.make_graph(nodes, "split", [helper.make_tensor_value_info(
        "x", F, [2, 32])], [helper.make_tensor_value_info("y", F, [2, 32])], weights))
    path = tmp_path / "split.onnx"
    path.write_bytes(two_graph_fields(model))
    assert onnx.load(str(path)).graph == model.graph
    out = tmp_path / "out.onnx"
    assert main(["solve", str(path), "-o", str(out), "--time-limit", "1", *reorder]) == 0
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    assert sorted(n.SerializeToString() for n in written.graph.node) == \
        sorted(n.SerializeToString() for n in model.graph.node)
    assert written.graph.initializer == model.graph.initializer


# ------------------------------------------------------------------ the field walk
def strip_in_python(monkeypatch, data: bytes) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(onnx_weightless, "_kernel_strip", None)
        return onnx_weightless._strip_bytes(data)


def walk_cases():
    from tests.test_onnx_weightless import shapes_model

    plain = mlp().SerializeToString()
    tensor = field(1, 0, varint(2)) * 1000 + field(2, 0, varint(1)) + field(8, 2, b"W")
    yield "unknown fields first", field(100, 0, b"\x01") * 3000 + plain
    yield "dims unpacked", field(1, 0, varint(8)) + field(7, 2, field(5, 2, tensor))
    yield "shapes", shapes_model().SerializeToString()
    for path in sorted(light_models_dir().glob("light_*.onnx"))[:3]:
        yield path.stem, path.read_bytes()


@pytest.mark.parametrize("case", list(walk_cases()), ids=lambda case: case[0])
def test_the_compiled_walk_is_the_python_walk(monkeypatch, case):
    data = case[1]
    assert onnx_weightless._kernel_strip is not None  # built by the test extra's install
    assert onnx_weightless._strip_bytes(data) == strip_in_python(monkeypatch, data)


def test_the_walk_refuses_deep_nesting_and_bad_wire_types(monkeypatch):
    deep = b""
    for _ in range(onnx_weightless.MAX_DEPTH + 2):  # graph > node > attribute > graph ...
        deep = field(6, 2, deep + b"\x00" * 2000)  # attribute.g, long enough to be entered
        deep = field(1, 2, field(5, 2, deep))  # graph.node.attribute
    model = field(7, 2, deep)
    for data in (model, field(7, 2, b"\x0f")):  # wire type 7
        for kernel in (True, False):
            with monkeypatch.context() as patch:
                if not kernel:
                    patch.setattr(onnx_weightless, "_kernel_strip", None)
                with pytest.raises(ProblemError, match="not a readable ONNX model"):
                    load_graph(data)


@pytest.mark.parametrize("kernel", [True, False])
def test_a_corrupted_file_is_refused_naming_the_field(monkeypatch, kernel):
    data = mlp().SerializeToString()
    cut = data[:len(data) // 2]  # inside the weight's data, inside the graph
    at = data.index(b"\x22\x06MatMul")  # a node's op_type, made to run past its node
    bent = data[:at] + b"\x22\x7f" + data[at + 2:]
    if not kernel:
        monkeypatch.setattr(onnx_weightless, "_kernel_strip", None)
        monkeypatch.setattr(onnx_weightless, "_kernel_check", None)
    with pytest.raises(ProblemError, match="not a readable ONNX model" + (
            ".*field graph: " if kernel else "")):
        load_graph(cut)
    with pytest.raises(ProblemError, match="not a readable ONNX model" + (
            ".*field graph.node.op_type: " if kernel else "")):
        load_graph(bent)


def test_fields_unknown_to_onnx_change_nothing():
    data = field(100, 0, b"\x01") * 1000 + mlp().SerializeToString()
    assert problem_to_dict(from_onnx(data)) == problem_to_dict(from_onnx(mlp()))


@pytest.mark.parametrize("where", [b"op_type", b"name", b"graph name", b"output"])
@pytest.mark.parametrize("kernel", [True, False])
def test_text_that_is_not_utf8_is_refused_naming_the_field(monkeypatch, where, kernel):
    model = opset17(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["hh"], name="nn"),
         helper.make_node("Relu", ["hh"], ["y"])], "gg",
        [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])]))
    old, new, named = {b"op_type": (b"Relu", b"R\xffxu", "graph.node.op_type"),
                       b"name": (b"nn", b"\xc3(", "graph.node.name"),
                       b"graph name": (b"\x12\x02gg", b"\x12\x02\xed\xa0", "graph.name"),
                       b"output": (b"hh", b"\xff\xfe", "graph.node.output")}[where]
    data = model.SerializeToString().replace(old, new, 1)
    if not kernel:
        monkeypatch.setattr(onnx_weightless, "_kernel_strip", None)
        monkeypatch.setattr(onnx_weightless, "_kernel_check", None)
    with pytest.raises(ProblemError, match=f"field {named}: text that is not UTF-8"):
        from_onnx(data)
    with pytest.raises(ProblemError, match=f"field {named}: text that is not UTF-8"):
        from_onnx(onnx.ModelProto.FromString(data))


# ------------------------------------------------------------------ bounded memory
GROWTH = """
import json, sys
from memplan.errors import ProblemError
from memplan.onnx import onnx_weightless
from memplan.onnx.onnx_graph import load_graph
onnx_weightless.PARSED_EXTRA = 0  # the bound without its constant: k x the file only
""" + PEAK + """
try:
    load_graph(sys.argv[1])
    refused = None
except ProblemError as error:
    refused = str(error)
print(json.dumps({"growth": growth(), "refused": refused}))
"""


def crafted(kind: str, size: int) -> bytes:
    """A model of about ``size`` bytes that costs much memory parsed, as ``kind`` says."""
    head = field(1, 0, varint(8)) + field(8, 2, field(2, 0, varint(17)))
    output = field(12, 2, field(1, 2, b"y"))
    if kind == "integer vectors":  # 1024 one-byte values each: 8 KiB parsed
        vector = field(1, 0, varint(1024)) + field(2, 0, varint(7)) + field(7, 2, b"\x01" * 1024)
        graph = b"".join(field(5, 2, vector + field(8, 2, b"v%d" % i))
                         for i in range(size // 1040))
    elif kind == "empty nodes":
        graph = field(1, 2, b"") * (size // 2)
    elif kind == "empty attributes":
        graph = field(1, 2, field(5, 2, b"") * (size // 2))
    else:  # unpacked dims
        graph = field(5, 2, field(1, 0, b"\x01") * (size // 2) + field(8, 2, b"W"))
    return head + field(7, 2, graph + output)


@pytest.mark.parametrize("kind, refused", [("integer vectors", False), ("unpacked dims", False),
                                           ("empty nodes", True), ("empty attributes", True)])
def test_reading_a_file_takes_at_most_the_documented_multiple_of_its_size(tmp_path, kind,
                                                                          refused):
    path = tmp_path / "crafted.onnx"
    path.write_bytes(crafted(kind, 4 << 20))
    run = subprocess.run([sys.executable, "-c", GROWTH, str(path)], capture_output=True,
                         text=True, timeout=300, check=True)
    result = json.loads(run.stdout)
    size = path.stat().st_size
    assert result["growth"] <= onnx_weightless.PARSED_FACTOR * size
    assert (result["refused"] is not None) == refused, result["refused"]
    if refused:
        assert "once parsed, more than 32 times the file's" in result["refused"]


@pytest.mark.parametrize("declared", [[1, 3, -1], [-1, 3, 4]])
def test_a_negative_declared_dimension_is_refused_before_shape_inference(tmp_path, declared):
    """ONNX's C++ shape inference aborts the process on a Slice of a negative dimension:
    memplan names the tensor first (run apart, so an abort would show as its exit code)."""
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n)
                    for v, n in ((0, "starts"), (2, "ends")))
    path = tmp_path / "model.onnx"
    onnx.save(opset17(helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends"], ["y"])], "slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, declared)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [starts, ends])), path)
    run = subprocess.run([sys.executable, "-c", "import sys; from memplan.cli import main; "
                          "sys.exit(main(sys.argv[1:]))", "info", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "tensor 'x': a declared dimension is negative" \
        in run.stderr
