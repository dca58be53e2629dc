"""TFLite models end to end: the frontend's TFLM lifetimes and sizes, the planned model, and
the proof inside TFLite-Micro's own interpreter beside TFLM's own planner.

The small models are built here with the schema's object API (no converter
needed); the last tests convert a Keras model with tensorflow-cpu, in a child
process (`benchmarks.tflite_models.model_file`). Everything
but the missing-extra message needs the ``tflite`` extra and is skipped
without it.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import sys

import numpy as np
import pytest

import memplan
from memplan import Plan, ProblemError, validate
from memplan.cli import main

fb = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated",
                         reason="the tflite extra is not installed")
flatbuffers = pytest.importorskip("flatbuffers")

from memplan.tflite.tflite import from_tflite, read_model, tensor_ids  # noqa: E402
from memplan.tflite.tflite_model import planned_model, read_planned_offsets  # noqa: E402
from memplan.tflite.tflm import METADATA_NAME, read_offline_plan  # noqa: E402
from memplan.tflite.tflm_arena import prove, random_inputs, run, smallest_arena, works  # noqa: E402

FLOAT32, INT32, STRING = fb.TensorType.FLOAT32, fb.TensorType.INT32, fb.TensorType.STRING
ADD, RELU, WHILE = fb.BuiltinOperator.ADD, fb.BuiltinOperator.RELU, fb.BuiltinOperator.WHILE


def build(tensors, ops, inputs, outputs, constants=None, *, subgraphs=1, metadata=None,
          bad_opcode=False) -> bytes:
    """A .tflite flatbuffer: tensors ``(name, shape, type[, variable])``, ops
    ``(builtin code, inputs, outputs)``, constant data by tensor index."""
    constants = constants or {}
    model = fb.ModelT()
    model.version = 3
    model.buffers = [fb.BufferT()]
    codes = sorted({code for code, _, _ in ops})
    model.operatorCodes = []
    for code in codes:
        opcode = fb.OperatorCodeT()
        opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), 1
        model.operatorCodes.append(opcode)
    graph = fb.SubGraphT()
    graph.tensors = []
    for index, (name, shape, kind, *variable) in enumerate(tensors):
        tensor = fb.TensorT()
        tensor.name, tensor.shape, tensor.type = name, np.array(shape, np.int32), kind
        tensor.isVariable = bool(variable and variable[0])
        tensor.buffer = 0
        if index in constants:
            model.buffers.append(fb.BufferT(data=np.frombuffer(constants[index], np.uint8)))
            tensor.buffer = len(model.buffers) - 1
        graph.tensors.append(tensor)
    graph.operators = []
    for code, op_inputs, op_outputs in ops:
        op = fb.OperatorT()
        op.opcodeIndex = 5 if bad_opcode else codes.index(code)
        op.inputs, op.outputs = np.array(op_inputs, np.int32), np.array(op_outputs, np.int32)
        if code == ADD:
            op.builtinOptionsType = fb.BuiltinOptions.AddOptions
            op.builtinOptions = fb.AddOptionsT()
        graph.operators.append(op)
    graph.inputs, graph.outputs = np.array(inputs, np.int32), np.array(outputs, np.int32)
    model.subgraphs = [graph] + [fb.SubGraphT() for _ in range(subgraphs - 1)]
    model.metadata = []
    for name, data in (metadata or {}).items():
        model.buffers.append(fb.BufferT(data=np.frombuffer(data, np.uint8)))
        entry = fb.MetadataT()
        entry.name, entry.buffer = name, len(model.buffers) - 1
        model.metadata.append(entry)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def chain(metadata=None) -> bytes:
    """x -> a = x + c -> b = relu(a) -> d = b + a -> y = d + c; float32 [1, 10].

    Placing everything at offset 0 breaks it: b overwrites a before d reads a.
    """
    c = np.linspace(-1, 1, 10, dtype=np.float32).tobytes()
    tensors = [("x", [1, 10], FLOAT32), ("c", [1, 10], FLOAT32), ("a", [1, 10], FLOAT32),
               ("b", [1, 10], FLOAT32), ("d", [1, 10], FLOAT32), ("y", [1, 10], FLOAT32)]
    ops = [(ADD, [0, 1], [2]), (RELU, [2], [3]), (ADD, [3, 2], [4]), (ADD, [4, 1], [5])]
    return build(tensors, ops, [0], [5], {1: c}, metadata=metadata)


def tree_equal(a, b) -> bool:
    """Two schema object trees (or values) equal field by field."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(tree_equal(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and type(a).__name__ == type(b).__name__:
        return all(tree_equal(getattr(a, k), getattr(b, k, None)) for k in vars(a))
    return a == b


