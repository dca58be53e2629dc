"""ExecuTorch's ``MemoryPlanningPass`` with memplan as its algorithm, every plan verified.

One line for a user::

    config = ExecutorchBackendConfig(
        memory_planning_pass=memplan.executorch.memory_planning_pass(time_limit=10))
    program = to_edge(exported).to_executorch(config)

`MemplanPlanningPass` is ExecuTorch's pass (its options mean what they mean
there: ``alloc_graph_input``, ``alloc_graph_output``,
``alloc_mutable_buffers``, ``share_mutable_buffers``, ``alignment``), whose
suite holds one algorithm, `memplan.executorch.spec_planner.MemplanAlgorithm`.
ExecuTorch's pass verifies storage reuse only for an algorithm named
``greedy`` (its default suite is not: it never does); after each graph this
one runs `verify_graph` with the pass's own flags: graph inputs and outputs
allocated as configured (ExecuTorch's ``Verifier``, linear; ExecuTorch's pass checks
the graph's own, this one its subgraphs'), then what the
Verifier's pairwise storage check proves (no two live tensors on shared bytes
unless one is stored in the other, ``mem_obj_id`` consistent) as one sweep
over time (`memplan.executorch.spec_check`, O(n log n); ``verify="executorch"``
runs the Verifier's own O(n^2) check instead), on the graph and on each
control-flow subgraph, and two checks of the arenas' sizes that the Verifier
leaves out: every planned tensor ends within its arena
(``non_const_buffer_sizes``), and no tensor of a graph lies in the bytes
reserved below it for its subgraphs.
"""

from __future__ import annotations

from typing import Any

from executorch.exir.memory_planning import (
    MemoryPlanningAlgorithmSuite,
    Verifier,
    collect_specs_from_nodes,
    get_cond_nodes,
    get_map_nodes,
    get_scan_nodes,
    get_while_nodes,
)
from executorch.exir.passes import MemoryPlanningPass

from memplan.budget import Stopwatch
from memplan.errors import InvalidPlanError, ProblemError, renamed_keyword
from memplan.executorch.spec_check import check_mode, check_storage, spec_namer
from memplan.executorch.spec_planner import GraphReport, MemplanAlgorithm
from memplan.executorch.target_regions import algorithm


class MemplanPlanningPass(MemoryPlanningPass):
    """ExecuTorch's memory planning pass, planned by memplan and verified after each graph."""

    def __init__(self, algorithm: MemplanAlgorithm, *, verify: bool | str = True,
                 **pass_options: Any):
        super().__init__(memory_planning_algo=MemoryPlanningAlgorithmSuite([algorithm]),
                         **pass_options)
        self.algorithm = algorithm
        self.verify = check_mode(verify)  # `verify_graph` after each graph: "memplan"'s
        # sweep, "executorch"'s Verifier, or None

    @property
    def reports(self) -> list[GraphReport]:
        """One per graph planned, in order: plans, status, proven gap, seconds."""
        return self.algorithm.reports

    def run(self, graph_module, graph_signature=None):
        result = super().run(graph_module, graph_signature)
        if not self.verify:
            return result
        watch = Stopwatch()
        verify_graph(graph_module, graph_signature, alloc_graph_input=self.alloc_graph_input,
                     alloc_graph_output=self.alloc_graph_output,
                     alloc_mutable_buffers=self.alloc_mutable_buffers
                     and not self.share_mutable_buffers,
                     allow_overlap=self.allow_lifetime_and_storage_overlap,
                     storage=None if self.algorithm.verify else self.verify, io=False)
        check_regions = getattr(self.algorithm, "check_regions", None)
        if check_regions is not None:  # a target memory map: every region within its size
            check_regions(graph_module)
        if self.reports:  # the graph's own report comes after its subgraphs'; added to
            # the algorithm's own check of its plan, when it ran one
            self.reports[-1].verify_seconds += watch.elapsed()
        return result


