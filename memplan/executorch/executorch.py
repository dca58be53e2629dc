"""PyTorch programs through ExecuTorch in, `Problem` out: what ExecuTorch's pass plans.

`from_executorch` takes what a PyTorch user holds at each stage of lowering:

- an ``ExportedProgram`` (``torch.export.export``): lowered with ``to_edge``,
  then as an edge program;
- an ``EdgeProgramManager`` (``to_edge``): lowered with ``to_executorch``
  (``config``: an ``ExecutorchBackendConfig``, ExecuTorch's default when
  None) on a deep copy (``to_executorch`` rewrites the graphs it lowers, so
  the user's program stays as it was), then as an ExecuTorch program;
- an ``ExecutorchProgramManager``: the tensors its memory planning pass
  placed (those with an offset, constants left out), with the sizes,
  lifetimes, alignment and arenas they were planned with
  (`memplan.executorch.executorch_specs`), and the graph's nodes as steps;
- a path to a ``.pte`` file: read by `memplan.executorch.executorch_pte`.

A program holds methods (``method``: ``forward`` by default, or the only one)
and each method one or more arenas (``mem_id``; 1 unless a custom pass set
others): ``method`` and ``mem_id`` choose; a method not there, or an arena
left open among several, is refused naming the valid ones. Whatever ExecuTorch refuses while
lowering comes back as `ProblemError` with ExecuTorch's first line.
Cost: one lowering (seconds for a small model), then O(nodes).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from memplan.errors import ProblemError, require
from memplan.problem import Problem

KINDS = ("ExportedProgram", "EdgeProgramManager", "ExecutorchProgramManager")


def from_executorch(program: Any, *, method: str | None = None, mem_id: int | None = None,
                    config: Any = None) -> Problem:
    """The problem ExecuTorch plans for ``program`` (see the module docstring)."""
    if isinstance(program, str | os.PathLike):
        if Path(program).suffix.lower() != ".pte":
            raise ProblemError("not a .pte file; from_executorch reads ExecuTorch programs",
                               file=str(program))
        from memplan.executorch.executorch_pte import read_pte

        return read_pte(program, method=method, mem_id=mem_id)
    kind = type(program).__name__
    if kind not in KINDS:
        raise ProblemError(f"from_executorch takes an {', '.join(KINDS)} or a .pte path, "
                           f"not {kind}")
    if kind != "ExecutorchProgramManager":
        program = _lowered(program, config)
    return planned_problem(program, method=method, mem_id=mem_id)


def _lowered(program: Any, config: Any) -> Any:
    """``program`` lowered to an ExecuTorch program manager, without touching it."""
    _need_executorch()
    from executorch.exir import EdgeProgramManager, to_edge

    try:
        edge = program if isinstance(program, EdgeProgramManager) else to_edge(program)
        return copy.deepcopy(edge).to_executorch(config)
    except Exception as error:  # whatever ExecuTorch refuses, in one line
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ProblemError(f"ExecuTorch could not lower the program: {first}") from error


def planned_problem(program: Any, *, method: str | None = None, mem_id: int | None = None
                    ) -> Problem:
    """The problem of one method and arena of a planned ``ExecutorchProgramManager``."""
    layout, mem_id = _arena(program, method, mem_id)
    return layout.problems[mem_id]


def planned_offsets(program: Any, *, method: str | None = None, mem_id: int | None = None
                    ) -> dict[str, int]:
    """The offsets ExecuTorch's pass gave the buffers of `planned_problem`, by buffer id:
    the program's own plan, for memplan's validator and plots (``Plan.from_offsets``).
    Measured from the arena's planned part (above its subgraphs' reserved bytes)."""
    layout, mem_id = _arena(program, method, mem_id)
    base = layout.bases[mem_id]
    return {layout.names[spec]: spec.mem_offset - base for spec in layout.roots[mem_id]}


def _arena(program: Any, method: str | None, mem_id: int | None) -> tuple[Any, int]:
    """The layout of ``program``'s method and the arena chosen (see the module docstring)."""
    _need_executorch()
    from executorch.exir.memory_planning import collect_specs_from_nodes

    from memplan.executorch.executorch_specs import spec_layout

    if type(program).__name__ != "ExecutorchProgramManager":
        raise ProblemError(f"expected an ExecutorchProgramManager, not {type(program).__name__}")
    methods = sorted(program.methods)
    if method is None and len(methods) == 1:
        method = methods[0]
    method = "forward" if method is None else method
    if method not in methods:
        raise ProblemError(f"no method {method!r}; the program has "
                           f"{', '.join(methods) or 'none'}")
    exported = program.exported_program(method)
    graph_module = exported.graph_module
    specs = [spec for spec in collect_specs_from_nodes(
        graph_module.graph.nodes, exported.graph_signature, do_assertion=False)
        if spec.mem_offset is not None]
    alignment = max((spec.alignment for spec in specs), default=1)  # the pass's: no change
    layout = spec_layout(specs, graph_module, alignment=alignment,
                         signature=exported.graph_signature, name=method)
    arenas = sorted(layout.problems)
    if mem_id is None:
        if len(arenas) > 1:
            raise ProblemError(f"method {method!r} plans several arenas: choose mem_id= "
                               f"{', '.join(map(str, arenas))}")
        mem_id = arenas[0] if arenas else 1
    if mem_id not in layout.problems:
        raise ProblemError(f"method {method!r} has no tensors planned in mem_id {mem_id}; "
                           f"arenas: {', '.join(map(str, arenas)) or 'none'}")
    return layout, mem_id


def _need_executorch() -> None:
    """Refuse in one line (`MissingExtraError`) when the ``executorch`` extra is missing."""
    require("executorch", "executorch", "planning PyTorch programs")
