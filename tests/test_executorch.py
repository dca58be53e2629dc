"""memplan inside ExecuTorch: the pass and the suite algorithm on small PyTorch models.

Each model is exported once (module fixtures) and lowered with ExecuTorch's greedy
and with memplan; every memplan plan passes memplan's validator and ExecuTorch's
Verifier, and both programs run in ExecuTorch's runtime with outputs bit-identical
to each other and close to eager PyTorch. A plan with every tensor at offset 0 is
caught. Needs the ``executorch`` extra.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.dialects._ops import ops
from executorch.exir.memory_planning import (
    MemoryAlgoResult,
    MemoryPlanningAlgorithmSuite,
    SpecAllocResult,
    greedy,
)
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.tensor import TensorSpec

import memplan
import memplan.executorch
from benchmarks import executorch_zoo as zoo
from benchmarks.executorch_models import (
    arena_bytes,
    eager,
    export,
    lower,
    run,
    runtime_verdict,
)
from memplan import InvalidPlanError, ProblemError
from memplan.executorch import spec_planner
from memplan.executorch.executorch import planned_offsets
from memplan.executorch.spec_planner import verify_result


def planned(model: zoo.Model, edge=None, **config):
    """Greedy's and memplan's programs of ``model``, memplan's pass, and the runtime's
    verdict on both (bit-identical to each other, close to eager)."""
    edge = edge if edge is not None else export(model)
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=5)
    greedy_program = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(**config))
    memplan_program = copy.deepcopy(edge).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=planning_pass, **config))
    verdict = runtime_verdict(run(greedy_program, model.calls),
                              run(memplan_program, model.calls), eager(model))
    return greedy_program, memplan_program, planning_pass, verdict


def assert_valid(planning_pass) -> None:
    """memplan's validator on every plan of the pass (ExecuTorch's Verifier ran in it)."""
    assert planning_pass.reports
    for report in planning_pass.reports:
        for mem_id, plan in report.plans.items():
            assert memplan.validate(report.problems[mem_id], plan) == []


@pytest.fixture(scope="module")
def decoder():
    model = zoo.decoder()
    return model, export(model)


def test_the_pass_beats_greedy_and_runs(decoder):
    model, edge = decoder
    greedy_program, memplan_program, planning_pass, verdict = planned(model, edge)
    assert verdict == "identical"
    assert_valid(planning_pass)
    report = planning_pass.reports[-1]
    plan = report.plans[1]
    assert arena_bytes(memplan_program) == report.bufsizes[1] == plan.arena_size
    assert arena_bytes(memplan_program) < arena_bytes(greedy_program)
    assert plan.status == "optimal" and report.gap == 0.0
    assert report.verify_seconds > 0  # the storage check ran after the graph


@pytest.mark.parametrize("limit", [0, 0.001, 0.01])
def test_no_limit_leaves_a_plan_larger_than_greedy_by_size(decoder, limit):
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=limit)
    lower(decoder[1], planning_pass)
    assert_valid(planning_pass)
    for report in planning_pass.reports:
        for mem_id, plan in report.plans.items():
            ceiling = memplan.plan_with("greedy_by_size", report.problems[mem_id])
            assert plan.arena_size <= ceiling.arena_size


def test_one_algorithm_of_a_suite_beside_greedy(decoder):
    """The suite keeps the smaller plan; both results have as many arenas."""
    model, edge = decoder
    algorithm = memplan.executorch.algorithm(time_limit=5)
    suite = MemoryPlanningAlgorithmSuite(algo_list=[greedy, algorithm])
    program = lower(edge, MemoryPlanningPass(suite))
    report = algorithm.reports[-1]
    assert report.verify_seconds > 0  # the algorithm checked its own plan
    assert arena_bytes(program) == sum(report.bufsizes) == report.plans[1].arena_size
    assert run(program, model.calls)[0][0].shape == eager(model)[0][0].shape


def test_a_plan_at_offset_zero_is_caught(decoder):
    """Such a plan passes ExecuTorch's export (the Verifier runs for 'greedy' only);
    memplan's checks refuse it: the Verifier on the graph and memplan's validator on
    the problem read back from the program."""
    _, edge = decoder

    def zero(alignment, specs, graph_module, graph_signature, extra_padding):
        result = MemoryAlgoResult({s: SpecAllocResult(1, 0, 0) for s in specs}, [0, 0])
        result.bufsizes = [0, max(s.realign(alignment) for s in specs)]
        return result

    copied = copy.deepcopy(edge)
    program = copied.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(MemoryPlanningAlgorithmSuite([zero]))))
    exported = program.exported_program()
    for storage in ("memplan", "executorch"):  # memplan's sweep, ExecuTorch's Verifier
        with pytest.raises(InvalidPlanError, match="while both live|Unexpected storage overlap"):
            memplan.executorch.verify_graph(exported.graph_module, exported.graph_signature,
                                            storage=storage)
    problem = memplan.from_executorch(program)
    offsets = planned_offsets(program)  # the program's own plan, read back
    assert set(offsets.values()) == {0}
    violations = memplan.validate(problem, offsets)
    assert violations and all(v.kind == "overlap" for v in violations)


def test_the_verifier_check_of_a_result_fails_on_overlap(decoder):
    _, edge = decoder
    captured = {}

    def capture(alignment, specs, graph_module, graph_signature, extra_padding):
        captured.update(specs=list(specs), gm=graph_module, sig=graph_signature)
        return greedy(alignment, specs, graph_module, graph_signature, extra_padding)

    lower(edge, MemoryPlanningPass(MemoryPlanningAlgorithmSuite([capture])))
    specs = captured["specs"]
    result = MemoryAlgoResult({s: SpecAllocResult(1, 0, 0) for s in specs}, [0, 1])
    with pytest.raises(InvalidPlanError, match="while both live"):
        verify_result(result, captured["gm"], captured["sig"])
    with pytest.raises(InvalidPlanError, match="Verifier"):
        verify_result(result, captured["gm"], captured["sig"], check="executorch")
    assert all(s.mem_offset is not None for s in specs)  # the specs' own values are back


def test_kv_cache_state_lives_the_whole_graph():
    model = zoo.llama(64, 1, 8, kv_cache=True, vocab=64)
    edge = export(model)
    _, _, planning_pass, verdict = planned(model, edge)
    assert verdict == "identical"  # three calls: the cache carries over
    assert_valid(planning_pass)
    problem = planning_pass.reports[-1].problems[1]
    caches = [i for i, id in enumerate(problem.ids) if "cache" in id]
    assert len(caches) == 2  # k and v of one layer
    assert all(problem.starts[i] == 0 and problem.ends[i] == problem.horizon for i in caches)
    # shared across methods: ExecuTorch places the caches in an arena of their own
    programs = [lower(edge, {"forward": p}) for p in (
        MemoryPlanningPass(share_mutable_buffers=True),
        memplan.executorch.memory_planning_pass(time_limit=5, share_mutable_buffers=True))]
    greedy_sizes, memplan_sizes = (p.executorch_program.execution_plan[0].non_const_buffer_sizes
                                   for p in programs)
    assert len(memplan_sizes) == 3 and memplan_sizes[2] == greedy_sizes[2]
    assert memplan_sizes[1] <= greedy_sizes[1]
    assert runtime_verdict(*(run(p, model.calls) for p in programs), eager(model)) == "identical"


def test_inputs_and_outputs_left_to_the_caller(decoder):
    model, edge = decoder
    planning_pass = memplan.executorch.memory_planning_pass(
        time_limit=5, alloc_graph_input=False, alloc_graph_output=False)
    lower(edge, planning_pass)  # the Verifier checks that inputs and outputs have no offset
    assert_valid(planning_pass)
    problem = planning_pass.reports[-1].problems[1]
    assert set(problem.kinds) == {"activation"}


def test_control_flow_subgraphs_sit_below_their_parent():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(16, 16)

        def forward(self, x):
            y = self.linear(x)
            z = torch.cond(y.sum() > 0, lambda y: (y.relu() * 2 + 1).sin(),
                           lambda y: (y.sigmoid() - 3).cos(), (y,))
            return self.linear(z) + y

    torch.manual_seed(0)
    model = zoo.Model("branchy", Branchy().eval(), [(torch.randn(4, 16),)])
    _, memplan_program, planning_pass, verdict = planned(model)
    assert verdict == "identical"
    assert_valid(planning_pass)
    *branches, parent = planning_pass.reports
    assert len(branches) == 2
    reserved = max(b.bufsizes[1] for b in branches)
    assert parent.bufsizes[1] == reserved + parent.plans[1].arena_size
    flipped = zoo.Model("branchy", model.module, [(-5 * model.inputs[0],)])
    assert runtime_verdict(run(memplan_program, flipped.calls), run(memplan_program,
                           flipped.calls), eager(flipped)) == "identical"  # other branch


def test_each_graphs_inputs_and_outputs_are_checked_once(monkeypatch):
    """ExecuTorch's pass checks the graph's own inputs and outputs; memplan's checks each
    control-flow subgraph's, not the graph's again."""
    from executorch.exir.memory_planning import Verifier

    checked: list = []
    io = Verifier.verify_graph_input_output
    monkeypatch.setattr(Verifier, "verify_graph_input_output",
                        lambda self: checked.append(id(self.graph_module)) or io(self))

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x.relu() * 2, lambda x: x.sin() - 3,
                              (x,)) + x

    model = zoo.Model("branchy", Branchy().eval(), [(torch.randn(4, 16),)])
    edge = export(model)
    checked.clear()
    lower(edge, memplan.executorch.memory_planning_pass(time_limit=5))
    assert len(checked) == 3  # the graph and its two branches
    assert len(set(checked)) == 3


def test_storage_backed_specs_sit_in_their_base():
    """ExecuTorch's reinplace pass stores a clone in its input (``storage_base``)."""
    model = zoo.llama(64, 1, 8, vocab=64)
    extra = frozenset({ops.edge.dim_order_ops._clone_dim_order.default})
    _, memplan_program, planning_pass, verdict = planned(
        model, run_reinplace_pass=True, reinplace_extra_ops=extra)
    assert verdict == "identical"
    graph = memplan_program.exported_program().graph_module
    clones = [n for n in graph.graph.nodes if "clone_dim_order" in str(n.target)]
    assert clones
    for node in clones:
        spec = node.meta["spec"]
        assert spec.storage_base is not None
        assert spec.mem_offset == spec.storage_base.mem_offset + spec.storage_base_offset
        assert spec.mem_obj_id == spec.storage_base.mem_obj_id


