"""End to end: real models run inside one byte arena at the planned offsets.

A plan the validator accepts can still corrupt data when the problem lies
about the model (a lifetime too short, an alias that should not be). These
tests run SqueezeNet and ResNet-50 (the onnx package's light models, random
input) node by node inside the arena and compare with a normal run.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from memplan import Alias, Buffer, Plan, Problem, ProblemError, plan_with, planners, validate
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_arena import ArenaRunner, check_plan_on_model
from tests.conftest import light_models_dir
from tests.test_onnx_frontend import if_model, loop_model, to_external_data

MODELS = {"squeezenet": light_models_dir() / "light_squeezenet.onnx",
          "resnet50": light_models_dir() / "light_resnet50.onnx"}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    """(path, runner): the runner keeps one-node sessions and the normal run for every plan."""
    path = MODELS[request.param]
    return path, ArenaRunner(path, seed=1)


def disjoint_plan(problem: Problem) -> Plan:
    """Every mandatory alias group gets bytes of its own, one after another: trivially valid."""
    root, delta = problem.alias_groups
    offsets = np.zeros(len(problem), np.int64)
    cursor = 0
    for group in np.unique(root):
        members = np.flatnonzero(root == group)
        low = int(delta[members].min())
        offsets[members] = cursor - low + delta[members]
        cursor = int((offsets[members] + problem.sizes[members]).max())
    return Plan.from_offsets(problem, offsets, planner="disjoint")


def checked(problem: Problem, plan: Plan, runner: ArenaRunner):
    assert validate(problem, plan) == []
    return runner.check(problem, plan)


def shift_onto_a_live_buffer(problem: Problem, plan: Plan) -> tuple[Plan, str, str]:
    """Move one buffer onto another that is live when it is written and read after."""
    root, _ = problem.alias_groups
    for moved in range(len(problem)):
        start = problem.starts[moved]
        for victim in range(len(problem)):
            if (root[victim] != root[moved] and problem.starts[victim] < start
                    and problem.ends[victim] > start + 1 and problem.kinds[moved] != "scratch"
                    and not (problem.alias_dst == moved).any()):
                offsets = plan.offsets.copy()
                offsets[moved] = offsets[victim]
                return (Plan.from_offsets(problem, offsets, planner="shifted"),
                        problem.ids[moved], problem.ids[victim])
    raise AssertionError("no buffer to shift")


@pytest.mark.parametrize("concat_inplace", [False, True])
def test_greedy_plan_runs_inside_the_arena(model, concat_inplace):
    path, runner = model
    problem = from_onnx(path, concat_inplace=concat_inplace)
    plan = plan_with("greedy_by_size", problem)
    taken = (plan.offsets[problem.alias_dst] == plan.offsets[problem.alias_src]) & \
        problem.alias_optional
    assert taken.sum() > 0  # in-place outputs really overwrite their inputs
    report = checked(problem, plan, runner)
    assert report.ok, str(report)
    assert report.arena_bytes == [plan.arena_size]


def test_exact_plan_runs_inside_the_arena(model):
    if "exact" not in planners():
        pytest.skip("the exact planner is not registered yet")
    path, runner = model
    problem = from_onnx(path, concat_inplace=True)
    # no warm start: the offsets are CP-SAT's own, not a heuristic's it could not improve
    plan = plan_with("exact", problem, time_limit=5, warm_start=None)
    assert plan.status == "optimal"
    report = checked(problem, plan, runner)
    assert report.ok, str(report)


def test_a_disjoint_plan_runs_inside_the_arena(model):
    path, runner = model
    problem = from_onnx(path)
    assert checked(problem, disjoint_plan(problem), runner).ok


def test_a_buffer_shifted_onto_a_live_one_corrupts_it(model):
    path, runner = model
    problem = from_onnx(path)
    good = plan_with("greedy_by_size", problem)
    bad, moved, victim = shift_onto_a_live_buffer(problem, good)
    assert any(v.kind == "overlap" for v in validate(problem, bad))
    report = runner.check(problem, bad)
    assert not report.ok
    assert report.corruptions[0].tensor == victim
    assert moved in report.corruptions[0].overwritten_by
    assert "plan corrupts data" in str(report)


def test_a_lifetime_too_short_passes_the_validator_but_not_the_arena(model):
    """What the arena catches and the validator cannot: a problem that lies about the model."""
    path, runner = model
    truthful = from_onnx(path, inplace=False)
    buffers = list(truthful.buffers)
    longest = max(range(len(buffers)), key=lambda i: buffers[i].end - buffers[i].start
                  if buffers[i].kind == "activation" else -1)
    short = buffers[longest]
    buffers[longest] = Buffer(short.id, short.size, short.start, short.start + 1,
                              short.alignment, kind=short.kind)
    lying = truthful.replace(buffers=buffers)
    plan = plan_with("greedy_by_size", lying)
    report = checked(lying, plan, runner)
    assert not report.ok
    assert short.id in {c.tensor for c in report.corruptions}


def test_an_inplace_alias_over_a_live_input_is_caught(model):
    path, runner = model
    problem = from_onnx(path, inplace=False)
    # a node's output placed over an input that is read again later
    src, dst = next((name, node.output[0]) for node in runner.model.graph.node
                    for name in node.input[:1]
                    if name in problem.ids and node.output[0] in problem.ids
                    and problem.ends[problem.index(name)] > problem.starts[problem.index(
                        node.output[0])] + 1)
    lying = problem.replace(aliases=[*problem.aliases, Alias(src, dst, 0, optional=True)])
    offsets = disjoint_plan(lying).offsets.copy()
    offsets[lying.index(dst)] = offsets[lying.index(src)]  # take the optional alias
    plan = Plan.from_offsets(lying, offsets, planner="taken")
    report = checked(lying, plan, runner)  # the validator trusts the alias
    assert report.corruptions[0].tensor == src
    assert report.corruptions[0].overwritten_by == (dst,)


# ------------------------------------------------ small models: regions, backends
def small_model():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"],
                              value=helper.make_tensor("v", f, [1], [0.5])),
             helper.make_node("Mul", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Reshape", ["b", "flat"], ["c"]),
             helper.make_node("Sigmoid", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", f, ["batch", 4])],
        [helper.make_tensor_value_info("y", f, None)],
        initializer=[helper.make_tensor("shape", TensorProto.INT64, [1], [4]),
                     helper.make_tensor("flat", TensorProto.INT64, [1], [-1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("backend", ["onnxruntime", "reference"])
def test_both_backends_and_symbolic_dims(backend):
    problem = from_onnx(small_model(), dims={"batch": 3})
    plan = plan_with("greedy_by_size", problem)
    report = check_plan_on_model(small_model(), problem, plan, dims={"batch": 3},
                                 backend=backend)
    assert report.ok, str(report)
    assert report.outputs["y"].shape == (12,)


def test_weights_planned_in_their_own_region_run_from_there():
    problem = from_onnx(small_model(), dims={"batch": 2}, weights="region")
    weights = [i for i, kind in enumerate(problem.kinds) if kind == "weight"]
    assert {problem.ids[i] for i in weights} == {"w", "flat"}  # what the steps read
    regions = np.array([1 if kind == "weight" else 0 for kind in problem.kinds])
    plan = disjoint_plan(problem)
    plan = Plan.from_offsets(problem, plan.offsets, planner="regions", regions=regions)
    report = checked(problem, plan, ArenaRunner(small_model(), dims={"batch": 2}))
    assert report.ok and len(report.arena_bytes) == 2


@pytest.mark.parametrize("control_flow", [if_model(), loop_model(annotated=True)],
                         ids=["If", "Loop"])
def test_control_flow_nodes_run_inside_the_arena(control_flow):
    control_flow.ir_version = 8  # what onnxruntime reads
    problem = from_onnx(control_flow)
    plan = plan_with("greedy_by_size", problem)
    assert checked(problem, plan, ArenaRunner(control_flow)).ok


def test_weights_in_external_data_are_refused_not_opened():
    m = small_model()
    to_external_data(m.graph.initializer[1], "/etc/hostname")
    with pytest.raises(ProblemError, match="'flat' keeps its values in external data"):
        ArenaRunner(m, dims={"batch": 2})


def test_a_problem_of_another_model_is_refused():
    runner = ArenaRunner(small_model(), dims={"batch": 2})
    other = from_onnx(small_model(), dims={"batch": 4})
    with pytest.raises(ProblemError,
                       match=r"has 32 bytes \(float32 \[2, 4\]\), the problem planned 64"):
        runner.check(other, disjoint_plan(other))
    missing = Problem([Buffer("x", 32, 0, 1, kind="input")])
    with pytest.raises(ProblemError, match="'a' .* is not a buffer of the problem"):
        runner.check(missing, disjoint_plan(missing))
    stranger = Problem([Buffer("x", 32, 0, 1, kind="input"), Buffer("ghost", 8, 0, 1)])
    with pytest.raises(ProblemError, match="'ghost' is no tensor of this model"):
        runner.check(stranger, disjoint_plan(stranger))


# ------------------------------------------------ the probe's past defects, each its model
def graph_model(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8)


def value(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def proven(model, **options):
    problem = from_onnx(model, **options)
    plan = plan_with("greedy_by_size", problem)
    return checked(problem, plan, ArenaRunner(model, seed=3))


def test_a_graph_input_the_model_returns_is_fed_and_read_back():
    m = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [4])],
                    [value("y", [4]), value("x", [4])])
    report = proven(m)
    assert report.ok, str(report)
    assert report.outputs["x"].tobytes() == report.normal["x"].tobytes()


def test_rank_zero_tensors_stay_rank_zero_and_bool_scalars_are_fed():
    axes = helper.make_tensor("ax", TensorProto.INT64, [1], [0])
    m = graph_model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                     helper.make_node("Unsqueeze", ["s", "ax"], ["u"]),
                     helper.make_node("Concat", ["u", "x"], ["y"], axis=0)],
                    [value("x", [4])], [value("y", [5])], [axes])
    for concat_inplace in (False, True):
        assert proven(m, concat_inplace=concat_inplace).ok
    m = graph_model([helper.make_node("Not", ["c"], ["y"])], [value("c", [], TensorProto.BOOL)],
                    [value("y", [], TensorProto.BOOL)])
    report = proven(m)
    assert report.ok and report.outputs["y"].shape == () and report.outputs["y"].dtype == bool


def test_an_if_on_a_rank_zero_bool_graph_input_runs_inside_the_arena():
    then_graph = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "then", [],
                                   [value("t", [4])])
    else_graph = helper.make_graph([helper.make_node("Abs", ["a"], ["e"])], "else", [],
                                   [value("e", [4])])
    m = graph_model([helper.make_node("Relu", ["x"], ["a"]),
                     helper.make_node("If", ["c"], ["y"], then_branch=then_graph,
                                      else_branch=else_graph)],
                    [value("x", [4]), value("c", [], TensorProto.BOOL)], [value("y", [4])])
    problem = from_onnx(m)
    assert problem.sizes[problem.index("c")] == 1
    for seed in range(4):  # both branches
        plan = plan_with("greedy_by_size", problem)
        report = checked(problem, plan, ArenaRunner(m, seed=seed))
        assert report.ok, str(report)


def pow_model():
    """Pow(x float32[2,64], e int64[64]): y has e's 512 bytes, not its elements."""
    return graph_model([helper.make_node("Cast", ["z"], ["e"], to=TensorProto.INT64),
                        helper.make_node("Pow", ["x", "e"], ["y"])],
                       [value("x", [2, 64]), value("z", [64])], [value("y", [2, 64])])


