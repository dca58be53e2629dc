"""Planning reads no weights: the weightless model gives the full model's problem exactly."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from memplan import ProblemError, plan_with, validate
from memplan.deploy.regions import plan_regions
from memplan.formats.memplan_json import problem_to_dict
from memplan.onnx import onnx_graph, onnx_weightless
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_graph import load_graph
from memplan.onnx.onnx_metadata import ARENA_KEY, PLAN_KEY, read_plan, write_annotated
from memplan.schedule.operator_order import reordered_model
from tests.conftest import light_models_dir

F, I64 = TensorProto.FLOAT, TensorProto.INT64
LIGHT = sorted(light_models_dir().glob("light_*.onnx"))
OPTIONS = [{}, {"weights": "region", "concat_inplace": True}, {"inplace": False, "alignment": 64}]


def weight(name, *shape, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return numpy_helper.from_array(values, name)


def shapes_model(batch="N"):
    """Reshape, Slice, Expand and Tile by constants (initializers and a Constant node)."""
    d = 32
    initializers = [
        weight("w1", d, 4 * d), weight("w2", 4 * d, d, seed=1), weight("bias", 4 * d, seed=2),
        numpy_helper.from_array(np.array([0, 4, 4, 2 * d], np.int64), "heads"),
        numpy_helper.from_array(np.array([0, 2 * d], np.int64), "starts"),
        numpy_helper.from_array(np.array([2 * d, 4 * d], np.int64), "ends"),
        numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
        numpy_helper.from_array(np.array([1, 1, 3, 1], np.int64), "repeats"),
        numpy_helper.from_array(np.arange(1 << 10, dtype=np.int64), "positions"),  # > INLINE
    ]
    nodes = [
        helper.make_node("Constant", [], ["flat"], value=helper.make_tensor(
            "flat", I64, [2], [0, -1])),
        helper.make_node("Constant", [], ["table"], value=numpy_helper.from_array(
            np.ones((d, d), np.float32), "table")),  # a weight in a Constant node
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "bias"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Reshape", ["r", "heads"], ["r4"]),
        helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["s"]),
        helper.make_node("Expand", ["s", "expand_to"], ["e"]),
        helper.make_node("Tile", ["r4", "repeats"], ["t"]),
        helper.make_node("Reshape", ["t", "flat"], ["t2"]),
        helper.make_node("MatMul", ["r", "w2"], ["m"]),
        helper.make_node("MatMul", ["m", "table"], ["y"]),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["positions", "xs"], ["p"]),
    ]
    initializers.append(numpy_helper.from_array(np.array([3, 4, 2 * d], np.int64), "expand_to"))
    graph = helper.make_graph(
        nodes, "shapes", [helper.make_tensor_value_info("x", F, [batch, 4, d])],
        [helper.make_tensor_value_info(n, F, None) for n in ("y", "e", "t2")]
        + [helper.make_tensor_value_info("p", I64, None)], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def document(problem):
    return problem_to_dict(problem), problem.widths.tolist(), problem.steps


def full_problem(monkeypatch, path, **options):
    """The problem as planned from the whole model, every weight and external tensor loaded."""
    whole = onnx.load(str(path), load_external_data=True)
    with monkeypatch.context() as patch:
        patch.setattr(onnx_graph, "load_weightless", lambda model: (model, None))
        return from_onnx(whole, name=path.stem, **options)


def save(model, path, external=None):
    if external is None:
        onnx.save_model(model, str(path))
    else:
        onnx.save_model(model, str(path), save_as_external_data=True, size_threshold=0,
                        all_tensors_to_one_file=external == "one file", location="weights.bin")
    return path


@pytest.mark.parametrize("inline", [onnx_weightless.INLINE, 0])
@pytest.mark.parametrize("external", [None, "one file", "a file each"])
@pytest.mark.parametrize("options", OPTIONS)
def test_the_weightless_problem_is_the_full_models_problem(tmp_path, monkeypatch, inline,
                                                           external, options):
    monkeypatch.setattr(onnx_weightless, "INLINE", inline)  # 0: every tensor's data read back
    path = save(shapes_model(), tmp_path / "shapes.onnx", external)
    weightless = from_onnx(path, dims={"N": 3}, **options)
    assert document(weightless) == document(full_problem(monkeypatch, path, dims={"N": 3},
                                                         **options))
    assert {"r4", "s", "e", "t2", "p"} <= set(weightless.ids)  # sizes from constant values
    plan = plan_regions(weightless) if weightless.regions else plan_with("best", weightless)
    assert not validate(weightless, plan)


def test_planning_never_opens_the_weights_external_data(tmp_path):
    path = save(shapes_model(), tmp_path / "shapes.onnx", "a file each")
    for name in ("w1", "w2"):
        (tmp_path / name).unlink()  # the large weights' files are gone: never read
    problem = from_onnx(path, dims={"N": 3})
    model = load_graph(path)[0]
    by_name = {t.name: t for t in model.graph.initializer}
    assert not by_name["w1"].raw_data and by_name["w1"].data_location == TensorProto.EXTERNAL
    assert numpy_helper.to_array(by_name["heads"]).tolist() == [0, 4, 4, 64]
    assert len(problem) > 0


def test_large_weights_have_no_data_and_shape_constants_keep_theirs(tmp_path):
    model = shapes_model()
    path = save(model, tmp_path / "shapes.onnx")
    for weightless in (load_graph(path)[0], load_graph(model)[0]):
        tensors = {t.name: t for t in weightless.graph.initializer}
        for name in ("w1", "w2"):  # the bias, 512 bytes, is kept whole
            assert list(tensors[name].dims) == list(
                next(t for t in model.graph.initializer if t.name == name).dims)
            assert not tensors[name].raw_data and not tensors[name].float_data
        assert numpy_helper.to_array(tensors["positions"]).tolist() == list(range(1024))
        assert weightless.ByteSize() < model.ByteSize() / 4  # the 8 kB positions stay
        table = weightless.graph.node[1].attribute[0].t
        assert list(table.dims) == [32, 32] and not table.raw_data
    assert model.graph.initializer[0].raw_data  # the model given is not changed


def test_external_data_outside_the_models_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    path = save(shapes_model(), folder / "shapes.onnx", "one file")
    proto = onnx.load(str(path), load_external_data=False)
    heads = next(t for t in proto.graph.initializer if t.name == "heads")
    (tmp_path / "elsewhere.bin").write_bytes((folder / "weights.bin").read_bytes())
    for entry in heads.external_data:
        if entry.key == "location":
            entry.value = "../elsewhere.bin"
    onnx.save_model(proto, str(path))
    with pytest.raises(ProblemError, match="'heads'.*not a file in the model's folder"):
        from_onnx(path, dims={"N": 3})


@pytest.mark.parametrize("path", LIGHT, ids=lambda p: p.stem)
def test_light_models_plan_as_from_the_whole_model(monkeypatch, path):
    assert document(from_onnx(path)) == document(full_problem(monkeypatch, path))


@pytest.mark.parametrize("given", ["path", "proto"])
def test_the_annotated_model_keeps_its_weights_and_other_metadata(tmp_path, given):
    model = shapes_model(batch=3)
    model.metadata_props.add(key="author", value="someone")
    model.metadata_props.add(key=PLAN_KEY, value="an old plan")
    path = save(model, tmp_path / "shapes.onnx")
    problem = from_onnx(path)
    plan = plan_with("greedy_by_size", problem)
    target = path if given == "path" else tmp_path / "out.onnx"  # a path: over the model itself
    write_annotated(target, path if given == "path" else model, problem, plan)
    written = onnx.load(str(target))
    assert written.graph == model.graph  # every weight and node as it was
    props = {p.key: p.value for p in written.metadata_props}
    assert props["author"] == "someone" and props[ARENA_KEY] == str(plan.arena_size)
    assert json.loads(props[PLAN_KEY])["arena_size"] == plan.arena_size
    assert read_plan(target, problem).offsets.tolist() == plan.offsets.tolist()
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("given", ["path", "proto"])
def test_a_model_is_written_with_its_nodes_in_a_new_order(tmp_path, given):
    model = shapes_model(batch=3)
    path = save(model, tmp_path / "shapes.onnx")
    problem = from_onnx(path)
    plan = plan_with("greedy_by_size", problem)
    order = list(range(len(model.graph.node)))[::-1]
    write_annotated(tmp_path / "out.onnx", path if given == "path" else model, problem, plan,
                    node_order=order)
    assert onnx.load(str(tmp_path / "out.onnx")).graph == \
        reordered_model(model, order, []).graph
    with pytest.raises(ValueError, match="each of the graph's 14 node positions once"):
        write_annotated(tmp_path / "out.onnx", path, problem, plan, node_order=[0, 0])


def test_the_scale_benchmarks_models_written_in_chunks_are_whole_models(tmp_path):
    from benchmarks.onnx_scale import write_transformer

    problems = []
    for external in (False, True):
        path = tmp_path / f"stack-{external}.onnx"
        write_transformer(path, 32, 2, external=external)
        onnx.checker.check_model(str(path), full_check=True)
        whole = onnx.load(str(path))
        assert sum(numpy_helper.to_array(t).size for t in whole.graph.initializer) > 2 * 12 * 32**2
        problems.append(problem_to_dict(from_onnx(path, name="stack")))
    assert problems[0] == problems[1]
