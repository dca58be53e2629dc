"""Hostile .tflite models: seeded mutations of small real models, and the shapes of attack a
flatbuffer allows (tables referenced many times over, sizes past int64, non-UTF-8 names).

Every mutated model is planned (and the plan validated) or refused with one line
naming the file; none runs long or unfolds in memory. The mutations: fields of
the object tree set to hostile values (indices past their tables, negative and
huge dimensions, unknown types, names of random bytes), and four-byte words of
the flatbuffer overwritten with hostile numbers (offsets and vector lengths).
"""

from __future__ import annotations

import numpy as np
import pytest

import memplan
from memplan import ProblemError, validate

from .test_refusals import one_line_error, run_cli

fb = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated",
                         reason="the tflite extra is not installed")
flatbuffers = pytest.importorskip("flatbuffers")

from memplan.tflite import tflite  # noqa: E402
from memplan.tflite.tflite import from_tflite, read_model  # noqa: E402

from .test_tflite import FLOAT32, RELU, build  # noqa: E402
from .test_tflite_refusals import _models, pack  # noqa: E402

WORDS = (0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x10000000, 0xFFFF, 0, 1, 4)  # as offsets, lengths
VALUES = (-(2 ** 31), -7, -1, 0, 1, 3, 99, 2 ** 16, 2 ** 31 - 1)  # as indices, dimensions


def _mutate_field(tree, rng) -> None:
    """One field of the object tree set to a hostile value (seeded)."""
    graph = tree.subgraphs[0]
    value = int(rng.choice(VALUES))
    tensor = graph.tensors[int(rng.integers(len(graph.tensors)))]
    op = graph.operators[int(rng.integers(len(graph.operators)))]
    kind = int(rng.integers(9))
    if kind == 0:
        tensor.shape = np.array(rng.choice(VALUES, size=int(rng.integers(0, 7))), np.int32)
    elif kind == 1:
        tensor.type = int(rng.integers(0, 128))  # an int8 field
    elif kind == 2:
        tensor.name = bytes(rng.integers(0, 256, size=int(rng.integers(0, 12)), dtype=np.uint8))
    elif kind == 3:
        tensor.buffer = value % 2 ** 32  # a uint32 field
    elif kind == 4:
        op.opcodeIndex = value % 2 ** 32
    elif kind == 5:
        setattr(op, str(rng.choice(["inputs", "outputs", "intermediates"])),
                np.array([value], np.int32))
    elif kind == 6:
        setattr(graph, str(rng.choice(["inputs", "outputs"])), np.array([value], np.int32))
    elif kind == 7:
        tensor.isVariable = not tensor.isVariable
    else:
        code = tree.operatorCodes[int(rng.integers(len(tree.operatorCodes)))]
        code.builtinCode = int(rng.integers(0, 256))
        code.deprecatedBuiltinCode = min(code.builtinCode, 127)


def _mutate_word(data: bytes, rng) -> bytes:
    """A four-byte-aligned word of the flatbuffer (past its header) set to a hostile number."""
    at = 8 + 4 * int(rng.integers((len(data) - 8) // 4))
    return data[:at] + int(rng.choice(WORDS)).to_bytes(4, "little") + data[at + 4:]


def _planned_or_refused(data: bytes, path, tried: int) -> str:
    try:
        problem = from_tflite(data)
    except ProblemError as error:
        assert "\n" not in str(error), str(error)
        if tried % 40 == 0:  # through the command line too: one line naming the file
            path.write_bytes(data)
            code, _, err = run_cli("info", path)
            assert code == 2, err
            one_line_error(err, str(path))
        return "refused"
    assert validate(problem, memplan.plan_with("greedy_by_size", problem)) == []
    return "planned"


def test_seeded_mutations_of_small_models_are_planned_or_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(5)
    outcomes = {"planned": 0, "refused": 0}
    tried = 0
    for name, data in _models().items():
        for _ in range(150):
            tree = read_model(data)
            for _ in range(int(rng.integers(1, 4))):
                _mutate_field(tree, rng)
            outcomes[_planned_or_refused(pack(tree), tmp_path / f"{name}.tflite", tried)] += 1
            tried += 1
        for _ in range(150):
            mutated = data
            for _ in range(int(rng.integers(1, 3))):
                mutated = _mutate_word(mutated, rng)
            outcomes[_planned_or_refused(mutated, tmp_path / f"{name}.tflite", tried)] += 1
            tried += 1
    assert outcomes["planned"] > 50 and outcomes["refused"] > 300, outcomes


def _shared(subgraphs: int, tensors: int) -> bytes:
    """``subgraphs`` references to one subgraph of ``tensors`` references to one tensor."""
    builder = flatbuffers.Builder(1024)
    name = builder.CreateString("t")
    fb.TensorStart(builder)
    fb.TensorAddName(builder, name)
    tensor = _references(builder, fb.TensorEnd(builder), tensors)
    fb.SubGraphStart(builder)
    fb.SubGraphAddTensors(builder, tensor)
    subgraph = _references(builder, fb.SubGraphEnd(builder), subgraphs)
    fb.ModelStart(builder)
    fb.ModelAddVersion(builder, 3)
    fb.ModelAddSubgraphs(builder, subgraph)
    builder.Finish(fb.ModelEnd(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _references(builder, table: int, count: int) -> int:
    """A vector of ``count`` offsets, all to ``table``."""
    builder.StartVector(4, count, 4)
    for _ in range(count):
        builder.PrependUOffsetTRelative(table)
    return builder.EndVector()


def test_tables_referenced_many_times_over_are_refused_before_they_unfold(tmp_path):
    """80 KB pointing 200 x 20,000 times at one tensor: four million objects, refused."""
    path = tmp_path / "shared.tflite"
    path.write_bytes(_shared(200, 20_000))
    with pytest.raises(ProblemError, match="shared.tflite: more tables than its .* bytes"):
        memplan.load(path)
    with pytest.raises(ProblemError, match="tensor 0 buffer"):  # shared, but few: read
        from_tflite(_shared(1, 100))


def test_more_tables_than_memplan_reads_are_refused(monkeypatch):
    monkeypatch.setattr(tflite, "MAX_TABLES", 8)  # the chain: 6 tensors, 4 operators...
    with pytest.raises(ProblemError, match="more than 8 tables"):
        from_tflite(_models()["chain"])


def test_sizes_past_int64_and_names_not_in_utf8(tmp_path):
    path = tmp_path / "huge.tflite"
    path.write_bytes(build([("x", [2 ** 31 - 1] * 3, FLOAT32), ("y", [4], FLOAT32)],
                           [(RELU, [0], [1])], [0], [1]))
    code, _, err = run_cli("info", path)
    assert code == 2
    one_line_error(err, str(path), "buffer 'x'", "beyond the largest number")
    tree = read_model(_models()["chain"])
    tree.subgraphs[0].tensors[2].name = b"\xff\xfea"
    problem = from_tflite(pack(tree))
    assert "\ufffd\ufffda" in problem.ids
