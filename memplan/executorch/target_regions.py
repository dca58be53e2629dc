"""memplan behind ExecuTorch's target memory map: every buffer in one region, within capacity.

A microcontroller or NPU has a small fast memory (TCM, on-chip SRAM) beside a
larger slow one. ExecuTorch describes them as a ``TargetMemoryMap`` of
``Bank(name, size, mem_id)``, fastest first
(``executorch.exir.banked_memory_planning``), and its ``BankedGreedy`` offers
buffers, largest first, to the fastest region with room. `RegionAlgorithm`
(``memplan.executorch.algorithm(..., regions=target)``, or the pass
``memplan.executorch.memory_planning_pass(..., regions=target)``) plans the same
map with memplan, once per graph, as an algorithm of
ExecuTorch's suite::

    fast (mem_id 1, 448 KiB) | a | c  e |         what is read most, where it fits
    slow (mem_id 2)          |    b     | d |     the rest, in as few bytes as it can

Steps (`RegionAlgorithm.__call__`):

- ExecuTorch's own checks of the map against the graph (a region's alignment
  a multiple of the graph's; CPU specs only);
- `memplan.executorch.executorch_specs.spec_layout` reads the specs; a spec
  whose ``mem_id`` a pass set is *pinned*: to a declared region it stays
  there, within the region's capacity; to an undeclared ``mem_id`` it is laid
  out there by `memplan.solve`, unbudgeted, as ExecuTorch documents; the
  other specs are free;
- one region `Problem` (`target_problem`): a `memplan.Region` per ExecuTorch
  ``Bank`` of the map (the two words name one thing; memplan says region), its
  capacity the bank's size less the bytes its control-flow subgraphs reserved
  and the XNNPACK padding, its cost per byte its rank in the map (0 for the
  fastest); a free buffer may use every region, a pinned one its own; its
  alignment the least common multiple of those regions'; how many nodes read
  it (`spec_reads`) weights its bytes;
- a proof that nothing fits, before any search (`overflow`): a buffer larger
  than every region it may use, a step whose pinned bytes exceed their region,
  or a step whose live bytes exceed all the regions together; raised as
  `RegionOverflowError` naming the step's node and its largest tensors;
- the plan (`memplan.deploy.regions`, then `memplan.deploy.regions_exact`:
  CP-SAT), for one of `OBJECTIVES`: ``traffic`` (the default) fits, then
  moves the fewest bytes to slower regions, each tensor's bytes times its
  reads; ``slow_arena`` fits, then makes the slower regions' arenas as small
  as they can be, then the traffic. Where BankedGreedy's plan fits, it is
  the start and a ceiling: memplan's plan never has more slow bytes, a
  larger slow arena or a worse objective. memplan's validator checks it against
  the region problem; no fitting plan is a `RegionOverflowError` too (proven
  when CP-SAT proved it);
- written back as ExecuTorch's result (`memplan.executorch.spec_planner
  .algo_result`): offset = the region's base + the offset, ``mem_obj_id``,
  ``bufsizes`` with an entry for every declared region; every region's size is
  checked against its capacity (`check_regions`, again by the pass after
  every graph), and ExecuTorch's Verifier runs on the result.

Known limits: a region with a larger alignment rounds the sizes of the free
buffers up to it in every region; optional aliases (there are none in
ExecuTorch's specs) are not taken across regions; ``share_mutable_buffers`` is
refused, as ExecuTorch refuses it with regions. Cost: the region planners'
(a heuristic pass, then CP-SAT within a CPU allowance, by default
`search_cpu`: a share of what the export itself costs, after the graph's
nodes; and within the time limit), plus O(nodes).
"""

from __future__ import annotations

import math
import operator
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from executorch.exir import memory
from executorch.exir.banked_memory_planning import (
    BankedGreedy,
    BankPlacementError,
    TargetMemoryMap,
)
from executorch.exir.memory_planning import MemoryAlgoResult, get_node_tensor_specs

