"""An ExecuTorch program (``.pte``) as the problem of one of its memory arenas.

Why: a ``.pte`` is what ExecuTorch deploys, planned at export by its greedy
planner. Re-planning the file itself (``memplan solve model.pte -o
planned.pte``) needs no model source and no re-export.

Steps (`pte_layout`):

- read the file's flatbuffer (`memplan.executorch.pte_flatbuffer`: schema
  ``ET12``, other schemas refused; neither torch nor ExecuTorch is imported);
- choose the execution plan (``method``: the only one unless named) and the
  arena (``mem_id``: each memory id is an arena of its own, allocated
  separately by the runtime, so each is one `Problem`; the only non-constant
  one unless named; id 0 holds constants);
- rebuild every planned tensor's lifetime from the instruction chain
  (`memplan.executorch.executorch_chain`); static views become aliases of their
  base; sizes are the tensor's bytes rounded up to ``alignment`` (16, as
  ExecuTorch's planner), offsets aligned to it;
- check that the program's own offsets are a valid plan of the rebuilt
  problem: when they are not, the lifetimes were not rebuilt faithfully and the
  file is refused, the two tensors named.

Buffer ids are ``v<index>``, the tensor's index in the plan's values; step
``#i`` is instruction ``i``, its op the operator's name and overload.
Cost: reading the file, plus the chain's (see there).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memplan.errors import ProblemError
from memplan.executorch import pte_flatbuffer
from memplan.executorch.executorch_chain import Access, accesses, lifetimes
from memplan.executorch.pte_flatbuffer import ExecutionPlan, Program, Tensor, listed, shown
from memplan.problem import Alias, Buffer, Problem, Step

ALIGNMENT = 16  # ExecuTorch's MemoryPlanningPass default


@dataclass(frozen=True)
class PteLayout:
    """One arena of one execution plan: its problem and the program's own plan of it."""

    file: str
    method: str  # the execution plan's name
    plan_index: int  # its position in the program
    mem_id: int  # the arena
    problem: Problem
    values: tuple[int, ...]  # per buffer (problem order), the tensor's index in the values
    offsets: np.ndarray  # per buffer, the offset the program gives it
    arena_size: int  # non_const_buffer_sizes[mem_id]: what the runtime allocates
    tail: int  # arena_size minus the end of the last tensor: padding kept when re-planned
    stateful: bool  # some tensor is persistent state (a mutable buffer)
    empty: tuple[int, ...] = ()  # the arena's zero-byte tensors: no buffer, offset 0 when written
    program: Program | None = field(default=None, repr=False, compare=False)  # the file read


def read_program(model: str | os.PathLike | bytes) -> Program:
    """The `Program` of a ``.pte`` path or its bytes."""
    file = "<bytes>" if isinstance(model, bytes | bytearray) else str(model)
    if isinstance(model, bytes | bytearray):
        data = bytes(model)
    else:
        try:
            data = Path(model).read_bytes()
        except OSError as error:
            raise ProblemError(f"cannot read: {error.strerror}", file=file) from None
    return pte_flatbuffer.read_program(data, file)


def tensor_bytes(tensor: Tensor, *, file: str, value: int) -> int:
    """Bytes of a tensor's data at its (upper-bound) sizes."""
    if not tensor.item_bytes:
        raise ProblemError(f"value {value}: unknown scalar type {tensor.scalar_type}",
                           file=file)
    return math.prod(tensor.sizes) * tensor.item_bytes


def planned_methods(program: Program) -> list[str]:
    """The execution plans with a memory plan, in program order."""
    return [plan.name for plan in program.plans if plan.planned()]


def default_method(program: Program) -> int:
    """The execution plan read when none is named: the only one, else ``forward``, else
    the only one with a memory plan; refused naming the candidates."""
    names = [p.name for p in program.plans]
    if len(names) == 1:
        return 0
    if "forward" in names:
        return names.index("forward")
    planned = planned_methods(program)
    if len(planned) == 1:
        return names.index(planned[0])
    raise ProblemError(f"{len(names)} execution plans ({listed(names)}), "
                       f"{len(planned)} with a memory plan: name one (method=..., "
                       f"--method)", file=program.file)


def _arenas(plan: ExecutionPlan) -> set[int]:
    return {v.allocation.memory_id for v in plan.values
            if isinstance(v, Tensor) and v.allocation is not None}


def _choose(program: Program, method: str | None, mem_id: int | None):
    file, plans = program.file, program.plans
    names = [p.name for p in plans]
    index = default_method(program) if method is None else \
        names.index(method) if method in names else -1
    if index < 0:
        raise ProblemError(f"no execution plan {method!r}; the program has "
                           f"{listed(names)}", file=file)
    plan = plans[index]
    used = sorted(_arenas(plan))
    if mem_id is None and len(used) > 1:
        raise ProblemError(f"execution plan {shown(plan.name)} uses arenas (memory ids) "
                           f"{used}: name one (mem_id=...)", file=file)
    mem_id = used[0] if mem_id is None and used else mem_id
    if mem_id is None or mem_id not in used:
        raise ProblemError(f"execution plan {shown(plan.name)} plans no tensor in memory id "
                           f"{mem_id}", file=file)
    sharing = [p.name for p in plans if p is not plan and mem_id > 1 and mem_id in _arenas(p)]
    if sharing:  # ExecuTorch's shared mutable buffers: one arena for every method
        raise ProblemError(f"memory id {mem_id} of execution plan {shown(plan.name)} is shared "
                           f"with {listed(sharing)} (shared mutable buffers); memplan "
                           f"re-plans one method's arena", file=file)
    return index, plan, mem_id