def verify_graph(graph_module, signature=None, *, alloc_graph_input: bool = True,
                 alloc_graph_output: bool = True, alloc_mutable_buffers: bool = True,
                 allow_overlap: bool = False, storage: str | None = "memplan",
                 io: bool = True) -> None:
    """Check a planned graph and its control-flow subgraphs (see the module docstring);
    `InvalidPlanError` naming what is wrong. The storage check: ``"memplan"``'s sweep,
    O(specs log specs); ``"executorch"``: the Verifier's pairwise one, O(specs^2);
    None leaves it out (the algorithm ran it on its own plan). ``io=False`` leaves out
    the Verifier's check of the graph's own inputs and outputs (ExecuTorch's pass ran it
    with the same flags; the subgraphs' are checked here)."""
    verifier = Verifier(graph_module, alloc_graph_input, alloc_graph_output,
                        alloc_mutable_buffers, signature)
    try:
        if io:
            verifier.verify_graph_input_output()
        if storage == "executorch":
            verifier.verify_storage_reuse(allow_overlap)
    except Exception as error:  # ExecuTorch's InternalError or AssertionError
        raise InvalidPlanError([f"ExecuTorch's Verifier: {error}"]) from error
    if storage == "memplan":
        check_storage(collect_specs_from_nodes(
            graph_module.graph.nodes, signature, ignore_graph_input=not alloc_graph_input,
            ignore_graph_output=not alloc_graph_output,
            ignore_mutable_buffers=not alloc_mutable_buffers, do_assertion=False,
            ignore_out_var_node=False), allow_overlap=allow_overlap,
            name=spec_namer(graph_module))
    sizes = graph_module.meta.get("non_const_buffer_sizes") or []
    reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
    for spec in collect_specs_from_nodes(
            graph_module.graph.nodes, signature, ignore_graph_input=not alloc_graph_input,
            ignore_graph_output=not alloc_graph_output,
            ignore_mutable_buffers=not alloc_mutable_buffers, do_assertion=False,
            ignore_out_var_node=False):
        mem_id, offset, size = spec.mem_id, spec.mem_offset, spec.allocated_memory
        if mem_id is None or offset is None:
            continue  # left to the runtime (unbound dynamic shapes); the Verifier saw it
        if mem_id >= len(sizes) or offset + size > sizes[mem_id]:
            raise InvalidPlanError([f"a tensor of {size} bytes at {offset} in mem_id {mem_id} "
                                    f"ends beyond its arena {sizes[mem_id:mem_id + 1]}"])
        if size and mem_id < len(reserved) and offset < reserved[mem_id]:
            raise InvalidPlanError([f"a tensor at {offset} in mem_id {mem_id} lies in the "
                                    f"{reserved[mem_id]} bytes reserved for subgraphs"])
    for node, inputs in _subgraphs(graph_module):
        verify_graph(getattr(graph_module, node.target), signature, alloc_graph_input=inputs,
                     storage=storage)


def _subgraphs(graph_module) -> list[tuple[Any, bool]]:
    """The control-flow subgraphs' ``get_attr`` nodes, each with whether its inputs are
    planned in it (``map`` and ``scan``: yes), as ExecuTorch plans them."""
    found = [(node.args[k], False) for node in get_cond_nodes(graph_module) for k in (1, 2)]
    found += [(node.args[k], False) for node in get_while_nodes(graph_module) for k in (0, 1)]
    found += [(node.args[0], True) for node in get_map_nodes(graph_module)]
    found += [(node.args[0], True) for node in get_scan_nodes(graph_module)]
    return found


def memory_planning_pass(time_limit: float | None = 10.0, *, fallback: str | None = None,
                         verify: bool | str = True, seed: int = 0, threads: int | None = None,
                         regions: Any = None, objective: str | None = None,
                         relative_gap: float | None = None, cpu: float | str | None = "auto",
                         banks: Any = None,
                         workers: int | None = None,
                         **pass_options: Any) -> MemplanPlanningPass:
    """ExecuTorch's memory planning pass planned by memplan, ``time_limit`` seconds per
    graph; ``fallback="greedy"`` hands what memplan cannot plan (or the storage check
    rejects: it then runs inside the algorithm) to ExecuTorch's greedy with a warning
    (default: refused). ``verify``: the checks after each graph, True (or "memplan")
    with memplan's sweep, "executorch" with ExecuTorch's pairwise Verifier, False none.
    ``regions``: ExecuTorch's ``TargetMemoryMap``, every buffer in one of its banks (a
    region each), planned for ``objective`` (``"traffic"``, the default, or
    ``"slow_arena"``: see `memplan.executorch.target_regions`), stopping once proven within
    ``relative_gap`` (1 % by default; 0: the optimum, or the time limit) or once its
    search took ``cpu`` CPU seconds (by default a share of the export's own cost, after the
    graph's nodes: `memplan.executorch.target_regions.search_cpu`; None: the time limit
    alone). ``banks``: the old name of ``regions``, for one release. ``pass_options`` are
    ExecuTorch's (``alloc_graph_input``, ``alignment``...)."""
    regions = renamed_keyword("banks", banks, "regions", regions)
    threads = renamed_keyword("workers", workers, "threads", threads,
                              where="memory_planning_pass")
    if regions is not None and pass_options.get("share_mutable_buffers"):
        raise ProblemError("share_mutable_buffers is not supported with regions (ExecuTorch "
                           "keeps arena 2 for shared state)")
    mode = check_mode(verify)
    inside = mode if fallback is not None else None
    return MemplanPlanningPass(algorithm(time_limit, fallback=fallback, verify=inside,
                                         seed=seed, threads=threads, regions=regions,
                                         objective=objective, relative_gap=relative_gap,
                                         cpu=cpu),
                               verify=mode, **pass_options)
