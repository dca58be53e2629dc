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
from memplan.frontends.onnx import from_onnx
from memplan.onnx_arena import ArenaRunner, check_plan_on_model, main
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


def test_bundled_tool_plans_and_checks_a_model(capsys):
    assert main([str(MODELS["squeezenet"]), "--concat-inplace"]) == 0
    assert "ok: arena" in capsys.readouterr().out


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
    with pytest.raises(ProblemError, match=r"has 32 bytes \(float32 \[2, 4\]\), the problem planned 64"):
        runner.check(other, disjoint_plan(other))
    missing = Problem([Buffer("x", 32, 0, 1, kind="input")])
    with pytest.raises(ProblemError, match="'a' .* is not a buffer of the problem"):
        runner.check(missing, disjoint_plan(missing))
    stranger = Problem([Buffer("x", 32, 0, 1, kind="input"), Buffer("ghost", 8, 0, 1)])
    with pytest.raises(ProblemError, match="'ghost' is no tensor of this model"):
        runner.check(stranger, disjoint_plan(stranger))