def pte_layout(model: str | os.PathLike | bytes | Program, *, method: str | None = None,
               mem_id: int | None = None, alignment: int = ALIGNMENT) -> PteLayout:
    """The `PteLayout` of one arena of a ``.pte`` program; see the module docstring. The
    same program read again (`read_program` keeps the last ones) gives the same layout."""
    program = model if isinstance(model, Program) else read_program(model)
    return _layout(program, method, mem_id, alignment)


@functools.lru_cache(maxsize=4)
def _layout(program: Program, method: str | None, mem_id: int | None,
            alignment: int) -> PteLayout:
    file = program.file
    index, plan, mem_id = _choose(program, method, mem_id)
    planned, span, empty = set(), {}, []
    for v, tensor in enumerate(plan.values):
        if isinstance(tensor, Tensor) and tensor.allocation is not None \
                and tensor.allocation.memory_id == mem_id:
            size = tensor_bytes(tensor, file=file, value=v)
            offset = tensor.allocation.offset
            if size:
                planned.add(v)
                span[v] = (offset, offset + size)
            else:
                empty.append(v)
    try:
        found = accesses(plan, planned)
        inputs, outputs = set(plan.inputs) & planned, set(plan.outputs) & planned
        lives = lifetimes(found, span, inputs, outputs)
    except ProblemError as error:
        raise ProblemError(f"method {shown(plan.name)}: {error.reason}", file=file) from None
    values = tuple(sorted(lives))
    buffers, aliases = [], []
    for v in values:
        life = lives[v]
        size = -(-(span[v][1] - span[v][0]) // alignment) * alignment
        kind = "output" if v in outputs else "input" if v in inputs else "activation"
        buffers.append(Buffer(f"v{v}", size, life.start, life.end, alignment, kind=kind))
        if life.base is not None:
            aliases.append(Alias(f"v{life.base}", f"v{v}", life.delta))
    steps = [Step("inputs", "", (), tuple(f"v{v}" for v in sorted(inputs)))]
    steps += _steps(plan, found)
    stem = "program" if file == "<bytes>" else Path(file).stem
    several = len(program.plans) > 1
    name = f"{stem}.{plan.name}" if method is not None or several else stem
    problem = Problem(buffers, aliases=aliases, name=name, source=file, steps=steps)
    offsets = np.array([span[v][0] for v in values], np.int64)
    arena = int(plan.arena_sizes[mem_id])
    extent = int((offsets + problem.sizes).max()) if values else 0
    layout = PteLayout(file, plan.name, index, mem_id, problem, values, offsets, arena,
                       max(arena - extent, 0), any(lives[v].kind == "state" for v in values),
                       tuple(empty), program)
    _check_original(layout)
    return layout


def _steps(plan: ExecutionPlan, found: Access) -> list[Step]:
    """One `Step` per instruction: the planned values it reads and writes, the constants it
    reads (tensors stored in the program or outside it, which no plan places), and in
    ``reads`` too every other value it reads that the run makes (an input or a tensor not
    planned, a value an instruction writes, such as a size); literals not."""
    constants = {v for v, value in enumerate(plan.values) if isinstance(value, Tensor)
                 and value.allocation is None and value.stored} - found.written
    runtime = set(plan.inputs) | found.written | {
        v for v, value in enumerate(plan.values) if isinstance(value, Tensor)
        and v not in constants}
    steps = []
    for (op, reads, writes), others in zip(found.steps, found.unplanned, strict=True):
        made = [v for v in dict.fromkeys(others) if v in runtime]
        steps.append(Step(f"#{len(steps)}", op, tuple(f"v{v}" for v in [*reads, *made]),
                          tuple(f"v{v}" for v in writes),
                          tuple(f"v{v}" for v in dict.fromkeys(others) if v in constants)))
    return steps


def _check_original(layout: PteLayout) -> None:
    """Refuse the file when its own offsets are no valid plan of the rebuilt problem."""
    from memplan.validate import validate

    offsets = dict(zip(layout.problem.ids, layout.offsets.tolist(), strict=True))
    for violation in validate(layout.problem, offsets):
        if violation.kind in ("overlap", "alias", "conflict"):
            raise ProblemError(f"method {shown(layout.method)}: the program's own plan puts "
                               f"{' and '.join(violation.buffers)} on shared bytes while the "
                               f"rebuilt lifetimes say both are live ({violation.message}); "
                               f"memplan cannot rebuild this program safely",
                               file=layout.file)


def read_pte(model: str | os.PathLike | bytes, *, method: str | None = None,
             mem_id: int | None = None, alignment: int = ALIGNMENT) -> Problem:
    """The `Problem` of one arena of a ``.pte`` program (`pte_layout`'s problem)."""
    return pte_layout(model, method=method, mem_id=mem_id, alignment=alignment).problem