from memplan.bounds import live_bytes
from memplan.budget import Budget, Stopwatch
from memplan.deploy.regions import (
    cost_bound,
    plan_gaps,
    plan_regions,
    region_plan,
    slow_regions,
    within,
)
from memplan.deploy.regions_exact import plan_regions_exact, relaxed_bound
from memplan.deploy.scratch import subproblem
from memplan.errors import (
    InvalidPlanError,
    MemplanError,
    ProblemError,
    renamed,
    renamed_keyword,
)
from memplan.executorch import spec_planner
from memplan.executorch.executorch_specs import SpecLayout, root_of, spec_layout
from memplan.executorch.spec_planner import (
    GraphReport,
    MemplanAlgorithm,
    algo_result,
)
from memplan.limits import check_time_limit
from memplan.plan import Plan
from memplan.problem import Buffer, Problem, Region
from memplan.shares import SEARCH_CPU_PER_NODE
from memplan.validate import validate

OBJECTIVES = {"traffic": "cost", "slow_arena": "arena"}  # ours -> the region planners'
RELATIVE_GAP = 0.01  # by default the search stops once its plan is proven this close
SHOWN = 8  # tensors named in an overflow message
THREADS = 2  # CP-SAT threads of the search, unless the pass's ``threads`` says


class RegionOverflowError(MemplanError, BankPlacementError):
    """The regions cannot hold the graph's buffers: at ``step`` (``node``) the ``tensors``
    need ``needed`` bytes where ``capacity`` are; ``proven`` when no placement can fit
    (the live bytes, or CP-SAT), else memplan found none in its time limit. An
    ExecuTorch ``BankPlacementError`` too, so code that catches ExecuTorch's catches it."""

    def __init__(self, message: str, *, proven: bool, step: int | None = None,
                 node: str | None = None, tensors: tuple[str, ...] = (), needed: int = 0,
                 capacity: int = 0):
        super().__init__(message)
        self.proven, self.step, self.node, self.tensors = proven, step, node, tensors
        self.needed, self.capacity = needed, capacity


@dataclass
class RegionReport(GraphReport):
    """A `GraphReport` of a graph planned over a target's regions: the region problem and
    plan, what went slow."""

    target: TargetMemoryMap | None = None
    objective: str = "traffic"
    region_problem: Problem | None = None  # the buffers of the declared banks, a region each
    plan: Plan | None = None  # its plan over the regions
    reads: np.ndarray | None = None  # per buffer of ``region_problem``, the nodes that read it
    _gaps: dict | None = field(default=None, repr=False)  # `gaps`, once asked

    @property
    def banked(self) -> Problem | None:
        """The old name of `region_problem`, for one release."""
        warnings.warn("RegionReport.banked is deprecated: use region_problem",
                      DeprecationWarning, stacklevel=2)
        return self.region_problem

    def _slow(self) -> np.ndarray:
        return slow_regions(self.region_problem)[self.plan.regions]  # all but the fastest

    @property
    def slow_bytes(self) -> int:
        """Bytes of the buffers in any region but the fastest."""
        return 0 if self.plan is None else int(self.region_problem.sizes[self._slow()].sum())

    @property
    def traffic(self) -> int:
        """Those bytes times their reads (``bytes`` when a tensor has no reader)."""
        if self.plan is None:
            return 0
        return int((self.region_problem.sizes * np.maximum(self.reads, 1))[self._slow()].sum())

    @property
    def slow_arena(self) -> int:
        """The arenas of every region but the fastest (``bufsizes``), summed."""
        return sum(self.bufsizes[m] for m in self.target.mem_ids()[1:] if m < len(self.bufsizes))

    @property
    def objective_gap(self) -> float:
        """How far the objective may be from its optimum, proven (0: optimal): the bound
        the search proved (`proven_gaps`)."""
        return proven_gaps(self.plan.stats)[self.objective] if self.plan is not None else 0.0

    @property
    def gaps(self) -> dict[str, float]:
        """Per measure (``traffic``, ``slow_arena``, ``slow_bytes``), how far this plan's
        value may be from the least any plan has, proven (0: optimal): the plan's own
        bounds (`proven_gaps`), and for a measure other than the objective, the relaxation's
        (`memplan.deploy.regions_exact.relaxed_bound`, solved when first asked, not
        during the export)."""
        if self.plan is None:
            return dict.fromkeys(("traffic", "slow_arena", "slow_bytes"), 0.0)
        if self._gaps is None:
            stats, reads = self.plan.stats, np.maximum(self.reads, 1)
            gaps = proven_gaps(stats)
            if gaps["traffic"] > 0 and self.objective != "traffic":
                gaps["traffic"] = min(gaps["traffic"], _gap(stats["cost"], relaxed_bound(
                    self.region_problem, reads=reads)))
            if gaps["slow_arena"] > 0 and self.objective != "slow_arena":
                gaps["slow_arena"] = min(gaps["slow_arena"], _gap(
                    stats["arena_cost"], relaxed_bound(self.region_problem, objective="arena")))
            flat = self.region_problem.replace(regions=[
                Region(r.name, r.capacity, float(r.cost > 0)) for r in self.region_problem.regions])
            gaps["slow_bytes"] = _gap(self.slow_bytes, max(cost_bound(flat),
                                                           relaxed_bound(flat)))
            self._gaps = gaps
        return self._gaps


