"""Operator order: every reordered model is the same computation in a valid order, the fast
search never loses to the file's order, and the exact search equals an exhaustive one."""

from __future__ import annotations

import itertools
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.branchy import MODELS, breadth_first
from memplan import lower_bound, plan_with, validate
from memplan.budget import Budget
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_arena import ArenaRunner
from memplan.onnx.onnx_graph import analyze
from memplan.plan import Plan
from memplan.schedule.operator_order import reorder, reordered_model


def _random_model(seed: int, nodes: int) -> onnx.ModelProto:
    """A random DAG of MatMul (a new width) and Concat nodes over [1, w] float tensors."""
    rng = np.random.default_rng(seed)
    widths = {"x": int(rng.choice([4, 8, 16]))}
    made, weights, read = [], [], set()
    for k in range(nodes):
        names = list(widths)
        if len(names) > 1 and rng.random() < 0.35:
            a, b = rng.choice(names, 2, replace=False).tolist()
            out = f"t{k}"
            made.append(helper.make_node("Concat", [a, b], [out], axis=1, name=f"n{k}"))
            widths[out] = widths[a] + widths[b]
            read |= {a, b}
        else:
            a = str(rng.choice(names))
            w = int(rng.choice([4, 8, 16, 32]))
            weight = numpy_helper.from_array(
                rng.standard_normal((widths[a], w)).astype(np.float32), f"w{k}")
            weights.append(weight)
            out = f"t{k}"
            made.append(helper.make_node("MatMul", [a, f"w{k}"], [out], name=f"n{k}"))
            widths[out] = w
            read.add(a)
    outputs = [name for name in widths if name not in read and name != "x"]
    graph = helper.make_graph(
        made, f"random{seed}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, widths["x"]])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, widths[o]]) for o in outputs],
        initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim])
            .astype(np.float32) for v in model.graph.input}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_reordered_model_is_the_same_computation_in_a_topological_order(name):
    model = breadth_first(MODELS[name]())
    result = reorder(model, time_limit=1)
    onnx.checker.check_model(result.model, full_check=True)
    analyze(result.model)  # raises unless the nodes are in topological order
    assert sorted(n.SerializeToString() for n in result.model.graph.node) == \
        sorted(n.SerializeToString() for n in model.graph.node)
    feeds = _feeds(model)
    for before, after in zip(_run(model, feeds), _run(result.model, feeds), strict=True):
        assert np.array_equal(before, after)  # bit for bit
    assert result.bound <= result.original_bound
    plan = plan_with("best", result.problem)
    assert validate(result.problem, plan) == []
    report = ArenaRunner(result.model).check(result.problem, plan)
    assert report.ok, str(report)


def test_the_fast_order_is_never_worse_than_the_files():
    for seed in range(12):
        model = _random_model(seed, 9)
        result = reorder(model, time_limit=0.3, seed=seed)
        assert lower_bound(result.problem) <= lower_bound(from_onnx(model))


def test_a_breadth_first_inception_stack_saves_memory():
    result = reorder(breadth_first(MODELS["inception"]()), time_limit=2)
    assert result.bound < result.original_bound
    assert result.saving > 0.2


def _topological_orders(model: onnx.ModelProto):
    nodes = list(model.graph.node)
    writer = {out: i for i, node in enumerate(nodes) for out in node.output}
    preds = [{writer[x] for x in node.input if x in writer} for node in nodes]
    for order in itertools.permutations(range(len(nodes))):
        if all(preds[i] <= set(order[:k]) for k, i in enumerate(order)):
            yield list(order)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_exact_order_equals_an_exhaustive_search(seed):
    model = _random_model(seed, 5)
    best = None
    for order in _topological_orders(model):
        problem = from_onnx(reordered_model(model, order, []), inplace=False)
        plan = plan_with("exact", problem, time_limit=10)
        assert plan.status == "optimal"
        best = plan.arena_size if best is None else min(best, plan.arena_size)
    result = reorder(model, method="exact", time_limit=10, inplace=False)
    assert result.best_bound == best  # proven over every order and layout
    plan = Plan.from_offsets(result.problem, result.offsets, planner="reorder")
    assert validate(result.problem, plan) == []
    assert plan.arena_size == best
    assert plan_with("exact", result.problem, time_limit=10).arena_size == best


def test_solve_reorder_writes_the_reordered_model_with_its_plan(tmp_path, capsys):
    from memplan.cli import main
    from memplan.onnx.onnx_metadata import read_plan

    source, written = tmp_path / "inception.onnx", tmp_path / "planned.onnx"
    onnx.save(breadth_first(MODELS["inception"]()), source)
    assert main(["solve", str(source), "--reorder", "--reorder-time-limit", "1",
                 "--time-limit", "5", "-o", str(written), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["order"]["lower_bound"] < summary["order"]["file_lower_bound"]
    problem = from_onnx(str(written))
    assert lower_bound(problem) == summary["order"]["lower_bound"] == summary["lower_bound"]
    assert validate(problem, read_plan(str(written), problem)) == []
    assert onnx.load(str(written)).graph.initializer == onnx.load(str(source)).graph.initializer
    assert main(["solve", str(tmp_path / "x.csv"), "--reorder"]) == 2
    assert "for ONNX models only" in capsys.readouterr().err


def test_large_graphs_are_improved_window_by_window(monkeypatch):
    """Windows of a few steps, the rest held: a valid layout, never above the warm start."""
    import memplan.schedule.operator_order as operator_order
    from memplan.onnx.onnx_graph import infer

    monkeypatch.setattr(operator_order, "WINDOW", 8)
    model = breadth_first(MODELS["inception"]())
    problem = from_onnx(model, inplace=False)
    deps = operator_order.dependencies(problem, analyze(infer(model, strict=True, source=None)),
                                       optional_taken=False)
    start = plan_with("best", problem)  # the file's order and a layout of it
    order, offsets, stats = operator_order._improve_windows(
        deps, problem, np.arange(deps.n), start.offsets, deps.step_bound(),
        budget=Budget.of_limit(5), seed=0, threads=1)
    assert stats["windows"] > 0 and stats["peak"] <= start.arena_size
    reordered = from_onnx(reordered_model(model, order.tolist(), []), inplace=False)
    ids = {name: i for i, name in enumerate(problem.ids)}
    plan = Plan.from_offsets(reordered, offsets[[ids[n] for n in reordered.ids]],
                             planner="windows")
    assert validate(reordered, plan) == [] and plan.arena_size == stats["peak"]