def over(problem: Problem, moved: str, onto: str, delta: int = 0) -> Plan:
    """A disjoint plan, then ``moved`` placed ``delta`` bytes into ``onto`` (an alias)."""
    aliased = problem.replace(aliases=[*problem.aliases, Alias(onto, moved, delta)])
    return aliased, disjoint_plan(aliased)


def test_an_output_over_an_input_of_other_elements_is_caught_as_an_inplace_kernel_runs_it():
    problem, plan = over(from_onnx(pow_model()), "y", "e")
    assert validate(problem, plan) == []  # the alias makes it valid: only running it tells
    report = ArenaRunner(pow_model(), seed=0).check(problem, plan)
    assert not report.ok
    assert report.corruptions[0].tensor == "y" and "in place" in str(report.corruptions[0])
    assert "MISMATCH" in report.output_lines()[0]
    # the frontend never offers it, and what it offers runs clean
    assert proven(pow_model()).ok


def element_by_element_add(x: np.ndarray, b: np.ndarray, arena: np.ndarray, b_at: int,
                           y_at: int) -> np.ndarray:
    """The oracle: y[i] = x[i] + b[i % len(b)], b read from ``arena`` as y is written into it."""
    for i in range(x.size):
        at = b_at + 4 * (i % b.size)
        seen = arena[at: at + 4].view(np.float32)[0]
        total = np.array([x.reshape(-1)[i] + seen], np.float32)
        arena[y_at + 4 * i: y_at + 4 * i + 4] = total.view(np.uint8)
    return arena[y_at: y_at + 4 * x.size].view(np.float32).reshape(x.shape)