def test_bounded_dynamic_shapes_are_planned_at_their_bound():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    exported = torch.export.export(module, (x,),
                                   dynamic_shapes=({0: torch.export.Dim("rows", max=8)},))
    edge = to_edge(exported)
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=5)
    program = lower(edge, planning_pass)
    assert_valid(planning_pass)
    sizes = set(planning_pass.reports[-1].problems[1].sizes.tolist())
    assert sizes == {8 * 16 * 4, 16 * 16 * 4}  # activations at 8 rows (the bound), a weight
    for rows in (8, 2):
        model = zoo.Model("dynamic", module, [(torch.randn(rows, 16),)])
        assert runtime_verdict(run(lower(edge), model.calls), run(program, model.calls),
                               eager(model)) == "identical"


def test_xnnpack_delegates_pad_the_arena():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                 torch.nn.Linear(64, 8), torch.nn.Softmax(-1)).eval()
    model = zoo.Model("mlp", module, [(torch.randn(2, 32),)])
    edge = export(model, xnnpack=True)
    _, memplan_program, planning_pass, verdict = planned(model, edge)
    assert verdict == "identical"
    report = planning_pass.reports[-1]
    assert report.bufsizes == [0, report.plans[1].arena_size + 64]
    assert arena_bytes(memplan_program) == sum(report.bufsizes)