@dataclass
class RegionAlgorithm(MemplanAlgorithm):
    """The callable ExecuTorch's suite runs with a target memory map; see the module
    docstring. Build it with ``memplan.executorch.algorithm(..., regions=target)``."""

    target: TargetMemoryMap | None = None
    objective: str = "traffic"
    relative_gap: float = RELATIVE_GAP  # stop once proven this close (0: the optimum)
    cpu: float | str | None = "auto"  # CPU seconds of the search a graph, `search_cpu`

    def __post_init__(self):
        super().__post_init__()
        if self.cpu != "auto":
            self.cpu = check_time_limit(self.cpu, "cpu")
        if not (isinstance(self.relative_gap, (int, float)) and 0 <= self.relative_gap < 1):
            raise ProblemError(f"relative_gap must be a share in [0, 1), got "
                               f"{self.relative_gap!r}")
        if not isinstance(self.target, TargetMemoryMap):
            raise ProblemError(f"regions must be ExecuTorch's TargetMemoryMap, got "
                               f"{type(self.target).__name__}")
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"unknown objective {self.objective!r}; valid: "
                               f"{', '.join(OBJECTIVES)}")

    def __call__(self, alignment: int, specs, graph_module, graph_signature=None,
                 extra_padding: int = 0) -> MemoryAlgoResult:
        watch = Budget.of_limit(self.options.time_limit)  # the graph's, from the call on
        graph = f"graph {len(self.reports)} ({len(graph_module.graph.nodes)} nodes)"
        specs = list(dict.fromkeys(specs))
        greedy = BankedGreedy(self.target)
        greedy._check_bank_alignments(alignment)  # ExecuTorch's own refusals, as it words them
        greedy._reject_non_cpu(specs)
        pins = {spec for spec in specs if spec.mem_id is not None}
        try:
            peer = greedy(alignment, specs, graph_module, graph_signature, extra_padding)
        except Exception:  # noqa: BLE001 (BankPlacementError, its asserts): no warm start
            peer = None
        call = (alignment, specs, graph_module, graph_signature, extra_padding)

        def planned() -> tuple[RegionReport, MemoryAlgoResult]:
            layout = spec_layout(specs, graph_module, alignment=alignment,
                                 signature=graph_signature, name=graph)
            report, result = self._plan_target(layout, pins, alignment, graph_module,
                                               extra_padding, watch, graph, peer)
            check_regions(self.target, result.bufsizes)
            return report, result

        return self._settled(graph, watch, call, planned, greedy, "BankedGreedy")

    def _report(self, graph: str, bufsizes: list[int], seconds: float,
                **fields: Any) -> RegionReport:
        return RegionReport(graph, {}, {}, bufsizes, seconds, target=self.target,
                            objective=self.objective, **fields)

    def _plan_target(self, layout: SpecLayout, pins: set, alignment: int, graph_module: Any,
                     extra_padding: int, watch: Stopwatch, graph: str,
                     peer: MemoryAlgoResult | None) -> tuple[RegionReport, MemoryAlgoResult]:
        """The region problem planned, the undeclared pins planned, both written back."""
        target = self.target
        declared = target.mem_ids()
        reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
        aligns = {m: target.bank(m).alignment or alignment for m in declared}
        bases = {m: _align(reserved[m] if m < len(reserved) else 0, aligns[m])
                 for m in declared}
        problem, specs = target_problem(layout, pins, target, bases, aligns, extra_padding)
        reads = spec_reads(graph_module, specs)
        others = _undeclared(layout, pins, declared)
        limit = self.options.time_limit
        share = None if limit is None else limit / (1 + bool(others.problems))
        cpu = search_cpu(len(graph_module.graph.nodes), self.relative_gap) \
            if self.cpu == "auto" else self.cpu
        plan = plan_target(problem, reads, self.objective, time_limit=share,
                           seed=self.options.seed, threads=self.options.threads,
                           guard=greedy_plan(problem, specs, peer, target, bases, reads),
                           relative_gap=self.relative_gap, cpu=cpu) \
            if len(problem) else None
        plans, roots, problems = {}, {}, {}
        for k, mem_id in enumerate(declared):
            members = plan.regions == k if plan is not None else np.zeros(0, bool)
            if not members.any():
                continue
            problems[mem_id] = part = subproblem(problem, members, one_arena=True)
            plans[mem_id] = Plan.from_offsets(part, plan.offsets[members],
                                              planner=plan.planner, seconds=plan.seconds)
            roots[mem_id] = [specs[i] for i in np.flatnonzero(members).tolist()]
            for spec in roots[mem_id]:
                spec.realign(aligns[mem_id])
        plans.update(self._plan(others, watch))  # undeclared pins: unbudgeted, as greedy
        problems.update(others.problems)
        roots.update(others.roots)
        empty: dict[int, list] = {}
        for mem_id, found in layout.empty.items():
            for spec in found:  # a free empty spec sits at the fastest region's base
                empty.setdefault(mem_id if spec in pins else declared[0], []).append(spec)
        written = SpecLayout(problems, roots, {**layout.bases, **bases}, layout.derived, empty,
                             layout.names)
        result = algo_result(written, plans, graph_module, extra_padding)
        top = max(declared) + 1
        if len(result.bufsizes) < top:
            result.bufsizes += [0] * (top - len(result.bufsizes))
        for mem_id in declared:
            if mem_id not in plans and mem_id not in empty:
                result.bufsizes[mem_id] = max(result.bufsizes[mem_id], bases[mem_id])
        report = RegionReport(graph, problems, plans, result.bufsizes,
                              watch.elapsed(), target=target, objective=self.objective,
                              region_problem=problem, plan=plan, reads=reads)
        return report, result

    def check_regions(self, graph_module: Any) -> None:
        """The pass's check after every graph: each region within its capacity."""
        check_regions(self.target, graph_module.meta.get("non_const_buffer_sizes") or [])