# --------------------------------------------------------------- frontend
def test_chain_has_tflm_lifetimes_sizes_and_alignment():
    problem = memplan.from_tflite(chain(), name="chain")
    # TFLM's scopes: the input at 0, operator i at i + 1; inclusive -> half-open
    assert {b.id: (b.start, b.end, b.size, b.alignment, b.kind) for b in problem.buffers} == {
        "x": (0, 2, 48, 16, "input"), "a": (1, 4, 48, 16, "activation"),
        "b": (2, 4, 48, 16, "activation"), "d": (3, 5, 48, 16, "activation"),
        "y": (4, 5, 48, 16, "output")}
    assert problem.horizon == 5 and list(problem.widths) == [48, 96, 96, 144, 96]
    plan = memplan.solve(problem, time_limit=5)
    assert validate(problem, plan) == [] and plan.arena_size == 144


def test_variable_unused_zero_size_and_repeated_names():
    tensors = [("in", [2, 3], FLOAT32), ("state", [4], FLOAT32, True), ("out", [2, 3], FLOAT32),
               ("out", [5], INT32), ("empty", [0, 4], FLOAT32), ("", [], FLOAT32),
               ("mid", [2, 3], FLOAT32)]
    ops = [(ADD, [0, 1], [6]), (ADD, [6, 1], [2])]
    problem = from_tflite(build(tensors, ops, [0, 3], [2, 4, 5]))
    got = {b.id: (b.start, b.end, b.size, b.kind) for b in problem.buffers}
    assert got == {"in": (0, 2, 32, "input"), "state": (0, 3, 16, "activation"),
                   "out": (2, 3, 32, "output"), "out#3": (0, 1, 32, "input"),
                   "#5": (2, 3, 16, "output"), "mid": (1, 3, 32, "activation")}
    assert tensor_ids(read_model(build(tensors, ops, [0, 3], [2, 4, 5])))[3:6] == \
        ["out#3", "empty", "#5"]
    clash = [("a", [2], FLOAT32), ("a#2", [2], FLOAT32), ("a", [2], FLOAT32)]
    assert tensor_ids(read_model(build(clash, [(ADD, [0, 1], [2])], [0, 1], [2]))) == \
        ["a", "a#2", "a#2'"]


def test_known_kernels_scratch_is_planned_for_their_step():
    mean, int8 = fb.BuiltinOperator.MEAN, fb.TensorType.INT8
    tensors = [("x", [1, 4, 4, 8], int8), ("axes", [2], INT32), ("m", [1, 1, 1, 8], int8),
               ("y", [1, 1, 1, 8], int8)]
    ops = [(mean, [0, 1], [2]), (RELU, [2], [3])]
    data = build(tensors, ops, [0], [3], {1: np.array([1, 2], "<i4").tobytes()})
    problem = from_tflite(data)
    # TFLM's int8 MEAN: int32 sums per output element, the input's rank, the axes
    assert [(b.id, b.size, b.start, b.end) for b in problem.buffers if b.kind == "scratch"] == [
        ("MEAN@1:scratch0", 32, 1, 2), ("MEAN@1:scratch1", 16, 1, 2),
        ("MEAN@1:scratch2", 16, 1, 2)]
    assert len(from_tflite(data, scratch=False)) == len(problem) - 3


