"""A plan written into its ``.pte`` ExecuTorch program: the program re-planned.

Why: ExecuTorch's runtime allocates each arena at the size the program states
(``non_const_buffer_sizes``) and puts every planned tensor where its
``allocation_info`` says. Rewriting those two, and nothing else, gives a
program that runs as before in less memory.

Steps (`planned_program`; `planned_program_by_method` re-plans several methods at
once):

- read the program and rebuild the arena's problem
  (`memplan.executorch.executorch_pte.pte_layout`); the plan must be one of that
  problem (same buffers, sizes and lifetimes) and valid, else refused;
- every planned tensor's ``memory_offset_low`` / ``memory_offset_high`` (the
  offset's low and high 32 bits) get the plan's offset (a zero-byte tensor
  offset 0: its old offset may lie past the new arena's end); the arena's
  ``non_const_buffer_sizes`` entry gets the plan's arena size plus the padding
  the program kept after its last tensor (delegates that read past a tensor's
  end rely on it);
- write those into the file's bytes (`memplan.executorch.pte_flatbuffer.
  with_allocations`: every other byte stays as it was, nothing imports torch
  or ExecuTorch);
- read the written program back with every check of the reader
  (`memplan.executorch.pte_verify`: what ExecuTorch's loader checks) and check
  it: the same problem, the plan's offsets, the plan valid (the frontend
  validates the program's own plan).

Cost: O(file size) to read and write, plus the frontend's.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from memplan.errors import InvalidPlanError, ProblemError
from memplan.executorch import pte_flatbuffer
from memplan.executorch.executorch_pte import PteLayout, pte_layout, read_program
from memplan.executorch.pte_flatbuffer import shown, with_allocations
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.validate import validate


def _allocations(layout: PteLayout, offsets: np.ndarray, arena_size: int):
    """`with_allocations`' moves and arena sizes that put the layout's tensors at
    ``offsets`` (problem order; zero-byte tensors at 0) in an arena ``arena_size`` large."""
    plan = layout.program.plans[layout.plan_index]
    moved = zip([*layout.values, *layout.empty],
                [*np.asarray(offsets).tolist(), *[0] * len(layout.empty)], strict=True)
    moves = {plan.values[v].allocation.reference: (layout.mem_id, int(offset))
             for v, offset in moved}
    return moves, {plan.arena_sizes_at + 8 * layout.mem_id: int(arena_size)}


def with_offsets(layout: PteLayout, offsets: np.ndarray, arena_size: int) -> bytes:
    """The program's bytes with the layout's tensors at ``offsets`` (problem order) and its
    arena ``arena_size`` bytes large; no check (`planned_program` checks)."""
    return with_allocations(layout.program, *_allocations(layout, offsets, arena_size))


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
    return planned_program_by_method(model, {method: (problem, plan)}, mem_id=mem_id)


def planned_program_by_method(model: str | os.PathLike | bytes,
                    plans: dict[str | None, tuple[Problem, Plan]], *,
                    mem_id: int | None = None) -> bytes:
    """The program's bytes with each named method (None: the default one) re-planned by
    its (problem, plan), as `planned_program`; read back and checked."""
    program = read_program(model)
    moves, sizes, layouts = {}, {}, []
    for method, (problem, plan) in plans.items():
        layout = pte_layout(program, method=method, mem_id=mem_id)
        same_problem(layout, problem)
        violations = validate(layout.problem, plan) or validate(problem, plan)
        if violations:
            raise InvalidPlanError(violations)
        moved, sized = _allocations(layout, plan.offsets, plan.arena_size + layout.tail)
        moves.update(moved)
        sizes.update(sized)
        layouts.append((layout, problem, plan))
    data = with_allocations(program, moves, sizes)
    rewritten = pte_flatbuffer.read_program(data, f"{program.file} (re-planned)")
    for layout, problem, plan in layouts:
        written = pte_layout(rewritten, method=layout.method, mem_id=layout.mem_id)
        same_problem(written, problem)
        if not np.array_equal(written.offsets, plan.offsets) or \
                written.arena_size != plan.arena_size + layout.tail:
            raise ProblemError(f"method {shown(layout.method)}: the re-planned program does not "
                               f"read back with the plan's offsets and arena size",
                               file=layout.file)
    return data


def write_planned_program(path: str | os.PathLike, model: str | os.PathLike | bytes,
                          problem: Problem, plan: Plan, **options: Any) -> None:
    """Write `planned_program` to ``path``."""
    write_program(path, planned_program(model, problem, plan, **options))


def write_program(path: str | os.PathLike, data: bytes) -> None:
    """Write a program's bytes to ``path`` atomically."""
    with open_replacing(path, "wb") as handle:
        handle.write(data)