def algorithm(time_limit: float | None = 10.0, *, regions: TargetMemoryMap | None = None,
              objective: str | None = None, relative_gap: float | None = None,
              cpu: float | str | None = "auto", banks: TargetMemoryMap | None = None,
              **options: Any) -> MemplanAlgorithm:
    """`memplan.executorch.spec_planner.algorithm` (``options`` are its), or with ``regions``
    (ExecuTorch's ``TargetMemoryMap``) a `RegionAlgorithm` for ``objective`` (one of
    `OBJECTIVES`, ``traffic`` by default) that stops once its plan is proven within
    ``relative_gap`` (`RELATIVE_GAP` by default; 0: the optimum or the time limit) or
    once its search took ``cpu`` CPU seconds (`search_cpu` by default; None: the time
    limit alone); `ProblemError` for an objective, a gap or a CPU allowance without
    regions. ``banks``: the old name of ``regions``, for one release."""
    regions = renamed_keyword("banks", banks, "regions", regions)
    single = spec_planner.algorithm(time_limit, **options)  # its options checked there
    if regions is None:
        if objective is not None or relative_gap is not None or cpu != "auto":
            raise ProblemError("an objective, a relative gap and a CPU allowance are for "
                               "regions: give regions=TargetMemoryMap(...)")
        return single
    return RegionAlgorithm(single.options, fallback=single.fallback, verify=single.verify,
                           target=regions, objective=objective or "traffic",
                           relative_gap=RELATIVE_GAP if relative_gap is None else relative_gap,
                           cpu=cpu)


