"""An ExecuTorch program (``.pte``) as the problem of one of its memory arenas.

Why: a ``.pte`` is what ExecuTorch deploys, planned at export by its greedy
planner. Re-planning the file itself (``memplan solve model.pte -o
planned.pte``) needs no model source and no re-export.

Steps (`pte_layout`):

- read the file with ExecuTorch's own serialisation (``executorch.exir._serialize``,
  internal to ExecuTorch: memplan pins ``executorch==1.5.1`` and refuses other
  versions);
- choose the execution plan (``method``: the only one unless named) and the
  arena (``mem_id``: each memory id is an arena of its own, allocated
  separately by the runtime, so each is one `Problem`; the only non-constant
  one unless named; id 0 holds constants);
- rebuild every planned tensor's lifetime from the instruction chain
  (`memplan.frontends.executorch_chain`); static views become aliases of their
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

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memplan.errors import ProblemError, require
from memplan.frontends.executorch_chain import accesses, lifetimes
from memplan.problem import Alias, Buffer, Problem, Step

EXECUTORCH_VERSION = "1.5.1"  # the version whose internal serialisation memplan reads
QUIET_LOGGERS = ("torchao", "torch.utils._pytree")  # log warnings while ExecuTorch imports
ALIGNMENT = 16  # ExecuTorch's MemoryPlanningPass default
ITEM_BYTES = {"BYTE": 1, "CHAR": 1, "SHORT": 2, "INT": 4, "LONG": 8, "HALF": 2, "FLOAT": 4,
              "DOUBLE": 8, "COMPLEX32": 4, "COMPLEX64": 8, "COMPLEX128": 16, "BOOL": 1,
              "QINT8": 1, "QUINT8": 1, "QINT32": 4, "BFLOAT16": 2, "QUINT4x2": 1,
              "QUINT2x4": 1, "BITS16": 2, "FLOAT8E5M2": 1, "FLOAT8E4M3FN": 1,
              "FLOAT8E5M2FNUZ": 1, "FLOAT8E4M3FNUZ": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8}


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


def check_version() -> None:
    """Import ExecuTorch's serialisation, refusing a version other than the pinned one (it
    is internal); the warnings torchao and torch log while importing are silenced."""
    __version__ = require("executorch.version", "executorch", "reading .pte files").__version__
    if __version__.split("+")[0] != EXECUTORCH_VERSION:
        raise ProblemError(f"memplan reads .pte files with executorch=={EXECUTORCH_VERSION} "
                           f"(its serialisation is internal), found {__version__}")
    import torch  # noqa: F401 (torch sets its loggers' levels when imported: before ours)

    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        import executorch.exir._serialize  # noqa: F401
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def read_program(model: str | os.PathLike | bytes) -> tuple[Any, str]:
    """(ExecuTorch's ``PTEFile``, the file's name) of a ``.pte`` path or its bytes."""
    file = "<bytes>" if isinstance(model, bytes | bytearray) else str(model)
    if isinstance(model, bytes | bytearray):
        data = bytes(model)
    else:
        try:
            data = Path(model).read_bytes()
        except OSError as error:
            raise ProblemError(f"cannot read: {error.strerror}", file=file) from None
    if data[4:6] != b"ET":
        raise ProblemError("not an ExecuTorch program (no 'ET' file identifier)", file=file)
    check_version()
    from executorch.exir._serialize import _deserialize_pte_binary

    try:
        return _deserialize_pte_binary(data), file
    except Exception as error:  # noqa: BLE001 (a damaged file fails anywhere in the reader)
        raise ProblemError(f"not a readable ExecuTorch program ({type(error).__name__}: "
                           f"{error})", file=file) from None


def tensor_bytes(tensor: Any, *, file: str, value: int) -> int:
    """Bytes of a tensor's data at its (upper-bound) sizes."""
    name = tensor.scalar_type.name
    if name not in ITEM_BYTES:
        raise ProblemError(f"value {value}: unknown scalar type {name}", file=file)
    return math.prod(tensor.sizes) * ITEM_BYTES[name]


def _planned(plan: Any) -> bool:
    """Whether an execution plan has tensors in a non-constant arena (a constant method,
    such as ExecuTorch's ``get_max_seq_len``, has none)."""
    from executorch.exir import schema

    return any(isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None
               for v in plan.values)


