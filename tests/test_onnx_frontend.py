"""The ONNX frontend: one small hand-built graph per rule, then the nine light models."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from memplan import ProblemError, lower_bound, plan_with, validate
from memplan.bounds import live_bytes
from memplan.deploy.regions import plan_regions
from memplan.formats.readers import load
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_types import ELEMENT_BITS, tensor_bytes
from tests.conftest import REPO, light_models_dir

F = TensorProto.FLOAT
LIGHT = sorted(light_models_dir().glob("light_*.onnx"))


def tensor(name, shape, elem_type=F):
    return helper.make_tensor_value_info(name, elem_type, shape)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def node(op, inputs, outputs, **attributes):
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attributes)


def shape_constant(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def aliases(problem):
    return {(a.src, a.dst, a.delta, a.optional) for a in problem.aliases}


def lifetime(problem, name):
    idx = problem.index(name)
    return int(problem.starts[idx]), int(problem.ends[idx])


# ------------------------------------------------------------------ sizes
def test_every_onnx_element_type_has_a_size_but_strings():
    named = dict(TensorProto.DataType.items())
    assert set(named.values()) - set(ELEMENT_BITS) == {TensorProto.UNDEFINED, TensorProto.STRING}


@pytest.mark.parametrize("type_name, count, size", [
    ("FLOAT", 3, 12), ("BOOL", 7, 7), ("FLOAT16", 3, 6), ("BFLOAT16", 3, 6),
    ("FLOAT8E4M3FN", 5, 5), ("FLOAT8E5M2FNUZ", 5, 5), ("INT4", 5, 3), ("UINT4", 4, 2),
    ("FLOAT4E2M1", 3, 2), ("INT2", 5, 2), ("FLOAT6E2M3", 4, 3), ("COMPLEX128", 2, 32),
    ("INT64", 0, 0),
])
def test_sizes_pack_elements_as_the_spec_says(type_name, count, size):
    if not hasattr(TensorProto, type_name):
        pytest.skip(f"this onnx has no {type_name}")
    assert tensor_bytes(getattr(TensorProto, type_name), count, "t") == size


@pytest.mark.parametrize("type_name, size", [("FLOAT16", 20), ("BFLOAT16", 20), ("BOOL", 10),
                                             ("FLOAT8E4M3FN", 10), ("INT4", 5), ("UINT4", 5)])
def test_a_model_tensor_of_each_type_gets_its_packed_size(type_name, size):
    elem_type = getattr(TensorProto, type_name)
    m = model([node("Identity", ["x"], ["y"])], [tensor("x", [2, 5], elem_type)],
              [tensor("y", [2, 5], elem_type)], opset=21)
    problem = from_onnx(m)
    assert problem.sizes[problem.index("x")] == size


def test_strings_are_refused_with_the_tensor_named():
    m = model([node("Identity", ["x"], ["y"])], [tensor("x", [2], TensorProto.STRING)],
              [tensor("y", [2], TensorProto.STRING)])
    with pytest.raises(ProblemError, match="'x'.*strings have no fixed size"):
        from_onnx(m)


def test_zero_size_tensors_need_no_buffer():
    m = model([node("Relu", ["x"], ["a"]), node("Concat", ["a", "z"], ["y"], axis=0)],
              [tensor("x", [3]), tensor("z", [0])], [tensor("y", [3])])
    problem = from_onnx(m)
    assert set(problem.ids) == {"x", "a", "y"}


# ------------------------------------------------------------ shapes and dims
def test_symbolic_dimensions_are_bound_by_dims_or_refused_by_name():
    m = model([node("Relu", ["x"], ["a"]), node("Relu", ["a"], ["y"])],
              [tensor("x", ["batch", 4])], [tensor("y", ["batch", 4])])
    with pytest.raises(ProblemError, match="tensor 'x': dimension 0 is the unbound symbol "
                                           "'batch'"):
        from_onnx(m)
    problem = from_onnx(m, dims={"batch": 3})
    assert problem.sizes.tolist() == [48, 48, 48]


def test_a_tensor_without_inferred_shape_is_refused_by_name():
    custom = helper.make_node("Mystery", ["x"], ["a"], domain="example.custom")
    m = model([custom, node("Relu", ["a"], ["y"])], [tensor("x", [4])], [tensor("y", [4])])
    m.opset_import.append(helper.make_opsetid("example.custom", 1))
    with pytest.raises(ProblemError, match="tensor 'a': no inferred"):
        from_onnx(m)


def test_an_inconsistent_model_is_refused_unless_not_strict():
    m = model([node("Add", ["x", "z"], ["y"]), node("Relu", ["x"], ["r"])],
              [tensor("x", [2, 4]), tensor("z", [3, 5])], [tensor("y", None), tensor("r", [2, 4])])
    with pytest.raises(ProblemError, match="shape inference failed"):
        from_onnx(m)
    with pytest.raises(ProblemError, match="tensor 'y'"):  # its size is still unknown
        from_onnx(m, strict=False)


# ------------------------------------------------------------ schedule
def test_nodes_out_of_topological_order_are_refused_naming_node_and_tensor():
    m = model([node("Relu", ["a"], ["y"]), node("Relu", ["x"], ["a"])],
              [tensor("x", [4])], [tensor("y", [4])])
    with pytest.raises(ProblemError, match="node 'y' \\(Relu\\) reads tensor 'a' before node "
                                           "'a' \\(Relu\\) writes it.*topological"):
        from_onnx(m)


def test_a_tensor_nobody_writes_is_refused():
    m = model([node("Add", ["x", "ghost"], ["y"])], [tensor("x", [4])], [tensor("y", [4])])
    with pytest.raises(ProblemError, match="reads tensor 'ghost', which no node"):
        from_onnx(m)


def test_a_tensor_written_twice_is_refused():
    m = model([node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
              [tensor("x", [4])], [tensor("y", [4])])
    with pytest.raises(ProblemError, match="writes tensor 'y', which already has a value"):
        from_onnx(m)


# ------------------------------------------------------------ lifetimes
def test_lifetimes_are_half_open_inputs_from_zero_outputs_to_the_end():
    m = model([node("Relu", ["x"], ["early"]), node("Relu", ["x"], ["a"]),
               node("Relu", ["a"], ["b"]), node("Relu", ["b"], ["late"])],
              [tensor("x", [4])], [tensor("early", [4]), tensor("late", [4])])
    problem = from_onnx(m, inplace=False)
    assert lifetime(problem, "x") == (0, 2)  # read by steps 0 and 1
    assert lifetime(problem, "early") == (0, 4)  # a graph output: alive to the horizon
    assert lifetime(problem, "a") == (1, 3)
    assert lifetime(problem, "late") == (3, 4)
    assert [problem.kinds[problem.index(n)] for n in ("x", "a", "early")] == \
        ["input", "activation", "output"]


def test_an_unread_output_of_a_node_lives_one_step():
    m = model([node("Dropout", ["x"], ["a", "mask"]), node("Relu", ["a"], ["y"])],
              [tensor("x", [4])], [tensor("y", [4])], opset=9)  # Dropout-7: mask of type T
    problem = from_onnx(m)
    assert lifetime(problem, "mask") == (0, 1)
    assert problem.sizes[problem.index("mask")] == 16


def test_widths_are_the_live_bytes_per_step():
    m = model([node("Relu", ["x"], ["a"]), node("Relu", ["a"], ["y"])],
              [tensor("x", [8])], [tensor("y", [8])])
    problem = from_onnx(m)
    assert problem.widths.tolist() == live_bytes(problem).tolist()


# ------------------------------------------------------------ weights
def weights_model():
    shape = shape_constant("w_shape", [4])
    nodes = [node("ConstantOfShape", ["w_shape"], ["w"]),
             node("Unsqueeze", ["w", "axes"], ["w2"]),
             node("Constant", [], ["c"], value=helper.make_tensor("v", F, [1, 4], [1] * 4)),
             node("Add", ["w2", "c"], ["bias"]),
             node("Add", ["x", "bias"], ["a"]), node("Mul", ["a", "k"], ["y"])]
    k = helper.make_tensor("k", F, [1, 4], [2] * 4)
    return model(nodes, [tensor("x", [1, 4])], [tensor("y", [1, 4])],
                 [shape, shape_constant("axes", [0]), k])


def test_weights_and_everything_computed_from_constants_are_not_activations():
    problem = from_onnx(weights_model())
    assert set(problem.ids) == {"x", "a", "y"}
    assert problem.horizon == 2  # the folded nodes take no step


def test_weights_can_be_planned_in_a_region_of_their_own():
    problem = from_onnx(weights_model(), weights="region")
    assert [r.name for r in problem.regions] == ["activations", "weights"]
    weights = {b.id: b for b in problem.buffers if b.kind == "weight"}
    assert set(weights) == {"bias", "k"}  # what runtime steps read; w, w2, c are folded
    assert all(b.regions == ("weights",) and b.lifetime == (0, 2) for b in weights.values())
    assert problem.buffer(problem.index("a")).regions == ("activations",)


def to_external_data(tensor: TensorProto, location: str) -> None:
    """Make an initializer say its values live in the file ``location``."""
    for data in ("float_data", "int64_data", "raw_data"):
        tensor.ClearField(data)
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)


def test_small_external_data_is_read_only_from_the_models_folder(tmp_path):
    m = weights_model()
    to_external_data(m.graph.initializer[2], "../../../no/such/secret.bin")
    path = tmp_path / "external.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ProblemError, match="'k': external data location .* is not a file in"):
        from_onnx(path)


# ------------------------------------------------------------ aliases
def test_views_are_mandatory_aliases_of_their_input():
    nodes = [node("Relu", ["x"], ["a"]), node("Reshape", ["a", "shape"], ["b"]),
             node("Flatten", ["b"], ["c"]), node("Unsqueeze", ["c", "axes"], ["d"]),
             node("Squeeze", ["d", "axes"], ["e"]), node("Identity", ["e"], ["f"]),
             node("Dropout", ["f"], ["g"]), node("Sigmoid", ["g"], ["y"])]
    m = model(nodes, [tensor("x", [2, 6])], [tensor("y", [3, 4])],
              [shape_constant("shape", [3, 4]), shape_constant("axes", [0])])
    problem = from_onnx(m, inplace=False)
    chain = ["a", "b", "c", "d", "e", "f", "g"]
    pairs = zip(chain[:-1], chain[1:], strict=True)
    assert aliases(problem) == {(src, dst, 0, False) for src, dst in pairs}


def test_inplace_is_offered_only_over_an_input_that_dies():
    nodes = [node("Relu", ["x"], ["a"]),  # x is a graph input: never overwritten
             node("Sigmoid", ["a"], ["b"]),  # a is read again below: no
             node("Add", ["b", "a"], ["c"]),  # b and a both die here: over b only
             node("Tanh", ["c"], ["y"])]  # c dies here: yes; y is an output, that is fine
    m = model(nodes, [tensor("x", [4])], [tensor("y", [4])])
    problem = from_onnx(m)
    assert aliases(problem) == {("b", "c", 0, True), ("c", "y", 0, True)}
    assert aliases(from_onnx(m, inplace=False)) == set()


def test_inplace_needs_equal_sizes_and_elementwise_operators():
    nodes = [node("Relu", ["x"], ["a"]), node("Add", ["bias", "a"], ["b"]),  # bias: smaller
             node("Softmax", ["b"], ["c"]), node("Relu", ["c"], ["y"])]
    m = model(nodes, [tensor("x", [2, 4]), tensor("bias", [4])], [tensor("y", [2, 4])])
    assert aliases(from_onnx(m)) == {("a", "b", 0, True), ("c", "y", 0, True)}


def test_inplace_needs_the_outputs_shape_and_element_type_not_just_its_size():
    # Pow(x float32[2,64], e int64[64]): y has e's 512 bytes, but element i of y lies over
    # half of e's element i // 2, which an element-by-element kernel still has to read
    nodes = [node("Cast", ["z"], ["e"], to=TensorProto.INT64), node("Pow", ["x", "e"], ["y"])]
    m = model(nodes, [tensor("x", [2, 64]), tensor("z", [64])], [tensor("y", [2, 64])],
              opset=18)
    problem = from_onnx(m)
    assert problem.sizes[problem.index("e")] == problem.sizes[problem.index("y")] == 512
    assert aliases(problem) == set()
    # Cast float32 -> int32 keeps the byte size, and no element type: no in place either
    nodes = [node("Relu", ["x"], ["a"]), node("Cast", ["a"], ["y"], to=TensorProto.INT32)]
    m = model(nodes, [tensor("x", [8])], [tensor("y", [8], TensorProto.INT32)])
    assert aliases(from_onnx(m)) == set()
    nodes = [node("Relu", ["x"], ["a"]), node("Cast", ["a"], ["y"], to=F)]  # same type: yes
    m = model(nodes, [tensor("x", [8])], [tensor("y", [8])])
    assert aliases(from_onnx(m)) == {("a", "y", 0, True)}


def test_a_graph_input_returned_as_an_output_stays_an_input_alive_to_the_end():
    m = model([node("Relu", ["x"], ["y"])], [tensor("x", [4])],
              [tensor("y", [4]), tensor("x", [4])])
    problem = from_onnx(m)
    x = problem.buffer(problem.index("x"))
    assert x.kind == "input" and x.lifetime == (0, problem.horizon)
    assert problem.buffer(problem.index("y")).kind == "output"


def test_a_view_of_a_weight_lives_in_the_weights_region():
    nodes = [node("Shape", ["x"], ["shp"]), node("Reshape", ["W", "shp"], ["Wr"]),
             node("Reshape", ["Wr", "shp"], ["Wr2"]), node("Add", ["x", "Wr2"], ["y"])]
    w = helper.make_tensor("W", F, [256], np.arange(256, dtype=np.float32))
    m = model(nodes, [tensor("x", [4, 64])], [tensor("y", [4, 64])], [w], opset=18)
    problem = from_onnx(m, weights="region")
    for name in ("W", "Wr", "Wr2"):
        assert problem.buffer(problem.index(name)).regions == ("weights",)
    assert problem.buffer(problem.index("y")).regions == ("activations",)
    plan = plan_regions(problem)
    assert validate(problem, plan) == []
    assert len({int(plan.offsets[problem.index(n)]) for n in ("W", "Wr", "Wr2")}) == 1
    assert {int(plan.regions[problem.index(n)]) for n in ("W", "Wr", "Wr2")} == {1}


def test_no_inplace_over_a_tensor_whose_view_is_still_read():
    nodes = [node("Relu", ["x"], ["a"]), node("Reshape", ["a", "shape"], ["v"]),
             node("Sigmoid", ["a"], ["b"]),  # a's last reader, but its view v lives on
             node("Reshape", ["b", "shape"], ["bv"]), node("Add", ["bv", "v"], ["y"])]
    m = model(nodes, [tensor("x", [2, 2])], [tensor("y", [4])], [shape_constant("shape", [4])])
    problem = from_onnx(m)
    assert ("a", "b", 0, True) not in aliases(problem)
    assert ("bv", "y", 0, True) in aliases(problem)  # bv's storage b dies with bv


def concat_model(batch, reuse=False):
    nodes = [node("Relu", ["x"], ["a"]), node("Sigmoid", ["x"], ["b"]),
             node("Concat", ["a", "b"], ["c"], axis=1), node("Relu", ["c"], ["y"])]
    outputs = [tensor("y", [batch, 6])]
    if reuse:  # a is read after the Concat
        nodes.append(node("Relu", ["a"], ["late"]))
        outputs.append(tensor("late", [batch, 3]))
    return model(nodes, [tensor("x", [batch, 3])], outputs)


def test_concat_inputs_written_into_their_slices_when_asked_and_contiguous():
    problem = from_onnx(concat_model(1), concat_inplace=True, inplace=False)
    assert aliases(problem) == {("c", "a", 0, False), ("c", "b", 12, False)}
    assert aliases(from_onnx(concat_model(1), inplace=False)) == set()
    assert aliases(from_onnx(concat_model(2), concat_inplace=True, inplace=False)) == set()


def test_concat_input_read_after_the_concat_keeps_its_own_bytes():
    problem = from_onnx(concat_model(1, reuse=True), concat_inplace=True, inplace=False)
    assert aliases(problem) == {("c", "b", 12, False)}


def test_alignment_applies_to_every_buffer():
    problem = from_onnx(concat_model(1), alignment=64)
    assert (problem.alignments == 64).all()


# ------------------------------------------------------------ control flow
def if_model(mystery=False):
    """y = relu(a + a if sum(x) > 0 else a * a), a = relu(x); a custom op in "then" if asked."""
    then_nodes = [node("Add", ["a", "a"], ["t"])]
    if mystery:  # an operator shape inference does not know: "m" has no shape
        then_nodes = [helper.make_node("Mystery", ["a"], ["m"], domain="example.custom"),
                      node("Add", ["m", "a"], ["t"])]
    then_graph = helper.make_graph(then_nodes, "then", [], [tensor("t", [4])])
    else_graph = helper.make_graph([node("Mul", ["a", "a"], ["e"])], "else", [],
                                   [tensor("e", [4])])
    nodes = [node("Relu", ["x"], ["a"]), node("ReduceSum", ["x"], ["s"], keepdims=0),
             node("Greater", ["s", "zero"], ["cond"]),
             node("If", ["cond"], ["r"], then_branch=then_graph, else_branch=else_graph),
             node("Relu", ["r"], ["y"])]
    zero = helper.make_tensor("zero", F, [], [0.0])
    m = model(nodes, [tensor("x", [4])], [tensor("y", [4])], [zero])
    m.opset_import.append(helper.make_opsetid("example.custom", 1))
    return m


def test_tensors_captured_by_a_subgraph_live_across_the_control_flow_node():
    problem = from_onnx(if_model())
    step_of_if = 3
    assert lifetime(problem, "a") == (0, step_of_if + 1)
    scratch = [b for b in problem.buffers if b.kind == "scratch"]
    assert [(b.size, b.lifetime) for b in scratch] == [(32, (3, 4))]  # t and e: 16 bytes each


def loop_model(annotated):
    """Three times v = relu(v + a) (a captured from outside); v's shape known when annotated."""
    body = helper.make_graph(
        [node("Identity", ["cond_in"], ["cond_out"]), node("Add", ["v", "a"], ["sum"]),
         node("Relu", ["sum"], ["v_out"]), node("Relu", ["v_out"], ["scan"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond_in", [], TensorProto.BOOL),
         tensor("v", [4])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("v_out", [4]), tensor("scan", [4])])
    nodes = [node("Relu", ["x"], ["a"]),
             node("Loop", ["trips", "", "x"], ["v_final", "scans"], body=body),
             node("Add", ["v_final", "a"], ["y"])]
    m = model(nodes, [tensor("x", [4])], [tensor("y", [4]), tensor("scans", [3, 4])],
              [helper.make_tensor("trips", TensorProto.INT64, [], [3])])
    if annotated:
        m.graph.value_info.append(tensor("v_final", [4]))
    return m


def test_a_loop_output_of_unknown_shape_is_refused_naming_the_loop():
    with pytest.raises(ProblemError, match=r"tensor 'v_final': no inferred shape \(written by "
                                           r"node 'v_final' \(Loop\)\)"):
        from_onnx(loop_model(annotated=False))


def test_a_loop_with_known_shapes_is_planned_conservatively():
    problem = from_onnx(loop_model(annotated=True))
    assert lifetime(problem, "a") == (0, 3)  # captured by the body at step 1, read at 2
    scratch = [b for b in problem.buffers if b.kind == "scratch"]
    # i, cond_in, v, cond_out, sum (inferred), v_out, scan
    assert [(b.size, b.lifetime) for b in scratch] == [(8 + 1 + 16 + 1 + 16 + 16 + 16, (1, 2))]


def test_a_subgraph_tensor_of_unknown_size_is_refused_not_crashed():
    with pytest.raises(ProblemError, match="node 'r' \\(If\\): subgraph tensor 'm': no "
                                           "inferred"):
        from_onnx(if_model(mystery=True))


# ------------------------------------------------------------ files
def test_corrupted_truncated_and_missing_files_are_refused_naming_the_file(tmp_path):
    data = (REPO / "memplan" / "data" / "squeezenet.onnx").read_bytes()
    cases = {"truncated.onnx": data[: len(data) // 2], "half-way.onnx": data[:-7],
             "garbage.onnx": bytes(range(256)) * 10, "text.onnx": b"id,lower,upper,size\n"}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ProblemError, match=name):
            from_onnx(path)
    with pytest.raises(ProblemError, match="missing.onnx"):
        from_onnx(tmp_path / "missing.onnx")


def test_load_reads_the_bundled_model_by_extension():
    bundled = REPO / "memplan" / "data" / "squeezenet.onnx"
    problem = load(bundled)
    assert problem.name == "squeezenet"
    assert len(problem) == len(from_onnx(light_models_dir() / "light_squeezenet.onnx"))


# ------------------------------------------------------------ the light models
@pytest.mark.parametrize("path", LIGHT, ids=lambda p: p.stem)
@pytest.mark.parametrize("concat_inplace", [False, True])
def test_light_models_load_and_plan(path, concat_inplace):
    problem = from_onnx(path, concat_inplace=concat_inplace)
    assert problem.kinds.count("input") == 1 and problem.kinds.count("output") == 1
    assert "weight" not in problem.kinds
    plan = plan_with("greedy_by_size", problem)
    assert validate(problem, plan) == []
    assert plan.arena_size >= lower_bound(problem) > 0
    assert plan.arena_size < problem.sizes.sum()


def test_light_model_weights_stay_out_of_the_arena():
    path = light_models_dir() / "light_resnet50.onnx"
    activations = from_onnx(path)
    with_weights = from_onnx(path, weights="region")
    weights = np.array([b.size for b in with_weights.buffers if b.kind == "weight"])
    assert len(weights) > 200 and weights.sum() > 90_000_000  # 25.6 M float parameters
    assert len(with_weights) == len(activations) + len(weights)