def search_cpu(nodes: int, relative_gap: float) -> float | None:
    """The CPU seconds (all threads) the region search of a graph of ``nodes`` nodes takes
    by default: `SEARCH_CPU_PER_NODE` a node, a share of what lowering such a graph costs
    ExecuTorch, so that the export's time follows its own cost; None (the time limit
    alone) for the exact optimum (``relative_gap`` 0). The search stops earlier once
    proven within the gap; what it stops with says its proven gaps (`RegionReport.gaps`)."""
    return None if relative_gap == 0 else SEARCH_CPU_PER_NODE * nodes


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def target_problem(layout: SpecLayout, pins: set, target: TargetMemoryMap,
                   bases: dict[int, int], aligns: dict[int, int], extra_padding: int
                   ) -> tuple[Problem, list]:
    """The buffers of the declared banks as one region `Problem` (module docstring), and the
    spec of each buffer; `RegionOverflowError` when free buffers have no region with room."""
    declared = target.mem_ids()
    room = {b.mem_id: b.size - bases[b.mem_id] - extra_padding for b in target.banks}
    usable = [b for b in target.banks if room[b.mem_id] > 0]
    free_align = math.lcm(*(aligns[b.mem_id] for b in usable)) if usable else 1
    buffers, specs = [], []
    for mem_id, problem in sorted(layout.problems.items()):
        for i, spec in enumerate(layout.roots[mem_id]):
            row = problem.buffer(i)
            if spec not in pins:
                allowed, align = tuple(b.name for b in usable), free_align
            elif mem_id in declared:
                allowed, align = (target.bank(mem_id).name,), aligns[mem_id]
            else:
                continue  # pinned to an undeclared arena: planned on its own
            if not allowed:
                raise RegionOverflowError(
                    f"no region has room for {row.id}: the subgraphs' reserved bytes and the "
                    f"padding fill every region ({target.describe()})", proven=True,
                    tensors=(row.id,), needed=row.size)
            buffers.append(Buffer(row.id, _align(row.size, align), row.start, row.end, align,
                                  regions=allowed, kind=row.kind))
            specs.append(spec)
    # a region beyond every plan's reach (2^63 - 1, the usual "unbounded") holds as much as
    # the buffers stacked end to end, each at its alignment: its true size changes nothing
    reach = sum(b.size + b.alignment for b in buffers)
    regions = [Region(b.name, max(1, min(room[b.mem_id], reach)), float(rank))
               for rank, b in enumerate(target.banks)]
    steps = next(iter(layout.problems.values())).steps if layout.problems else None
    return Problem(buffers, regions=regions, name="regions", steps=steps), specs


def _undeclared(layout: SpecLayout, pins: set, declared: list[int]) -> SpecLayout:
    """The specs a pass pinned to arenas the map does not declare, one problem each."""
    problems, roots = {}, {}
    for mem_id, problem in layout.problems.items():
        if mem_id in declared:
            continue
        keep = np.array([spec in pins for spec in layout.roots[mem_id]])
        if keep.any():
            problems[mem_id] = subproblem(problem, keep)
            roots[mem_id] = [s for s, k in zip(layout.roots[mem_id], keep, strict=True) if k]
    return SpecLayout(problems, roots, {m: layout.bases[m] for m in problems})


