"""memplan as a memory planning algorithm of ExecuTorch (``MemoryPlanningAlgorithmSuite``).

ExecuTorch calls an algorithm once per graph it plans (each method, each
control-flow subgraph first) as ``algo(alignment, specs, graph_module,
graph_signature, extra_padding)`` and takes back a ``MemoryAlgoResult``: per
spec its arena (``mem_id``), offset and memory object, and the size of every
arena (``bufsizes``). `MemplanAlgorithm` answers that call:

- `memplan.executorch.executorch_specs.spec_layout` turns the specs into one
  `Problem` per arena (realigned sizes, half-open lifetimes, the subgraphs'
  reserved bytes below the base; refused naming the node where it cannot);
- `memplan.solve` plans each arena within the time left (heuristics, then
  the exact planner warm-started; its status and gap say how close to the
  optimum), and its validator checks the plan;
- offsets are written as ``base + offset``; a storage-backed spec sits at its
  root's offset + its ``storage_base_offset`` (summed along the chain); a
  zero-byte spec at the base;
- ``mem_obj_id``: specs whose byte ranges meet share one (ExecuTorch's
  Verifier asks that), found by one sweep over the offsets per arena;
- ``bufsizes``: ``[0]`` for the constants, then per arena ``base + arena +
  extra_padding`` (64 bytes when an XNNPACK delegate is present), as many
  entries as ExecuTorch's greedy returns, so both can sit in one suite;
- ExecuTorch runs its ``Verifier`` only for an algorithm named ``greedy``:
  here what it proves is checked on every plan, read off the result
  (`memplan.executorch.spec_check`: a sweep, O(n log n); ``verify="executorch"``:
  the Verifier itself, the specs carrying the result while it checks, then
  their old values back: the suite writes the winner's).

What cannot be planned is refused (`ProblemError` naming the node; a plan the
check rejects: `InvalidPlanError`), or with ``fallback="greedy"`` handed to
ExecuTorch's greedy with a warning (the pass then has the algorithm run the
check, so that a rejected plan falls back too). Every call
is kept in ``reports`` and logged (logger ``memplan.executorch``): arena
bytes, lower bound, status, proven gap, seconds. ``time_limit`` holds for
each call (a graph), the layout and the write-back included; the check comes
on top (``verify_seconds``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from executorch.exir.memory_planning import (
    MemoryAlgoResult,
    SpecAllocResult,
    Verifier,
    _get_mutable_buffer_specs,
    collect_specs_from_nodes,
    get_graph_input_tensors,
    get_graph_output_tensors,
    greedy,
)

from memplan.api import SolveOptions, solve_report
from memplan.budget import Budget, Stopwatch
from memplan.errors import InvalidPlanError, ProblemError, renamed_keyword
from memplan.executorch.executorch_specs import SpecLayout, root_of, spec_layout
from memplan.executorch.spec_check import check_mode, check_storage, spec_namer
from memplan.plan import Plan
from memplan.problem import Problem

log = logging.getLogger("memplan.executorch")
FALLBACKS = (None, "greedy")


@dataclass
class GraphReport:
    """One planning call: the graph, its problems and plans per arena, and what it cost."""

    graph: str
    problems: dict[int, Problem]
    plans: dict[int, Plan]
    bufsizes: list[int]
    seconds: float  # the whole call but the checks
    verify_seconds: float = 0.0  # the checks of this graph's plan (the algorithm's, the pass's)
    fallback: str | None = None  # why greedy planned this graph instead, when it did

    @property
    def gap(self) -> float:
        """The largest proven gap over the arenas (0: every arena optimal)."""
        return max((plan.gap for plan in self.plans.values()), default=0.0)


@dataclass
class MemplanAlgorithm:
    """The callable ExecuTorch's suite runs; see the module docstring. Build it with
    `memplan.executorch.algorithm`."""

    options: SolveOptions = field(default_factory=SolveOptions)
    fallback: str | None = None  # None: refuse what cannot be planned; "greedy": hand it over
    verify: bool | str | None = True  # check every plan: "memplan" (True), "executorch", None
    reports: list[GraphReport] = field(default_factory=list)

    def __post_init__(self):
        if self.fallback not in FALLBACKS:
            raise ProblemError(f"fallback must be None or 'greedy', got {self.fallback!r}")
        self.verify = check_mode(self.verify)
        self.__name__ = "memplan"  # the suite names each algorithm's result by it

    def __call__(self, alignment: int, specs, graph_module, graph_signature=None,
                 extra_padding: int = 0) -> MemoryAlgoResult:
        watch = Budget.of_limit(self.options.time_limit)  # the graph's, from the call on
        graph = f"graph {len(self.reports)} ({len(graph_module.graph.nodes)} nodes)"

        def planned() -> tuple[GraphReport, MemoryAlgoResult]:
            layout = spec_layout(specs, graph_module, alignment=alignment,
                                 signature=graph_signature, name=graph)
            plans = self._plan(layout, watch)
            result = algo_result(layout, plans, graph_module, extra_padding)
            return GraphReport(graph, layout.problems, plans, result.bufsizes,
                               watch.elapsed()), result

        call = (alignment, specs, graph_module, graph_signature, extra_padding)
        result = self._settled(graph, watch, call, planned, greedy, "greedy")
        for mem_id, plan in self.reports[-1].plans.items():  # none when greedy planned it
            log.info("memplan: %s mem_id %d: %d bytes (lower bound %d), %s, proven gap "
                     "%.2f%%, %.2f s", graph, mem_id, plan.arena_size, plan.lower_bound,
                     plan.status, 100 * plan.gap, plan.seconds)
        return result

    def _settled(self, graph: str, watch: Stopwatch, call: tuple, planned: Callable,
                 peer: Callable, peer_name: str) -> MemoryAlgoResult:
        """``planned()``'s (report, result), checked as ``verify`` says; where memplan cannot
        plan the graph (or its plan fails the check) and ``fallback`` is "greedy", ExecuTorch's
        ``peer`` plans it from ``call`` (the suite's arguments), with a warning. Either way the
        graph's report is kept."""
        graph_module, graph_signature = call[2], call[3]
        try:
            report, result = planned()
            if self.verify:
                checked = Stopwatch()
                verify_result(result, graph_module, graph_signature, check=self.verify)
                report.verify_seconds = checked.elapsed()
        except (ProblemError, InvalidPlanError) as error:
            if self.fallback != "greedy":
                raise
            warnings.warn(f"memplan cannot plan {graph} ({error}); ExecuTorch's {peer_name} "
                          f"plans it", stacklevel=3)
            result = peer(*call)
            report = self._report(graph, result.bufsizes, watch.elapsed(),
                                  fallback=str(error))
        self.reports.append(report)
        return result

    def _report(self, graph: str, bufsizes: list[int], seconds: float,
                **fields: Any) -> GraphReport:
        """The report of a graph memplan did not plan (``fallback``: why)."""
        return GraphReport(graph, {}, {}, bufsizes, seconds, **fields)

    def _plan(self, layout: SpecLayout, budget: Budget) -> dict[int, Plan]:
        """Each arena's plan, the time left shared equally among the arenas still to plan."""
        plans = {}
        for k, (mem_id, problem) in enumerate(sorted(layout.problems.items())):
            share = budget.share(1 / (len(layout.problems) - k))
            plans[mem_id] = solve_report(problem, self.options, budget=share).plan
        return plans


def algo_result(layout: SpecLayout, plans: dict[int, Plan], graph_module: Any,
                extra_padding: int) -> MemoryAlgoResult:
    """The plans as ExecuTorch's result: offsets, memory objects and arena sizes; O(n log n)."""
    placed: dict[Any, tuple[int, int]] = {}  # spec -> (mem_id, offset)
    for mem_id, roots in layout.roots.items():
        base = layout.bases[mem_id]
        for spec, offset in zip(roots, plans[mem_id].offsets.tolist(), strict=True):
            placed[spec] = (mem_id, base + offset)
    for mem_id, specs in layout.empty.items():
        for spec in specs:
            placed[spec] = (mem_id, layout.bases[mem_id])
    for spec in layout.derived:
        root, delta = root_of(spec)
        mem_id, offset = placed[root]
        placed[spec] = (mem_id, offset + delta)
    objects = memory_objects(placed)
    result = MemoryAlgoResult({spec: SpecAllocResult(mem_id, objects[spec], offset)
                               for spec, (mem_id, offset) in placed.items()}, [])
    used = layout.mem_ids
    bufsizes = [0] * (max(used, default=1) + 1)
    for mem_id in used:
        arena = plans[mem_id].arena_size if mem_id in plans else 0
        bufsizes[mem_id] = layout.bases[mem_id] + arena + extra_padding
    reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
    for mem_id in range(1, min(len(bufsizes), len(reserved))):
        bufsizes[mem_id] = max(bufsizes[mem_id], reserved[mem_id])  # a subgraph's arena
    result.bufsizes = bufsizes
    return result


def memory_objects(placed: dict[Any, tuple[int, int]]) -> dict[Any, int]:
    """A ``mem_obj_id`` per spec: specs whose byte ranges meet in one arena share one.

    Sweep per arena over the specs by offset; a spec joins the current object while
    it starts below the object's end. Zero-byte specs meet nothing: one each."""
    ids: dict[Any, int] = {}
    order = sorted(placed, key=lambda s: (placed[s][0], placed[s][1], -s.allocated_memory))
    count, current, arena, end = 0, -1, None, -1
    for spec in order:
        mem_id, offset = placed[spec]
        size = spec.allocated_memory
        if size and (mem_id != arena or offset >= end):  # a new object starts here
            current, arena, end = count, mem_id, offset
            count += 1
        if size:
            end = max(end, offset + size)
            ids[spec] = current
        else:  # meets nothing: an object of its own, the current one goes on
            ids[spec] = count
            count += 1
    return ids


def verify_result(result: MemoryAlgoResult, graph_module: Any, signature: Any, *,
                  check: str = "memplan") -> None:
    """What ``Verifier.verify_storage_reuse`` proves, on ``result`` before ExecuTorch writes
    it: `memplan.executorch.spec_check`'s sweep reading the result (``check="memplan"``),
    or the Verifier itself (``"executorch"``: the specs carry the result while it runs,
    their own values after). The pass's flags (inputs, outputs, mutable buffers allocated
    or not) are read off which specs ``result`` holds. `InvalidPlanError` when it fails."""
    specs = result.spec_dict
    nodes = graph_module.graph.nodes
    groups = (get_graph_input_tensors(nodes, signature), get_graph_output_tensors(nodes),
              _get_mutable_buffer_specs(nodes, signature))
    # allocated: some spec of the group is in the result, or it has none to allocate
    inputs, outputs, buffers = [any(s in specs for s in group) or all(s.const for s in group)
                                for group in groups]
    if check == "memplan":
        check_storage(collect_specs_from_nodes(
            nodes, signature, ignore_graph_input=not inputs, ignore_graph_output=not outputs,
            ignore_mutable_buffers=not buffers, do_assertion=False, ignore_out_var_node=False),
            placed=specs, name=spec_namer(graph_module))
        return
    saved = {s: (s.mem_id, s.mem_offset, s.mem_obj_id) for s in specs}
    try:
        for spec, alloc in specs.items():
            spec.mem_id, spec.mem_offset, spec.mem_obj_id = \
                alloc.mem_id, alloc.mem_offset, alloc.mem_obj_id
        Verifier(graph_module, inputs, outputs, buffers, signature).verify_storage_reuse()
    except Exception as error:  # ExecuTorch's InternalError or AssertionError
        raise InvalidPlanError([f"ExecuTorch's Verifier: {error}"]) from error
    finally:
        for spec, (mem_id, offset, obj) in saved.items():
            spec.mem_id, spec.mem_offset, spec.mem_obj_id = mem_id, offset, obj


def algorithm(time_limit: float | None = 10.0, *, fallback: str | None = None,
              verify: bool | str = True, seed: int = 0, threads: int | None = None,
              workers: int | None = None
              ) -> MemplanAlgorithm:
    """memplan as an algorithm of ``MemoryPlanningAlgorithmSuite(algo_list=[...])``:
    ``time_limit`` seconds per graph (None: until proven optimal), ``fallback="greedy"``
    to hand what it cannot plan to ExecuTorch's greedy with a warning, ``verify`` to check
    each plan as ExecuTorch's Verifier does (True: memplan's sweep; "executorch": the
    Verifier's pairwise check; False: none). A bad time limit, seed, worker count or
    check is refused here (`ProblemError`)."""
    threads = renamed_keyword("workers", workers, "threads", threads,
                              where="algorithm")
    return MemplanAlgorithm(SolveOptions(time_limit=time_limit, seed=seed, threads=threads),
                            fallback=fallback, verify=verify)