def test_refusals_name_the_file_and_the_reason(tmp_path):
    tensors = [("x", [1, 4], FLOAT32), ("y", [1, 4], FLOAT32)]
    cases = {
        "flow.tflite": (build(tensors, [(WHILE, [0], [1])], [0], [1], subgraphs=3),
                        "3 subgraphs (control flow: WHILE)"),
        "dyn.tflite": (build([("x", [-1, 4], FLOAT32), ("y", [1, 4], FLOAT32)],
                             [(RELU, [0], [1])], [0], [1]), "'x': dynamic shape [-1, 4]"),
        "text.tflite": (build([("s", [3], STRING), ("y", [1, 4], FLOAT32)],
                              [(RELU, [0], [1])], [0], [1]), "'s': tensor type STRING"),
        "junk.tflite": (b"\x00" * 64, "not a TFLite model"),
        "cut.tflite": (chain()[:40], "corrupt TFLite flatbuffer"),
        "code.tflite": (build(tensors, [(RELU, [0], [1])], [0], [1], bad_opcode=True),
                        "operator 0 opcodeIndex: index 5 is past the 1 operator codes"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ProblemError) as info:
            memplan.load(path)
        assert str(info.value).startswith(str(path)) and message in str(info.value)
        assert "\n" not in str(info.value)


def test_missing_extra_is_one_line_naming_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tflite_micro.tensorflow.lite.micro.python", None)
    path = tmp_path / "m.tflite"
    path.write_bytes(chain())
    with pytest.raises(ProblemError, match=r"pip install 'memplan\[tflite\]'"):
        memplan.load(path)


# --------------------------------------------------------------- planned model
def test_planned_model_keeps_everything_else_and_replaces_a_plan():
    data = chain()
    problem = from_tflite(data)
    plan = memplan.solve(problem, time_limit=5)
    planned = planned_model(data, problem, plan)
    offsets = read_planned_offsets(planned)
    ids = tensor_ids(read_model(data))
    assert list(offsets) == [int(plan.offsets[problem.index(i)]) if i != "c" else -1
                             for i in ids]
    before, after = read_model(data), read_model(planned)
    assert [m.name for m in after.metadata] == [METADATA_NAME.encode()]
    assert len(after.buffers) == len(before.buffers) + 1
    after.metadata, after.buffers = before.metadata, after.buffers[:-1]
    assert tree_equal(before, after)
    # every buffer's data starts on a 16-byte boundary
    root = fb.Model.GetRootAs(planned, 0)
    for i in range(root.BuffersLength()):
        table = root.Buffers(i)._tab
        field = table.Offset(4)
        if field:
            assert table.Vector(field) % 16 == 0
    # planning the planned model replaces its plan: same buffers, one entry
    other = Plan.from_offsets(problem, np.arange(len(problem)) * 48, planner="manual")
    replanned = read_model(planned_model(planned, problem, other))
    assert len(replanned.buffers) == len(after.buffers) + 1
    assert [m.name for m in replanned.metadata] == [METADATA_NAME.encode()]
    assert read_planned_offsets(planned_model(planned, problem, other))[0] == 0


def test_an_existing_offline_plan_entry_is_replaced_not_added():
    stale = np.array([0, 0, 6, *([-1] * 6)], "<i4").tobytes()
    with_stale = chain({"min_runtime_version": b"1.5.0", METADATA_NAME: stale})
    problem = from_tflite(with_stale)
    plan = memplan.solve(problem, time_limit=5)
    out = read_model(planned_model(with_stale, problem, plan))
    assert [m.name for m in out.metadata] == [b"min_runtime_version", METADATA_NAME.encode()]
    assert len(out.buffers) == len(read_model(with_stale).buffers)  # its buffer reused
    assert list(read_planned_offsets(planned_model(with_stale, problem, plan)))[1] == -1


def test_cli_writes_the_planned_model_and_the_raw_bytes(tmp_path, capsys):
    model = tmp_path / "chain.tflite"
    model.write_bytes(chain())
    planned, raw = tmp_path / "planned.tflite", tmp_path / "plan.bin"
    assert main(["solve", str(model), "-o", str(planned), "--quiet"]) == 0
    assert main(["solve", str(model), "--export", "tflm", "-o", str(raw), "--quiet"]) == 0
    version, subgraph, offsets = read_offline_plan(raw.read_bytes())
    assert (version, subgraph, len(offsets)) == (0, 0, 6) and offsets[1] == -1
    assert list(offsets) == list(read_planned_offsets(planned))
    problem = from_tflite(model)
    ids = tensor_ids(read_model(model.read_bytes()))
    plan = Plan.from_offsets(problem, [offsets[ids.index(i)] for i in problem.ids],
                             planner="read back")
    assert validate(problem, plan) == []
    assert main(["info", str(planned)]) == 0 and "5 over 5 steps" in capsys.readouterr().out
    assert main(["solve", str(tmp_path / "x.json"), "--export", "tflite", "-o",
                 str(tmp_path / "y.tflite")]) == 2


# --------------------------------------------------------------- inside TFLM
def test_cli_proves_a_tflite_plan_in_tflm(tmp_path, capsys):
    model, plan_file = tmp_path / "chain.tflite", tmp_path / "plan.json"
    model.write_bytes(chain())
    assert main(["solve", str(model), "-o", str(plan_file), "--prove"]) == 0
    assert "bit-identical" in capsys.readouterr().out
    assert main(["prove", str(model), str(plan_file), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["proven"] and result["planned_head"] == result["arena_size"] == 144
    assert result["planned_min_arena"] <= result["tflm_min_arena"]
    document = json.loads(plan_file.read_text())
    document["plan"]["offsets"] = {id: 0 for id in document["plan"]["offsets"]}
    plan_file.write_text(json.dumps(document))
    assert main(["prove", str(model), str(plan_file)]) == 1  # the validator refuses it
    assert main(["prove", str(model), str(plan_file), "--dim", "batch=1"]) == 2


def test_the_tflm_proof_command_plans_proves_and_refuses_bad_input(tmp_path, capsys):
    """``python -m memplan.cli.tflm_proof``: 0 with the report when proven, 2 and one line
    naming the file for a model that is not one."""
    from memplan.cli.exit_codes import BAD_INPUT, OK
    from memplan.cli.tflm_proof import main as tflm_proof

    model, bad = tmp_path / "chain.tflite", tmp_path / "bad.tflite"
    model.write_bytes(chain())
    bad.write_bytes(b"not a flatbuffer")
    assert tflm_proof([str(model), "--time-limit", "2", "--no-bisect"]) == OK
    assert "bit-identical" in capsys.readouterr().out
    assert tflm_proof([str(bad)]) == BAD_INPUT
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ") and "bad.tflite" in error


def test_proof_in_tflm_chain():
    data = chain()
    report = prove(data, time_limit=5)
    assert report.ok, str(report)
    assert report.arena_size == report.planned.head == report.tflm.head == 144
    for size in (report.min_arena, report.planned_min_arena):  # bisection found the edge
        inputs = random_inputs(data)
        assert works(data, size, inputs) and not works(data, size - 1, inputs)
    assert smallest_arena(data, random_inputs(data), 16) == report.min_arena
    assert not works(data, 16, random_inputs(data))  # far too small: TFLM crashes in the child


def test_a_wrong_plan_changes_the_outputs_in_tflm():
    data = chain()
    problem = from_tflite(data)
    everything_at_zero = Plan.from_offsets(problem, np.zeros(len(problem)), planner="wrong")
    assert validate(problem, everything_at_zero)  # the validator sees it ...
    inputs = random_inputs(data, seed=3)
    wrong = run(planned_model(data, problem, everything_at_zero), inputs)
    right = run(data, inputs)
    # ... and TFLM computes something else: b = relu(a) overwrote a before d read it
    assert wrong.outputs[0].tobytes() != right.outputs[0].tobytes()
    assert wrong.head == 48


@pytest.fixture(autouse=True)
def _no_false_crash_reports():
    """TFLM's interpreter survives its own SIGSEGV when an arena is too small (the bisection
    of `smallest_arena` meets that): pytest's faulthandler would print a "Fatal Python
    error" for each one although the process goes on."""
    enabled = faulthandler.is_enabled()
    faulthandler.disable()
    yield
    if enabled:
        faulthandler.enable()


@pytest.fixture(scope="module")
def keras_models(tmp_path_factory):
    """``tiny_cnn`` of `benchmarks.tflite_models` (convolutions, a residual add, a transposed
    convolution), converted float32 and int8 by tensorflow-cpu in a child process (this one
    runs CP-SAT: with tensorflow loaded beside it, CP-SAT crashed). TFLM's int8
    TRANSPOSE_CONV asks for int32 scratch."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("the tflite extra is not installed")
    from benchmarks.tflite_models import model_file

    folder = tmp_path_factory.mktemp("keras")
    return {kind: model_file(folder, "tiny_cnn", kind) for kind in ("float32", "int8")}


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_proof_in_tflm_converted_keras_model(keras_models, kind):
    problem = memplan.load(keras_models[kind])
    plan = memplan.solve(problem, time_limit=5)
    assert validate(problem, plan) == []
    report = prove(keras_models[kind], problem, plan)
    assert report.ok, str(report)
    assert report.planned.head == report.arena_size <= report.tflm.head
    assert report.planned_min_arena <= report.min_arena
    assert report.planned_min_arena - report.planned.head == report.min_arena - report.tflm.head
    scratch = [b for b in problem.buffers if b.kind == "scratch"]
    assert [(b.id, b.size, b.end - b.start) for b in scratch] == \
        ([("TRANSPOSE_CONV@6:scratch0", 4 * 12 * 12 * 16, 1)] if kind == "int8" else [])


def test_without_its_scratch_the_plan_is_not_what_tflm_uses(keras_models):
    """TFLM fits the int8 TRANSPOSE_CONV's scratch around the plan: the arena grows past it."""
    problem = from_tflite(keras_models["int8"], scratch=False)
    report = prove(keras_models["int8"], problem, memplan.solve(problem, time_limit=5),
                   bisect=False)
    assert not report.mismatches and not report.head_matches
    assert report.planned.head > report.arena_size


def test_a_tflm_childs_answer_is_read_as_arrays_never_unpickled():
    """What the forked TFLM run sends back is an .npz of plain arrays: a pickle (what a
    model that took over TFLM in the child could send) is refused, never loaded."""
    import pickle

    from memplan.tflite.tflm_arena import TflmRun, _decoded, _encoded

    run_back = _decoded(_encoded("ok", TflmRun([np.arange(3, dtype=np.int8)], 64, 32, 96)))[1]
    assert (run_back.head, run_back.tail, run_back.total) == (64, 32, 96)
    assert run_back.outputs[0].tolist() == [0, 1, 2]
    assert _decoded(_encoded("refused", "too small")) == ("refused", "too small")
    with pytest.raises(ValueError):
        _decoded(pickle.dumps(("ok", [np.zeros(2)])))
