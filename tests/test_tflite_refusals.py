"""Corrupt and awkward .tflite models: one line naming the field, or TFLM's refusal as a
verdict, never a traceback.

The models are built with the schema's object API (`tests.test_tflite.build`);
a byte-flip fuzz runs over them with a fixed seed, in bounded time.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import memplan
from memplan import Plan, ProblemError, validate

from .test_refusals import one_line_error, run_cli

fb = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated",
                         reason="the tflite extra is not installed")
flatbuffers = pytest.importorskip("flatbuffers")

from memplan.tflite.tflite import from_tflite, read_model  # noqa: E402
from memplan.tflite.tflm_arena import MAX_ARENA, prove  # noqa: E402

from .test_tflite import (  # noqa: E402
    FLOAT32,
    RELU,
    _no_false_crash_reports,  # noqa: F401 - autouse: TFLM crashes in children
    build,
    chain,
)


def pack(model) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _signature(tree, subgraph: int, tensor: int) -> None:
    signature, entry = fb.SignatureDefT(), fb.TensorMapT()
    entry.name, entry.tensorIndex = "x", tensor
    signature.inputs, signature.outputs, signature.subgraphIndex = [entry], [], subgraph
    tree.signatureDefs = [signature]


def _metadata_entry(tree, buffer: int) -> None:
    entry = fb.MetadataT()
    entry.name, entry.buffer = "junk", buffer
    tree.metadata = [entry]


CORRUPTIONS = {  # field named in the message -> how to break it in the object tree
    "subgraph 0 operator 1 opcodeIndex": lambda t: setattr(t.subgraphs[0].operators[1],
                                                           "opcodeIndex", 7),
    "subgraph 0 operator 0 inputs": lambda t: setattr(t.subgraphs[0].operators[0], "inputs",
                                                      np.array([0, 60], np.int32)),
    "subgraph 0 operator 2 outputs": lambda t: setattr(t.subgraphs[0].operators[2], "outputs",
                                                       np.array([-4], np.int32)),
    "subgraph 0 operator 0 intermediates": lambda t: setattr(
        t.subgraphs[0].operators[0], "intermediates", np.array([6], np.int32)),
    "subgraph 0 inputs": lambda t: setattr(t.subgraphs[0], "inputs", np.array([99], np.int32)),
    "subgraph 0 outputs": lambda t: setattr(t.subgraphs[0], "outputs",
                                            np.array([5, 6], np.int32)),
    "subgraph 0 tensor 3 buffer": lambda t: setattr(t.subgraphs[0].tensors[3], "buffer", 40),
    "metadataBuffer": lambda t: setattr(t, "metadataBuffer", np.array([9], np.int32)),
    "metadata 0 buffer": lambda t: _metadata_entry(t, 12),
    "signature 0 subgraphIndex": lambda t: _signature(t, 3, 0),
    "signature 0 inputs tensorIndex": lambda t: _signature(t, 0, 17),
}


@pytest.mark.parametrize("field", CORRUPTIONS)
def test_every_index_of_the_schema_past_its_list_is_refused_naming_the_field(field, tmp_path):
    tree = read_model(chain())
    CORRUPTIONS[field](tree)
    path = tmp_path / "corrupt.tflite"
    path.write_bytes(pack(tree))
    with pytest.raises(ProblemError) as error:
        memplan.load(path)
    assert str(error.value).startswith(f"{path}: {field}: index ") and "\n" not in str(error.value)
    for command in ("info", "solve"):
        code, _, err = run_cli(command, path)
        assert code == 2
        one_line_error(err, field)


def _models() -> dict[str, bytes]:
    mean, int8, int32 = fb.BuiltinOperator.MEAN, fb.TensorType.INT8, fb.TensorType.INT32
    reduce = build([("x", [1, 4, 4, 8], int8), ("axes", [2], int32), ("m", [1, 1, 1, 8], int8),
                    ("y", [1, 1, 1, 8], int8)], [(mean, [0, 1], [2]), (RELU, [2], [3])], [0], [3],
                   {1: np.array([1, 2], "<i4").tobytes()})
    state = build([("in", [2, 3], FLOAT32), ("state", [4], FLOAT32, True),
                   ("out", [2, 3], FLOAT32), ("empty", [0, 4], FLOAT32)],
                  [(RELU, [0], [2])], [0], [2, 3])
    return {"chain": chain(), "reduce": reduce, "state": state}


def test_byte_flips_of_the_sample_models_load_or_are_refused_in_one_line(tmp_path):
    """Every byte of each model set to a random value (fixed seed): the frontend plans
    it or refuses it with a one-line `ProblemError`; a sample goes through the CLI too."""
    rng = np.random.default_rng(29)
    tried = refused = 0
    for name, data in _models().items():
        for at in range(len(data)):
            flipped = bytearray(data)
            flipped[at] = (flipped[at] + int(rng.integers(1, 256))) % 256
            tried += 1
            try:
                problem = from_tflite(bytes(flipped))
            except ProblemError as error:
                refused += 1
                assert "\n" not in str(error), (name, at, str(error))
                continue
            assert validate(problem, memplan.plan_with("greedy_by_size", problem)) == []
            if at % 97 == 0:
                path = tmp_path / f"{name}_{at}.tflite"
                path.write_bytes(bytes(flipped))
                code, _, err = run_cli("info", path)
                assert code == 0 and err == "", (name, at, err)
    assert tried > 1500 and 0 < refused < tried  # both outcomes met: the flips reach fields


def test_a_zero_size_output_that_tflm_calls_dynamic_is_a_verdict_not_a_traceback(tmp_path):
    data = build([("x", [1, 4], FLOAT32), ("a", [1, 0], FLOAT32), ("y", [1, 4], FLOAT32)],
                 [(RELU, [0], [1]), (RELU, [0], [2])], [0], [2])
    path = tmp_path / "zero.tflite"
    path.write_bytes(data)
    code, out, err = run_cli("solve", path, "--prove")
    assert code == 1 and "Traceback" not in err
    (verdict,) = [line for line in out.splitlines() if "not proven" in line]
    assert "TFLM refuses the model with its own planner" in verdict
    assert "dynamic tensor #1" in verdict
    report = prove(data, bisect=False)
    assert not report.ok and report.tflm is None and "dynamic tensor" in report.refused


def _sparse_plan(data: bytes, output_at: int) -> tuple:
    """A valid plan of ``data`` whose output ``y`` sits at ``output_at`` (nothing else near)."""
    problem = from_tflite(data)
    plan = memplan.plan_with("greedy_by_size", problem)
    offsets = plan.offsets.copy()
    offsets[problem.index("y")] = output_at
    sparse = Plan.from_offsets(problem, offsets, planner="by hand")
    assert validate(problem, sparse) == []
    return problem, sparse


def test_a_valid_plan_with_its_output_at_64_kib_is_proven_in_an_arena_sized_from_it(tmp_path):
    data = chain()
    problem, plan = _sparse_plan(data, 65536)
    report = prove(data, problem, plan, bisect=False)
    assert report.ok, str(report)
    assert report.planned.head == plan.arena_size == 65536 + 48
    model, plan_file = tmp_path / "chain.tflite", tmp_path / "plan.json"
    model.write_bytes(data)
    assert run_cli("solve", model, "-o", tmp_path / "dense.json")[0] == 0
    document = json.loads((tmp_path / "dense.json").read_text())
    document["plan"]["offsets"]["y"] = 65536
    document["plan"]["arena_size"] = 65536 + 48
    document["plan"]["status"] = "feasible"  # a hand-moved plan claims no optimality
    plan_file.write_text(json.dumps(document))
    code, out, err = run_cli("prove", model, plan_file, "--json")
    assert code == 0 and err == "", err
    result = json.loads(out)
    assert result["proven"] and result["planned_head"] == 65536 + 48 and result["refused"] is None


def test_a_plan_too_large_for_tflm_here_says_so_in_one_line():
    data = chain()
    problem, plan = _sparse_plan(data, MAX_ARENA)
    report = prove(data, problem, plan, bisect=False)
    assert not report.ok and report.planned is None
    assert str(report).count("\n") == 0 and f"more than memplan runs TFLM with ({MAX_ARENA} B)" \
        in str(report)


@pytest.mark.parametrize("at, value", [(136, 232), (453, 71)])
def test_a_model_that_crashes_tflm_is_a_verdict(at, value, tmp_path):
    """Flipped bytes that still load but make TFLM's interpreter crash (SIGSEGV, SIGABRT):
    each run is in a child process, so the crash is reported, and nothing else printed."""
    data = bytearray(chain())
    data[at] = value
    path = tmp_path / "crashing.tflite"
    path.write_bytes(bytes(data))
    code, out, err = run_cli("solve", path, "--prove")
    assert code == 1 and err == "", err
    assert "not proven: TFLM refuses the model with its own planner: TFLM's interpreter " \
           "crashed on the model (signal SIG" in out


def test_byte_flips_of_a_sample_model_are_proven_or_refused_in_one_line():
    rng = np.random.default_rng(1)
    data, outcomes = chain(), set()
    for at in range(0, len(data), 23):
        flipped = bytearray(data)
        flipped[at] = (flipped[at] + int(rng.integers(1, 256))) % 256
        try:
            report = prove(bytes(flipped), bisect=False, time_limit=1)
        except ProblemError as error:
            assert "\n" not in str(error)
            outcomes.add("refused at load")
            continue
        outcomes.add("proven" if report.ok else "not proven")
        assert report.ok or report.refused is None or "\n" not in report.refused
    assert {"proven", "refused at load"} <= outcomes