def default_method(program: Any, file: str) -> int:
    """The execution plan read when none is named: the only one, else ``forward``, else
    the only one with a memory plan; refused naming the candidates."""
    plans = program.execution_plan
    names = [p.name for p in plans]
    if len(plans) == 1:
        return 0
    if "forward" in names:
        return names.index("forward")
    planned = [k for k, p in enumerate(plans) if _planned(p)]
    if len(planned) == 1:
        return planned[0]
    raise ProblemError(f"{len(plans)} execution plans ({', '.join(names)}), "
                       f"{len(planned)} with a memory plan: name one (method=..., "
                       f"--method)", file=file)


def _choose(program: Any, method: str | None, mem_id: int | None, file: str):
    from executorch.exir import schema

    plans = program.execution_plan
    names = [p.name for p in plans]
    index = default_method(program, file) if method is None else \
        names.index(method) if method in names else -1
    if index < 0:
        raise ProblemError(f"no execution plan {method!r}; the program has "
                           f"{', '.join(names)}", file=file)
    plan = plans[index]
    used = sorted({v.val.allocation_info.memory_id for v in plan.values
                   if isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None})
    if mem_id is None and len(used) > 1:
        raise ProblemError(f"execution plan {plan.name!r} uses arenas (memory ids) "
                           f"{used}: name one (mem_id=...)", file=file)
    mem_id = used[0] if mem_id is None and used else mem_id
    if mem_id is None or mem_id not in used:
        raise ProblemError(f"execution plan {plan.name!r} plans no tensor in memory id "
                           f"{mem_id}", file=file)
    sharing = [p.name for p in plans if p is not plan and mem_id > 1 and any(
        isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None
        and v.val.allocation_info.memory_id == mem_id for v in p.values)]
    if sharing:  # ExecuTorch's shared mutable buffers: one arena for every method
        raise ProblemError(f"memory id {mem_id} of execution plan {plan.name!r} is shared "
                           f"with {', '.join(sharing)} (shared mutable buffers); memplan "
                           f"re-plans one method's arena", file=file)
    return index, plan, mem_id


def pte_layout(model: str | os.PathLike | bytes, *, method: str | None = None,
               mem_id: int | None = None, alignment: int = ALIGNMENT) -> PteLayout:
    """The `PteLayout` of one arena of a ``.pte`` program; see the module docstring."""
    pte, file = read_program(model)
    from executorch.exir import schema

    index, plan, mem_id = _choose(pte.program, method, mem_id, file)
    planned, span, empty = set(), {}, []
    for v, value in enumerate(plan.values):
        tensor = value.val
        if isinstance(tensor, schema.Tensor) and tensor.allocation_info is not None \
                and tensor.allocation_info.memory_id == mem_id:
            size = tensor_bytes(tensor, file=file, value=v)
            offset = tensor.allocation_info.memory_offset
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
        raise ProblemError(f"method {plan.name!r}: {error.reason}", file=file) from None
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
    steps += [Step(f"#{i}", op, tuple(f"v{v}" for v in reads), tuple(f"v{v}" for v in writes))
              for i, (op, reads, writes) in enumerate(found.steps)]
    stem = "program" if file == "<bytes>" else Path(file).stem
    several = len(pte.program.execution_plan) > 1
    name = f"{stem}.{plan.name}" if method is not None or several else stem
    problem = Problem(buffers, aliases=aliases, name=name, source=file, steps=steps)
    offsets = np.array([span[v][0] for v in values], np.int64)
    arena = int(plan.non_const_buffer_sizes[mem_id])
    extent = int((offsets + problem.sizes).max()) if values else 0
    layout = PteLayout(file, plan.name, index, mem_id, problem, values, offsets, arena,
                       max(arena - extent, 0), any(lives[v].kind == "state" for v in values),
                       tuple(empty))
    _check_original(layout)
    return layout


def _check_original(layout: PteLayout) -> None:
    """Refuse the file when its own offsets are no valid plan of the rebuilt problem."""
    from memplan.validate import validate

    offsets = dict(zip(layout.problem.ids, layout.offsets.tolist(), strict=True))
    for violation in validate(layout.problem, offsets):
        if violation.kind in ("overlap", "alias", "conflict"):
            raise ProblemError(f"method {layout.method!r}: the program's own plan puts "
                               f"{' and '.join(violation.buffers)} on shared bytes while the "
                               f"rebuilt lifetimes say both are live ({violation.message}); "
                               f"memplan cannot rebuild this program safely",
                               file=layout.file)


def read_pte(model: str | os.PathLike | bytes, *, method: str | None = None,
             mem_id: int | None = None, alignment: int = ALIGNMENT) -> Problem:
    """The `Problem` of one arena of a ``.pte`` program (`pte_layout`'s problem)."""
    return pte_layout(model, method=method, mem_id=mem_id, alignment=alignment).problem
