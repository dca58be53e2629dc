"""A plan written into its ``.pte`` ExecuTorch program: the program re-planned.

Why: ExecuTorch's runtime allocates each arena at the size the program states
(``non_const_buffer_sizes``) and puts every planned tensor where its
``allocation_info`` says. Rewriting those two, and nothing else, gives a
program that runs as before in less memory.

Steps (`planned_program`):

- read the program and rebuild the arena's problem
  (`memplan.frontends.executorch_pte.pte_layout`); the plan must be one of that
  problem (same buffers, sizes and lifetimes) and valid, else refused;
- every planned tensor's ``memory_offset_low`` / ``memory_offset_high`` (the
  offset's low and high 32 bits) get the plan's offset (a zero-byte tensor
  offset 0: its old offset may lie past the new arena's end); the arena's
  ``non_const_buffer_sizes`` entry gets the plan's arena size plus the padding
  the program kept after its last tensor (delegates that read past a tensor's
  end rely on it);
- serialise with ExecuTorch's own writer (``executorch.exir._serialize``,
  version pinned): every other field comes back unchanged (the bytes may be
  laid out differently; `program_differences` compares two programs field by
  field).

Cost: O(file size) to read and write, plus the frontend's.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from memplan.errors import InvalidPlanError, ProblemError
from memplan.frontends.executorch_pte import PteLayout, pte_layout, read_program
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.validate import validate


def with_offsets(model: str | os.PathLike | bytes, layout: PteLayout, offsets: np.ndarray,
                 arena_size: int) -> bytes:
    """The program's bytes with the layout's tensors at ``offsets`` (problem order) and its
    arena ``arena_size`` bytes large; no check (`planned_program` checks)."""
    from executorch.exir._serialize import _serialize_pte_binary

    pte, _ = read_program(model)
    plan = pte.program.execution_plan[layout.plan_index]
    moved = zip([*layout.values, *layout.empty],
                [*np.asarray(offsets).tolist(), *[0] * len(layout.empty)], strict=True)
    for value, offset in moved:
        info = plan.values[value].val.allocation_info
        info.memory_offset_low = int(offset) & 0xFFFFFFFF
        info.memory_offset_high = int(offset) >> 32
    plan.non_const_buffer_sizes[layout.mem_id] = int(arena_size)
    return bytes(_serialize_pte_binary(pte, extract_delegate_segments=True))


def same_problem(layout: PteLayout, problem: Problem) -> None:
    """Refuse ``problem`` unless it has the layout's buffers, sizes and lifetimes."""
    mine = layout.problem
    if problem.ids != mine.ids:
        raise ProblemError("the plan was made for another program or arena (its buffers "
                           "differ from those of the program)", file=layout.file)
    for what in ("sizes", "starts", "ends"):
        if not np.array_equal(getattr(problem, what), getattr(mine, what)):
            k = int(np.flatnonzero(getattr(problem, what) != getattr(mine, what))[0])
            raise ProblemError(f"the plan was made for another program or other options: "
                               f"{what[:-1]} {getattr(problem, what)[k]} where the program "
                               f"has {getattr(mine, what)[k]}", file=layout.file,
                               buffer=mine.ids[k])


def planned_program(model: str | os.PathLike | bytes, problem: Problem, plan: Plan, *,
                    method: str | None = None, mem_id: int | None = None) -> bytes:
    """The program's bytes re-planned by ``plan`` (a plan of ``problem``, the arena's:
    alignments may be stricter than the program's, the rest must be the same)."""
    layout = pte_layout(model, method=method, mem_id=mem_id)
    same_problem(layout, problem)
    violations = validate(layout.problem, plan) or validate(problem, plan)
    if violations:
        raise InvalidPlanError(violations)
    return with_offsets(model, layout, plan.offsets, plan.arena_size + layout.tail)


def write_planned_program(path: str | os.PathLike, model: str | os.PathLike | bytes,
                          problem: Problem, plan: Plan, **options: Any) -> None:
    """Write `planned_program` to ``path``."""
    data = planned_program(model, problem, plan, **options)
    with open_replacing(path, "wb") as handle:
        handle.write(data)


def program_differences(a: str | os.PathLike | bytes, b: str | os.PathLike | bytes,
                        limit: int = 10_000) -> list[str]:
    """The paths of the fields where two programs differ (``execution_plan[0].values[5]
    .val.allocation_info.memory_offset_low``), constants and segments included."""
    first, second = read_program(a)[0], read_program(b)[0]
    found: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if len(found) >= limit:
            return
        if type(x) is not type(y):
            found.append(path)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), getattr(y, f.name), f"{path}.{f.name}")
        elif isinstance(x, list | tuple):
            if len(x) != len(y):
                found.append(path)
                return
            for k, (u, v) in enumerate(zip(x, y, strict=True)):
                walk(u, v, f"{path}[{k}]")
        elif isinstance(x, dict):
            if x.keys() != y.keys():
                found.append(path)
                return
            for key in x:
                walk(x[key], y[key], f"{path}[{key!r}]")
        elif x != y:
            found.append(path)

    walk(first, second, "pte")
    return found