def spec_reads(graph_module: Any, specs: list) -> np.ndarray:
    """Per spec, how many nodes read its storage (the graph's output node counts as one);
    views, allocations, frees and ``getitem`` read nothing, and a node's own outputs are writes."""
    reads: Counter = Counter()
    skip = (memory.alloc, memory.view, memory.free, operator.getitem)
    for node in graph_module.graph.nodes:
        if node.op not in ("call_function", "output") or node.target in skip:
            continue
        writes = {root_of(s)[0] for s in get_node_tensor_specs(node)} \
            if node.op != "output" else set()
        read = {root_of(s)[0] for arg in node.all_input_nodes for s in get_node_tensor_specs(arg)}
        for spec in read - writes:
            reads[spec] += 1
    return np.array([reads[spec] for spec in specs], np.int64)


def plan_target(problem: Problem, reads: np.ndarray, objective: str, *,
                time_limit: float | None, seed: int = 0, threads: int | None = None,
                guard: Plan | None = None, relative_gap: float = 0.0,
                cpu: float | None = None) -> Plan:
    """The region plan of ``problem`` for ``objective`` (`OBJECTIVES`), validated; a
    `RegionOverflowError` when no plan fits (proven, or not found in ``time_limit``).
    ``guard``: a valid plan that fits (BankedGreedy's), a start and a ceiling: the plan
    returned has at most its slow bytes, its slow arena and its objective. It (else the
    region heuristic's plan) warm-starts the exact planner, which never returns worse
    and stays within the guard. The search
    stops once the plan is proven within ``relative_gap`` on the objective (`proven_gaps`),
    or once it took ``cpu`` CPU seconds, all threads (None: the time limit's worth)."""
    steps = [step.name for step in problem.steps or ()]
    proof = overflow(problem, steps)
    if proof is not None:
        raise proof
    reads = np.maximum(reads, 1)
    goal = OBJECTIVES[objective]
    # BankedGreedy's plan starts the search; the region heuristic only where it has none
    plan = guard if guard is not None else plan_regions(problem, reads=reads)
    gaps = proven_gaps(plan.stats)
    done = within(problem, plan, guard) and gaps["traffic"] <= relative_gap and (
        objective == "traffic" or gaps["slow_arena"] <= relative_gap)
    if not done or plan.stats["over_capacity"]:
        threads = threads or THREADS
        plan = plan_regions_exact(problem, seed=seed, hint=plan, reads=reads,
                                  objective=goal, ceiling=guard, relative_gap=relative_gap,
                                  threads=threads, budget=Budget.of_limit(
                                      time_limit, cpu=None if cpu is None else cpu / threads))
    if plan.stats["over_capacity"]:
        raise _no_plan(problem, plan, steps)
    violations = validate(problem, plan)
    if violations:
        raise InvalidPlanError(violations)
    return plan


def _gap(value: float, bound: float) -> float:
    return max(0.0, value - bound) / value if value > 0 else 0.0


def proven_gaps(stats: dict) -> dict[str, float]:
    """Per objective, how far a region plan (its ``stats``) may be from the optimum, proven
    (`memplan.deploy.regions.plan_gaps`, by our names)."""
    gaps = plan_gaps(stats)
    return {ours: gaps[theirs] for ours, theirs in OBJECTIVES.items()}