def test_a_plan_the_verifier_rejects_is_refused_or_handed_to_greedy(decoder, monkeypatch):
    """Memory objects numbered wrongly (one per spec): the Verifier rejects the plan; the
    pass raises, or with ``fallback="greedy"`` lowers greedy's plan with a warning."""
    model, edge = decoder
    monkeypatch.setattr(spec_planner, "memory_objects",
                        lambda placed: {spec: k for k, spec in enumerate(placed)})
    with pytest.raises(InvalidPlanError, match="not a memory object"):
        lower(edge, memplan.executorch.memory_planning_pass(time_limit=5))
    with pytest.raises(InvalidPlanError, match="mem_obj_id mismatch"):
        lower(edge, memplan.executorch.memory_planning_pass(time_limit=5, verify="executorch"))
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=5, fallback="greedy")
    with pytest.warns(UserWarning, match="greedy plans it"):
        program = lower(edge, planning_pass)
    assert "not a memory object" in planning_pass.reports[-1].fallback
    assert arena_bytes(program) == arena_bytes(lower(edge))  # greedy's plan, verified
    assert runtime_verdict(run(program, model.calls), run(program, model.calls),
                           eager(model)) == "identical"


def _huge_spec():
    spec = TensorSpec(torch.float32, torch.Size([1 << 52]))
    spec.lifetime = [0, 1]
    return spec


