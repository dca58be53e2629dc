"""memplan behind ExecuTorch's target memory map: regions, capacities, pins, objectives, proofs.

Synthetic specs (no graph) check the contract quickly: every buffer in one declared
region, no region above its size, pins kept (an undeclared arena laid out unbudgeted), the
objectives' choices, and a proof of why nothing fits. One small model is lowered with
regions: its plans pass memplan's validator and ExecuTorch's Verifier, a custom pool
pass's pins stay, and it runs bit-identical to greedy's program in ExecuTorch's runtime.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

from executorch.exir.banked_memory_planning import (  # noqa: E402
    Bank,
    BankedGreedy,
    BankPlacementError,
    TargetMemoryMap,
)
from executorch.exir.tensor import TensorSpec  # noqa: E402

import memplan  # noqa: E402
import memplan.executorch  # noqa: E402
from benchmarks import executorch_zoo as zoo  # noqa: E402
from benchmarks.executorch_models import (  # noqa: E402
    arena_bytes,
    eager,
    export,
    lower,
    run,
    runtime_verdict,
)
from memplan import ProblemError  # noqa: E402
from memplan.executorch.planning_pass import MemplanPlanningPass  # noqa: E402
from memplan.executorch.target_regions import (  # noqa: E402
    RegionOverflowError,
    explain_report,
    format_region_report,
    search_cpu,
)
from memplan.shares import SEARCH_CPU_PER_NODE  # noqa: E402

GRAPH = torch.fx.GraphModule({}, torch.fx.Graph())


def _spec(nbytes: int, first: int, last: int, mem_id: int | None = None):
    spec = TensorSpec(torch.float32, torch.Size([nbytes // 4]))
    spec.lifetime = [first, last]
    spec.mem_id = mem_id
    return spec


def _planned(target, specs, objective=None, padding=0):
    """The specs planned with the time limit alone as CPU allowance (``cpu=None``): the
    synthetic graph has no node, so the default allowance (`search_cpu`) would be none."""
    algorithm = memplan.executorch.algorithm(time_limit=2, verify=False, regions=target,
                                             objective=objective, cpu=None)
    result = algorithm(16, specs, GRAPH, None, padding)
    return algorithm.reports[-1], result


def _slow(result, specs) -> set[int]:
    return {k for k, s in enumerate(specs) if result.spec_dict[s].mem_id == 2}


def _assert_fits(target, report, result) -> None:
    """Every spec in a region, at an offset, no region above its size, every plan valid."""
    for spec, alloc in result.spec_dict.items():
        assert alloc.mem_id is not None and alloc.mem_offset is not None
        assert alloc.mem_offset + spec.allocated_memory <= result.bufsizes[alloc.mem_id]
    for region in target.banks:
        assert result.bufsizes[region.mem_id] <= region.size
    assert memplan.validate(report.region_problem, report.plan) == []
    for mem_id, plan in report.plans.items():
        assert memplan.validate(report.problems[mem_id], plan) == []


#  fast holds 128: "long" (80 B, nodes 0-2) or each of a, b, c (64 B, one node each)
#  slow bytes: long 80, a+b+c 192; slow arena: long 80, a b c (one after the other) 64
def _trade():
    return [_spec(80, 0, 2)] + [_spec(64, t, t) for t in range(3)]


TWO = TargetMemoryMap([Bank("fast", 128, 1), Bank("slow", 1 << 20, 2)])


#  fast holds 80; BankedGreedy, largest first: 0-3 slow (368 B, slow arena 208)
#  traffic: 0, 3, 5 slow (304 B, arena 208); slow_arena: 0-3 slow again (368 B, arena 192)
def _choice():
    return [_spec(*row) for row in ((128, 2, 2), (64, 1, 2), (80, 3, 5), (96, 3, 3),
                                    (16, 1, 1), (80, 2, 4))]


def test_each_objective_chooses_what_goes_slow():
    target = TargetMemoryMap([Bank("fast", 80, 1), Bank("slow", 1 << 20, 2)])
    specs = _choice()
    report, result = _planned(target, specs)  # default: traffic
    _assert_fits(target, report, result)
    assert _slow(result, specs) == {0, 3, 5} and report.slow_bytes == 304
    assert report.slow_arena == 208 and report.objective_gap == 0
    specs = _choice()
    report, result = _planned(target, specs, "slow_arena")
    _assert_fits(target, report, result)
    assert _slow(result, specs) == {0, 1, 2, 3} and report.slow_arena == 192
    assert report.slow_bytes == 368 and report.objective_gap == 0
    assert result.bufsizes == [0, 80, 192]
    text = format_region_report(report)
    assert "Memory region placement" in text and "slow arena 192 (proven optimal" in text
    assert report.gaps["slow_arena"] == 0 and "objective slow_arena: proven optimal" in text
    assert report.gaps["slow_bytes"] >= 0 and report.gaps["traffic"] >= 0
    greedy = BankedGreedy(target)(16, _choice(), GRAPH, None, 0)
    assert greedy.bufsizes[2] == 208


def test_banked_greedys_slow_bytes_and_arena_are_a_ceiling():
    """BankedGreedy puts long fast and a, b, c slow (192 B, slow arena 64); the least
    traffic alone would send long (80 B, arena 80): above BankedGreedy's arena."""
    greedy = BankedGreedy(TWO)(16, _trade(), GRAPH, None, 0)
    assert greedy.bufsizes[2] == 64
    for objective in ("traffic", "slow_arena"):
        specs = _trade()
        report, result = _planned(TWO, specs, objective)
        _assert_fits(TWO, report, result)
        assert _slow(result, specs) == {1, 2, 3}
        assert report.slow_arena == 64 and report.slow_bytes == 192 == report.traffic
    stats = report.plan.stats  # slow_arena: proven optimal, as without the ceiling
    assert report.objective_gap == 0 and stats["arena_bound"] == 64
    report, _ = _planned(TWO, _trade())
    stats = report.plan.stats  # traffic: 80 B is the least without the ceiling; no optimal
    assert stats["cost_bound"] == 80 and not stats["cost_optimal"]
    # within the ceiling (slow arena at most 64) a, b, c slow is the least: proven there
    assert stats["ceiling"]["cost_bound"] == 192 and report.objective_gap == 0
    assert "traffic: proven optimal among the plans within BankedGreedy's" in \
        format_region_report(report)