def greedy_plan(problem: Problem, specs: list, result: MemoryAlgoResult | None,
                target: TargetMemoryMap, bases: dict[int, int], reads: np.ndarray
                ) -> Plan | None:
    """BankedGreedy's ``result`` as a plan of ``problem`` (offsets less the regions' bases),
    when it places every buffer in a declared region and is valid there; else None."""
    if result is None:
        return None
    rank = {mem_id: k for k, mem_id in enumerate(target.mem_ids())}
    offsets, regions = np.zeros(len(problem), np.int64), np.zeros(len(problem), np.int64)
    for i, spec in enumerate(specs):
        alloc = result.spec_dict.get(spec)
        if alloc is None or alloc.mem_id not in rank:
            return None
        offsets[i], regions[i] = alloc.mem_offset - bases[alloc.mem_id], rank[alloc.mem_id]
    plan = region_plan(problem, offsets, regions, planner="BankedGreedy", seconds=0.0,
                       reads=np.maximum(reads, 1))
    return None if plan.stats["over_capacity"] or validate(problem, plan) else plan


def _at(step: int, steps: list[str]) -> str:
    return f"node {step} ({steps[step]})" if step < len(steps) else f"step {step}"


def _tensors(problem: Problem, members: np.ndarray) -> tuple[str, ...]:
    order = sorted(np.flatnonzero(members).tolist(), key=lambda i: -int(problem.sizes[i]))
    return tuple(problem.ids[i] for i in order)


def _named(problem: Problem, tensors: tuple[str, ...]) -> str:
    shown = ", ".join(f"{t} {int(problem.sizes[problem.index(t)]):,} B"
                      for t in tensors[:SHOWN])
    return shown + (f" and {len(tensors) - SHOWN} more" if len(tensors) > SHOWN else "")


def overflow(problem: Problem, steps: list[str] | None = None) -> RegionOverflowError | None:
    """A proof that no placement fits the regions, or None (module docstring): the first
    of a buffer larger than every region it may use, a step whose pinned bytes exceed
    their region, a step whose live bytes exceed all the regions. O(n log n + steps)."""
    steps = steps or []
    caps = {r.name: r.capacity for r in problem.regions}
    for i, allowed in enumerate(problem.allowed_regions):
        most = max(caps[name] for name in allowed)
        if problem.sizes[i] > most:
            return RegionOverflowError(
                f"no region can hold {problem.ids[i]} ({int(problem.sizes[i]):,} B): the "
                f"largest it may use holds {most:,} B", proven=True,
                step=int(problem.starts[i]), node=_at(int(problem.starts[i]), steps),
                tensors=(problem.ids[i],), needed=int(problem.sizes[i]), capacity=most)
    checks = [((np.array([a == (r.name,) for a in problem.allowed_regions])), r.capacity,
               f"pinned to region {r.name}") for r in problem.regions]
    checks.append((np.ones(len(problem), bool), sum(caps.values()), "together in all regions"))
    for members, capacity, what in checks:
        if not members.any():
            continue
        load = live_bytes(subproblem(problem, members, one_arena=True))
        step = int(np.argmax(load))
        if load[step] > capacity:
            live = members & (problem.starts <= step) & (problem.ends > step)
            tensors = _tensors(problem, live)
            return RegionOverflowError(
                f"no placement fits the regions: at {_at(step, steps)} the tensors live "
                f"{what} need {int(load[step]):,} B, the regions hold {capacity:,} B: "
                f"{_named(problem, tensors)}", proven=True, step=step,
                node=_at(step, steps), tensors=tensors, needed=int(load[step]),
                capacity=capacity)
    return None


def _no_plan(problem: Problem, plan: Plan, steps: list[str]) -> RegionOverflowError:
    """No plan fits though the live bytes do: CP-SAT proved it, or ran out of time."""
    load = live_bytes(subproblem(problem, np.ones(len(problem), bool), one_arena=True))
    step = int(np.argmax(load))
    live = (problem.starts <= step) & (problem.ends > step)
    tensors = _tensors(problem, live)
    capacity = sum(r.capacity for r in problem.regions)
    proven = bool(plan.stats.get("proven_infeasible"))
    verdict = "CP-SAT proved that no placement fits the regions" if proven else \
        "memplan found no placement that fits the regions within its time limit (not proven " \
        "impossible: a longer time limit may find one)"
    return RegionOverflowError(
        f"{verdict} ({', '.join(plan.stats['over_capacity'])} over); the busiest step is "
        f"{_at(step, steps)}: {int(load[step]):,} B live of {capacity:,} B: "
        f"{_named(problem, tensors)}", proven=proven, step=step, node=_at(step, steps),
        tensors=tensors, needed=int(load[step]), capacity=capacity)