def test_what_memplan_cannot_plan_is_refused_or_handed_to_greedy():
    graph_module = torch.fx.GraphModule({}, torch.fx.Graph())
    with pytest.raises(ProblemError, match="spec#0"):
        memplan.executorch.algorithm(time_limit=1)(16, [_huge_spec()], graph_module)
    algorithm = memplan.executorch.algorithm(time_limit=1, fallback="greedy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = algorithm(16, [_huge_spec()], graph_module)
    assert any("greedy plans it" in str(w.message) for w in caught)
    assert result.bufsizes == [0, 1 << 54] and algorithm.reports[-1].fallback


def _spec(elements: int, first: int, last: int, base=None, offset: int = 0):
    spec = TensorSpec(torch.float32, torch.Size([elements]))
    spec.lifetime = [first, last]
    spec.storage_base, spec.storage_base_offset = base, offset
    return spec


def test_specs_planned_above_a_subgraph_arena_with_padding():
    """Inclusive lifetimes, a storage-backed spec, a zero-byte one, a subgraph's 100
    reserved bytes (rounded up to the alignment) and the XNNPACK padding, without a
    graph: every offset as ExecuTorch's contract says."""
    a, b = _spec(16, 0, 2), _spec(16, 2, 3)  # meet at node 2: inclusive, so they conflict
    inner, empty = _spec(4, 1, 2, base=a, offset=32), _spec(0, 0, 3)
    graph_module = torch.fx.GraphModule({}, torch.fx.Graph())
    graph_module.input_mem_buffer_sizes = [0, 100]
    algorithm = memplan.executorch.algorithm(time_limit=1, verify=False)
    result = algorithm(16, [a, b, inner, empty], graph_module, None, 64)
    placed = {s: (r.mem_id, r.mem_offset, r.mem_obj_id) for s, r in result.spec_dict.items()}
    (_, at_a, obj_a), (_, at_b, obj_b) = placed[a], placed[b]
    assert {at_a, at_b} == {112, 176} and obj_a != obj_b  # 100 -> 112, then 64 bytes each
    assert placed[inner] == (1, at_a + 32, obj_a)
    assert placed[empty][:2] == (1, 112)
    assert result.bufsizes == [0, 112 + 128 + 64]
    problem = algorithm.reports[-1].problems[1]
    assert problem.starts.tolist() == [0, 2] and problem.ends.tolist() == [3, 4]


def test_bad_options_are_refused():
    with pytest.raises(ProblemError, match="time_limit"):
        memplan.executorch.algorithm(time_limit=-1)
    with pytest.raises(ProblemError, match="fallback"):
        memplan.executorch.memory_planning_pass(fallback="naive")


def test_from_executorch_at_every_stage(decoder):
    model, edge = decoder
    exported = torch.export.export(model.module, model.inputs)
    mine = copy.deepcopy(edge)
    problems = [memplan.from_executorch(exported), memplan.from_executorch(mine)]
    program = mine.to_executorch()  # fails on a rewritten edge program: it was left as is
    problems.append(memplan.from_executorch(program))
    first = problems[0]
    for problem in problems[1:]:
        assert problem.ids == first.ids
        assert (problem.sizes == first.sizes).all() and (problem.ends == first.ends).all()
    assert len(first.steps) == len(program.exported_program().graph_module.graph.nodes)
    ops_seen = {step.op for step in first.steps}
    assert {"placeholder", "output", "alloc", "aten.bmm.out"} <= ops_seen
    assert any(step.writes for step in first.steps if step.op == "aten.bmm.out")
    assert "peak" in str(memplan.explain(first, memplan.solve(first, time_limit=2)))


def test_from_executorch_refuses_what_it_cannot_read(decoder, tmp_path):
    _, edge = decoder
    with pytest.raises(ProblemError, match="not a .pte file"):
        memplan.from_executorch(tmp_path / "model.onnx")
    with pytest.raises(ProblemError, match="takes an ExportedProgram"):
        memplan.from_executorch(42)
    with pytest.raises(ProblemError, match="no method 'decode'"):
        memplan.from_executorch(to_edge({"a": torch.export.export(
            torch.nn.ReLU(), (torch.randn(2),)), "b": torch.export.export(
            torch.nn.ReLU(), (torch.randn(2),))}), method="decode")