def _random_specs(seed: int) -> list:
    rng = np.random.default_rng(seed)
    specs = []
    for _ in range(24):
        first = int(rng.integers(0, 20))
        specs.append(_spec(16 * int(rng.integers(1, 40)), first, first + int(rng.integers(0, 6))))
    return specs


@pytest.mark.parametrize("seed,share", [(0, 0.25), (1, 0.5), (2, 0.75)])
def test_banked_greedys_placement_is_the_start_so_memplan_is_never_worse(monkeypatch, seed,
                                                                         share):
    """memplan starts from BankedGreedy's placement (taken as a valid region plan) and keeps
    within it: each objective, the slow bytes and the slow arena at most greedy's."""
    from memplan.executorch import target_regions

    starts = []

    def recording(*args, **kwargs):
        starts.append(kwargs["guard"])
        return plan_target(*args, **kwargs)

    plan_target = target_regions.plan_target
    monkeypatch.setattr(target_regions, "plan_target", recording)
    peak = max(sum(s.allocated_memory for s in _random_specs(seed)
                   if s.lifetime[0] <= t <= s.lifetime[1]) for t in range(26))
    target = TargetMemoryMap([Bank("fast", int(peak * share) // 16 * 16, 1),
                              Bank("slow", 1 << 20, 2)])
    greedy_specs = _random_specs(seed)
    greedy = BankedGreedy(target)(16, greedy_specs, GRAPH, None, 0)
    slow_bytes = sum(s.allocated_memory for s in greedy_specs
                     if greedy.spec_dict[s].mem_id == 2)
    for objective in ("traffic", "slow_arena"):
        report, result = _planned(target, _random_specs(seed), objective)
        _assert_fits(target, report, result)
        assert starts.pop().planner == "BankedGreedy"
        assert report.slow_bytes <= slow_bytes and report.slow_arena <= greedy.bufsizes[2]
        assert report.traffic <= slow_bytes  # no reads: traffic is the slow bytes


def test_explain_names_the_fast_peak_and_what_a_larger_region_saves():
    specs = _trade()
    report, _ = _planned(TWO, specs)  # long fast (80 B), a, b, c slow (BankedGreedy's arena)
    found = explain_report(report, sizes=[144, 256])
    assert found.fast == "fast" and found.capacity == 128 and found.peak == 80
    assert found.tensors == [(found.tensors[0][0], 80, 1)]
    here, grown, ample = found.curve
    assert (here.fast, here.slow_bytes, here.slow_arena) == (128, 192, 64)
    assert (grown.fast, grown.slow_bytes) == (144, 0)  # 144 B holds long beside any of them
    assert grown.slow_bytes_per_kib == 192 / (16 / 1024)
    assert ample.slow_arena == 0 and "saved/KiB" in str(found)
    assert found.to_dict()["curve"][0]["fast"] == 128
    # long fast is the least traffic only beside BankedGreedy's ceiling, and proven so there
    assert found.gap == 0 and found.within_ceiling
    assert str(found).startswith("fast region contents: proven optimal for bytes x reads in "
                                 "slow memory among the plans within the ceiling")


def test_pins_stay_and_an_undeclared_arena_is_laid_out_unbudgeted():
    """A pass pinned one buffer to the slow region and one to mem_id 3, undeclared."""
    specs = _trade()
    specs[1].mem_id = 2  # a: slow, though fast has room at node 0 once long is out
    pinned_out = _spec(4096, 0, 2, mem_id=3)  # larger than every region: not budgeted
    report, result = _planned(TWO, [*specs, pinned_out])
    _assert_fits(TWO, report, result)
    assert result.spec_dict[specs[1]].mem_id == 2
    assert result.spec_dict[pinned_out].mem_id == 3 and result.bufsizes[3] == 4096
    assert report.plans[3].arena_size == 4096


def test_capacity_is_never_exceeded_with_subgraph_bytes_and_padding():
    graph = torch.fx.GraphModule({}, torch.fx.Graph())
    graph.input_mem_buffer_sizes = [0, 40]  # a subgraph reserved 40 B (48 aligned) of fast
    target = TargetMemoryMap([Bank("fast", 192, 1), Bank("slow", 1024, 2, alignment=64)])
    specs = _trade()
    algorithm = memplan.executorch.algorithm(time_limit=2, verify=False, regions=target)
    result = algorithm(16, specs, graph, None, 16)
    report = algorithm.reports[-1]
    _assert_fits(target, report, result)
    fast = [s for s in specs if result.spec_dict[s].mem_id == 1]
    assert all(result.spec_dict[s].mem_offset >= 48 for s in fast)
    assert result.bufsizes[1] == 48 + report.plans[1].arena_size + 16 <= 192
    assert all(result.spec_dict[s].mem_offset % 64 == 0 for s in specs if s not in fast)


def test_what_cannot_fit_is_explained():
    """Too many bytes live at one node: proven by the live load; a packing that no region
    choice fits (three 64-byte tensors, two 112-byte regions): proven by CP-SAT."""
    target = TargetMemoryMap([Bank("fast", 128, 1), Bank("slow", 128, 2)])
    with pytest.raises(RegionOverflowError, match="at step 1") as caught:
        _planned(target, [_spec(96, 0, 2), _spec(96, 1, 1), _spec(96, 1, 3)])
    error = caught.value
    assert isinstance(error, BankPlacementError) and error.proven
    assert error.step == 1 and error.needed == 288 and error.capacity == 256
    assert len(error.tensors) == 3
    with pytest.raises(RegionOverflowError, match="pinned to region fast"):
        _planned(target, [_spec(96, 0, 2, mem_id=1), _spec(96, 1, 1, mem_id=1)])
    packed = TargetMemoryMap([Bank("fast", 112, 1), Bank("slow", 112, 2)])
    with pytest.raises(RegionOverflowError, match="CP-SAT proved") as caught:
        _planned(packed, [_spec(64, 0, 1) for _ in range(3)])
    assert caught.value.proven and caught.value.needed == 192


@pytest.mark.parametrize("size", [2**53 + 1, 2**62, 2**63 - 1, 2**63])
def test_a_region_beyond_every_plan_is_planned_as_unbounded(size):
    """A slow region of 2^63 - 1 bytes (an "unbounded" budget) plans as BankedGreedy plans it,
    while a real capacity still binds (the fast region's 128 B)."""
    target = TargetMemoryMap([Bank("fast", 128, 1), Bank("slow", size, 2)])
    specs = _trade()
    report, result = _planned(target, specs, "slow_arena")
    _assert_fits(target, report, result)
    assert _slow(result, specs) == {1, 2, 3} and report.slow_arena == 64
    reach = sum(s.allocated_memory for s in specs) + 64
    assert report.region_problem.regions[1].capacity <= reach
    assert report.region_problem.regions[0].capacity == 128


def test_bad_regions_and_objectives_are_refused():
    with pytest.raises(ProblemError, match="objective"):
        memplan.executorch.algorithm(regions=TWO, objective="fastest")
    with pytest.raises(ProblemError, match="objective"):
        memplan.executorch.algorithm(objective="traffic")
    with pytest.raises(ProblemError, match="relative gap"):
        memplan.executorch.algorithm(relative_gap=0.01)
    with pytest.raises(ProblemError, match="relative_gap"):
        memplan.executorch.algorithm(regions=TWO, relative_gap=1.5)
    assert memplan.executorch.algorithm(regions=TWO).relative_gap == 0.01
    assert memplan.executorch.memory_planning_pass(regions=TWO, relative_gap=0) \
        .algorithm.relative_gap == 0
    with pytest.raises(ProblemError, match="TargetMemoryMap"):
        memplan.executorch.algorithm(regions=[Bank("fast", 128, 1)])
    with pytest.raises(ProblemError, match="share_mutable_buffers"):
        memplan.executorch.memory_planning_pass(regions=TWO, share_mutable_buffers=True)


def test_the_search_takes_a_cpu_allowance_that_follows_the_graph():
    assert search_cpu(500, 0.01) == pytest.approx(500 * SEARCH_CPU_PER_NODE)
    assert search_cpu(500, 0) is None  # the exact optimum: the time limit alone
    assert memplan.executorch.algorithm(regions=TWO).cpu == "auto"
    assert memplan.executorch.memory_planning_pass(regions=TWO, cpu=20).algorithm.cpu == 20
    assert memplan.executorch.algorithm(regions=TWO, cpu=float("inf")).cpu is None
    with pytest.raises(ProblemError, match="cpu"):
        memplan.executorch.algorithm(regions=TWO, cpu=-1)
    with pytest.raises(ProblemError, match="CPU allowance"):
        memplan.executorch.algorithm(cpu=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_no_cpu_left_the_plan_is_banked_greedys_or_better_and_says_its_gaps(seed):
    """A zero allowance: no stage runs its full model (BankedGreedy's plan fits), yet the
    relaxations' choices may still improve on it; the plan fits, stays within
    BankedGreedy's slow bytes and arena, and its proven gaps are shares in [0, 1]."""
    peak = max(sum(s.allocated_memory for s in _random_specs(seed)
                   if s.lifetime[0] <= t <= s.lifetime[1]) for t in range(26))
    target = TargetMemoryMap([Bank("fast", peak // 2 // 16 * 16, 1), Bank("slow", 1 << 20, 2)])
    greedy_specs = _random_specs(seed)
    greedy = BankedGreedy(target)(16, greedy_specs, GRAPH, None, 0)
    slow_bytes = sum(s.allocated_memory for s in greedy_specs
                     if greedy.spec_dict[s].mem_id == 2)
    for objective in ("traffic", "slow_arena"):
        algorithm = memplan.executorch.algorithm(time_limit=2, verify=False, regions=target,
                                                 objective=objective, cpu=0)
        specs = _random_specs(seed)
        result = algorithm(16, specs, GRAPH, None, 0)
        report = algorithm.reports[-1]
        _assert_fits(target, report, result)
        assert report.slow_bytes <= slow_bytes and report.slow_arena <= greedy.bufsizes[2]
        stats = report.plan.stats
        statuses = [v for k, v in {**stats, **stats.get("ceiling", {})}.items()
                    if k.endswith("_status") and k.split("_")[0] in ("cost", "arena")]
        assert set(statuses) <= {"budget", "relaxation"}
        assert all(0 <= gap <= 1 for gap in report.gaps.values())


class PinMatmuls(MemplanPlanningPass):
    """A custom pool pass, as ExecuTorch's docs write one: the matmuls' outputs to mem_id 2."""

    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and "mm" in str(node.target):
                node.meta["spec"].mem_id = 2
        return super().run(graph_module, graph_signature)


def test_a_model_over_regions_runs_bit_identical_with_its_pins_kept():
    model = zoo.decoder()
    edge = export(model)
    greedy_program = lower(edge)
    fast = arena_bytes(greedy_program) // 4 // 16 * 16
    target = TargetMemoryMap([Bank("fast", fast, 1), Bank("slow", 1 << 20, 2)])
    planning_pass = PinMatmuls(memplan.executorch.algorithm(time_limit=1, regions=target))
    program = lower(edge, planning_pass)
    report = planning_pass.reports[-1]
    assert memplan.validate(report.region_problem, report.plan) == []
    sizes = program.executorch_program.execution_plan[0].non_const_buffer_sizes
    assert sizes == report.bufsizes and sizes[1] <= fast and len(sizes) == 3
    graph = program.exported_program().graph_module
    for node in graph.graph.nodes:
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec) and not spec.const and spec.mem_id is not None:
            assert spec.mem_id in (1, 2)
            assert spec.mem_offset + spec.allocated_memory <= sizes[spec.mem_id]
    assert runtime_verdict(run(greedy_program, model.calls), run(program, model.calls),
                           eager(model)) == "identical"
    matmuls = [n for n in graph.graph.nodes if "mm" in str(n.target)]
    assert matmuls and all(n.meta["spec"].mem_id == 2 for n in matmuls)


def test_the_benchmark_states_export_ratios_where_banked_greedy_fits():
    """The banks benchmark's export table: per model and objective, the median and largest
    ratio of memplan's export seconds to BankedGreedy's, on each clock, only at the banks
    where BankedGreedy's plan fits (elsewhere its export is a refusal, not a peer)."""
    from benchmarks.executorch_banks import Row, export_table, summary

    def row(bank, planner, fits=True, times=(None,) * 4):
        return Row("m", bank, 64, 128, planner, 10, 10, 10, fits, 0.0, 1.0, "identical",
                   *times)

    rows = [row("25 %", "BankedGreedy"), row("25 %", "memplan traffic", times=(3, 2, 2, 2)),
            row("25 %", "memplan slow_arena", times=(2, 2, 1, 2)),
            row("50 %", "BankedGreedy"), row("50 %", "memplan traffic", times=(2, 2, 3, 2)),
            row("50 %", "memplan slow_arena", times=(4, 2, 4, 2)),
            row("75 %", "BankedGreedy", fits=False),
            row("75 %", "memplan traffic", times=(9, 1, 9, 1)),
            row("75 %", "memplan slow_arena", times=(9, 1, 9, 1))]
    lines = export_table(rows).splitlines()
    assert lines[2:] == ["| m | traffic | 2 | 1.25 / 1.50 | 1.25 / 1.50 |",
                         "| m | slow_arena | 2 | 1.50 / 2.00 | 1.25 / 2.00 |"]
    assert summary(rows)[0] == ("memplan traffic: proven within 1 % at 3 of 3 banks; export "
                                "/ BankedGreedy's (wall): median / largest 1.25 / 1.50 over 2 "
                                "banks; export / BankedGreedy's (CPU): median / largest "
                                "1.25 / 1.50 over 2 banks")