@pytest.mark.parametrize(("b_shape", "delta", "safe"), [
    ([16], 0, False), ([16], 40, False), ([16], -8, False),  # b broadcast: read 4 times
    ([16], 64, True),  # y just after b: no shared byte
    ([4, 16], 0, True), ([4, 16], -4, True),  # y's element i over b's i or i - 1: read first
    ([4, 16], 4, False), ([4, 16], 130, False)])  # over b's i + 1, i + 32.5: written first
def test_the_inplace_kernel_emulation_matches_an_element_by_element_loop(b_shape, delta, safe):
    m = graph_model([helper.make_node("Relu", ["z"], ["b"]),
                     helper.make_node("Add", ["x", "b"], ["y"])],
                    [value("x", [4, 16]), value("z", b_shape)], [value("y", [4, 16])])
    problem, plan = over(from_onnx(m, inplace=False), "y", "b", delta)
    runner = ArenaRunner(m, seed=5)
    report = runner.check(problem, plan)
    b, x = runner.values["b"], runner.values["x"]
    arena = np.zeros(plan.arena_size + 8, np.uint8)
    b_at = int(plan.offsets[problem.index("b")])
    arena[b_at: b_at + b.nbytes] = b.reshape(-1).view(np.uint8)
    oracle = element_by_element_add(x, b.reshape(-1), arena, b_at,
                                    int(plan.offsets[problem.index("y")]))
    assert report.outputs["y"].tobytes() == oracle.tobytes()
    assert report.ok == safe == (oracle.tobytes() == runner.values["y"].tobytes())