def explain_report(report: RegionReport, **options: Any):
    """`memplan.diagnosis.region_curve.explain_regions` on the plan of a graph planned over
    a target's regions, its reads as the weights: what fills the fast region at its peak,
    what a larger one would save."""
    from memplan.diagnosis.region_curve import explain_regions

    if report.plan is None:
        raise ProblemError(f"{report.graph} has no region plan to explain")
    return explain_regions(report.region_problem, report.plan,
                           reads=np.maximum(report.reads, 1), **options)


def check_regions(target: TargetMemoryMap, bufsizes: list[int]) -> None:
    """`InvalidPlanError` when a declared region's arena exceeds its size."""
    over = [f"region {b.name} (mem_id {b.mem_id}) needs {bufsizes[b.mem_id]:,} B of "
            f"{b.size:,} B" for b in target.banks
            if b.mem_id < len(bufsizes) and bufsizes[b.mem_id] > b.size]
    if over:
        raise InvalidPlanError(over)


def format_region_report(report: RegionReport) -> str:
    """A per-region summary of ``report``, in the style of ExecuTorch's
    ``format_placement_report``, with what went slow and how far from optimal."""
    target = report.target
    counts: Counter = Counter()
    traffic: Counter = Counter()
    if report.plan is not None:
        weights = report.region_problem.sizes * np.maximum(report.reads, 1)
        for k, w in zip(report.plan.regions.tolist(), weights.tolist(), strict=True):
            counts[target.banks[k].mem_id] += 1
            traffic[target.banks[k].mem_id] += w
    lines = [f"Memory region placement (memplan, objective {report.objective}):",
             f"  {'region':<12}{'mem_id':>7}{'used':>12}{'size':>12}{'util':>8}{'buffers':>9}"
             f"{'bytes x reads':>15}"]
    for bank in target.banks:  # ExecuTorch's Bank: a region
        used = report.bufsizes[bank.mem_id] if bank.mem_id < len(report.bufsizes) else 0
        lines.append(f"  {bank.name:<12}{bank.mem_id:>7}{used:>12}{bank.size:>12}"
                     f"{100.0 * used / bank.size:>7.1f}%{counts[bank.mem_id]:>9}"
                     f"{traffic[bank.mem_id]:>15}")
    total = sum(report.bufsizes[m] for m in target.mem_ids() if m < len(report.bufsizes))
    lines.append(f"  total planned: {total} bytes over {len(target.banks)} regions")
    if report.plan is not None:
        stats, gaps = report.plan.stats, report.gaps
        lines.append(f"  slow bytes {report.slow_bytes} ({_said(gaps['slow_bytes'])}), "
                     f"read-weighted {report.traffic} ({_said(gaps['traffic'])}), slow arena "
                     f"{report.slow_arena} ({_said(gaps['slow_arena'])})")
        key = "cost_bound" if report.objective == "traffic" else "arena_bound"
        where = ""
        if "ceiling" in stats:
            where = " among the plans within BankedGreedy's slow bytes and slow arena" \
                if stats["ceiling"].get(key, 0.0) > stats[key] else \
                " (kept within BankedGreedy's slow bytes and slow arena)"
        lines.append(f"  objective {report.objective}: {_said(report.objective_gap)}{where}")
    return "\n".join(lines)


def _said(gap: float) -> str:
    return "proven optimal" if gap == 0 else f"proven gap {gap:.2%}"


__getattr__ = renamed(__name__, {"BankOverflowError": "RegionOverflowError",
                                 "BankReport": "RegionReport",
                                 "BankedAlgorithm": "RegionAlgorithm",
                                 "format_bank_report": "format_region_report"})