def test_random_operators_replay_the_normal_runs_values():
    m = graph_model([helper.make_node("RandomUniformLike", ["x"], ["r"], seed=1.0),
                     helper.make_node("Add", ["x", "r"], ["y"])],
                    [value("x", [4, 64])], [value("y", [4, 64])])
    report = proven(m)
    assert report.ok, str(report)
    assert report.close("y") is None and "random operator" in report.whole_model_lines()[0]
    unseeded = graph_model([helper.make_node("RandomNormalLike", ["x"], ["r"]),
                            helper.make_node("Mul", ["x", "r"], ["y"]),
                            helper.make_node("Relu", ["x"], ["z"])],
                           [value("x", [8])], [value("y", [8]), value("z", [8])])
    report = proven(unseeded)
    assert report.ok and report.random == {"y"} and report.close("z") is True


def test_backend_failures_are_one_line_errors_naming_the_node():
    m = graph_model([helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.5)],
                    [value("x", [4])], [value("y", [4]), value("mask", [4])], opset=9)
    problem = from_onnx(m)
    with pytest.raises(ProblemError, match=r"'mask' .*bool \[4\].* the problem planned 16"):
        ArenaRunner(m, backend="reference").check(problem, disjoint_plan(problem))
    unknown = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [4])],
                          [value("y", [4])])
    unknown.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(ProblemError, match=r"backend onnxruntime cannot run node .*NoSuchOp") \
            as error:
        ArenaRunner(unknown)
    assert "\n" not in str(error.value)
