"""A Relax function rewritten to memplan's plan: one storage per device, tensors at offsets.

Before (``StaticPlanBlockMemory``'s output), one storage per reuse chain::

    storage  = R.memory.alloc_storage(R.shape([4194304]), 0, "global", "float32")
    alloc    = R.memory.alloc_tensor(storage, 0, R.shape([784, 1024]), "float32", 0)
    storage1 = R.memory.alloc_storage(R.shape([40960]), 0, "global", "float32")
    alloc1   = R.memory.alloc_tensor(storage1, 0, R.shape([8, 1024]), "float32", 0)

After, one arena per device and every tensor at memplan's offset, wrapped so
that TVM's kernels (which assert ``byte_offset == 0``) see a view starting at
its data::

    memplan_arena = R.memory.alloc_storage(R.shape([4259840]), 0, "global", "uint8")
    alloc_at      = R.memory.alloc_tensor(memplan_arena, 1048576, R.shape([784, 1024]), ...)
    alloc         = R.memory.ensure_zero_offset(alloc_at)
    alloc1        = R.memory.alloc_tensor(memplan_arena, 0, R.shape([8, 1024]), ...)

The arena replaces the device's first planned storage binding (so it comes
before every tensor in it); the other storages go. The tensors keep their
variables, so nothing after them changes. `read_back` reads the offsets from
the rewritten function and validates them against the problem: the rewrite
itself is checked, not only the plan. Cost: O(bindings).
"""

from __future__ import annotations

from typing import Any

from tvm import relax

from memplan.errors import InvalidPlanError
from memplan.plan import Plan
from memplan.tvm.relax import ALIGNMENT, RelaxLayout
from memplan.tvm.relax_walk import call_name
from memplan.validate import check

ARENA = "memplan_arena"


def rewrite_function(mod: Any, name: str, planned: dict[int, tuple[RelaxLayout, Plan]]) -> Any:
    """``mod[name]`` with each device's tensors in one arena at the plan's offsets, read
    back and validated (`read_back`)."""
    storages, tensors = {}, {}
    for device, (layout, plan) in planned.items():
        arena = relax.Var(ARENA if not device else f"{ARENA}{device}", layout.storages[0].ty)
        for var in layout.storages:
            storages[var] = (arena, plan.arena_size, device) if var.same_as(
                layout.storages[0]) else None
        offsets = dict(zip(layout.problem.ids, plan.offsets.tolist(), strict=True))
        for buffer_id, var in layout.tensors.items():
            tensors[var] = (arena, offsets[buffer_id])
    new = _rebuilt(mod, name, lambda binding: _rewritten(binding, storages, tensors))
    for layout, plan in planned.values():
        read_back(new, layout, plan)
    return new


def _rebuilt(mod: Any, name: str, each: Any) -> Any:
    """``mod[name]`` with every top-level binding replaced by the bindings ``each`` gives
    for it, normalized in its module."""
    func = mod[name]
    blocks = [type(block)([new for binding in block.bindings for new in each(binding)])
              for block in func.body.blocks]
    body = relax.SeqExpr(blocks, func.body.body)
    new = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)
    return relax.transform.Normalize()(tvm_module(mod, name, new))[name]


def tvm_module(mod: Any, name: str, func: Any) -> Any:
    """A copy of ``mod`` with ``func`` as ``name`` (to normalize it in its module)."""
    copy = mod.clone() if hasattr(mod, "clone") else type(mod)(dict(mod.functions.items()))
    copy[name] = func
    return copy


def _rewritten(binding: Any, storages: dict[Any, Any], tensors: dict[Any, Any]) -> list[Any]:
    var, value = binding.var, binding.value
    if var in storages:
        if storages[var] is None:
            return []
        arena, size, device = storages[var]
        call = relax.op.memory.alloc_storage(relax.ShapeExpr([size]), device, "global",
                                             "uint8")
        return [relax.VarBinding(arena, call)]
    if var in tensors:
        arena, offset = tensors[var]
        args = list(value.args)
        call = relax.op.memory.alloc_tensor(arena, offset, args[2], args[3], args[4])
        if offset == 0:
            return [relax.VarBinding(var, call)]
        raw = relax.Var(f"{var.name}_at", var.ty)
        return [relax.VarBinding(raw, call),
                relax.VarBinding(var, relax.op.memory.ensure_zero_offset(raw))]
    return [binding]


def _allocations(func: Any, prefix: str) -> tuple[dict, dict, dict]:
    """The storages of ``func`` whose names start with ``prefix`` (var -> bytes), the
    tensors allocated in them (var -> (storage, offset)), and every ``ensure_zero_offset``
    (its var -> its argument), in one walk over the bindings."""
    storage_bytes, alloc_of, views = {}, {}, {}
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not isinstance(value, relax.Call):
                continue
            kind = call_name(value)
            if kind == "relax.memory.alloc_storage" and binding.var.name.startswith(prefix):
                storage_bytes[binding.var] = int(value.args[0].values[0].value)
            elif kind == "relax.memory.alloc_tensor" and value.args[0] in storage_bytes:
                alloc_of[binding.var] = (value.args[0], int(value.args[1].value))
            elif kind == "relax.memory.ensure_zero_offset":
                views[binding.var] = value.args[0]
    return storage_bytes, alloc_of, views


def read_back(func: Any, layout: RelaxLayout, plan: Plan) -> None:
    """Validate the offsets the rewritten ``func`` gives ``layout``'s tensors against its
    problem, and the arena's size; `InvalidPlanError` naming what is wrong."""
    offsets = {}
    ids = {var: buffer_id for buffer_id, var in layout.tensors.items()}
    arena_bytes, alloc_of, views = _allocations(func, ARENA)
    for view, raw in views.items():
        if raw in alloc_of:
            alloc_of[view] = alloc_of[raw]
    for var, buffer_id in ids.items():
        if var not in alloc_of:
            raise InvalidPlanError([f"tensor {buffer_id!r} is not in memplan's arena after "
                                    f"the rewrite of {layout.function!r}"])
        arena, offset = alloc_of[var]
        offsets[buffer_id] = offset
        size = int(layout.problem.sizes[layout.problem.index(buffer_id)])
        if offset % 64 or offset + size > arena_bytes[arena]:
            raise InvalidPlanError([f"tensor {buffer_id!r} at {offset} does not fit its "
                                    f"arena of {arena_bytes[arena]} bytes"])
    if len({alloc_of[var][0] for var in ids}) > 1:
        raise InvalidPlanError([f"the tensors of {layout.function!r} on device "
                                f"{layout.device} are in more than one arena"])
    check(layout.problem, offsets)


STORAGE = "memplan_storage"


def rewrite_shared(mod: Any, name: str,
                   planned: dict[int, tuple[RelaxLayout, list[list[str]]]]) -> Any:
    """``mod[name]`` with each device's tensors in memplan's shared storages: one
    ``alloc_storage`` per group (as large as its largest tensor), every tensor at offset 0
    of its group's storage, no ``ensure_zero_offset``; read back and validated
    (`read_back_shared`). ``planned``: per device, its layout (the storages that give
    way and their tensors) and the groups of tensor ids."""
    storages, tensors = {}, {}
    for device, (layout, groups) in planned.items():
        sizes = dict(zip(layout.problem.ids, layout.problem.sizes.tolist(), strict=True))
        first = layout.storages[0]
        made = []
        for k, group in enumerate(groups):
            var = relax.Var(f"{STORAGE}{device}_{k}" if device else f"{STORAGE}{k}",
                            first.ty)
            made.append((var, max(sizes[i] for i in group), device))
            for buffer_id in group:
                tensors[layout.tensors[buffer_id]] = (var, 0)
        for var in layout.storages:
            storages[var] = made if var.same_as(first) else []
    new = _rebuilt(mod, name, lambda binding: _storage_bindings(storages[binding.var])
                   if binding.var in storages else _rewritten(binding, {}, tensors))
    for layout, groups in planned.values():
        read_back_shared(new, layout, groups)
    return new


def _storage_bindings(made: list[tuple[Any, int, int]]) -> list[Any]:
    return [relax.VarBinding(var, relax.op.memory.alloc_storage(
        relax.ShapeExpr([size]), device, "global", "uint8")) for var, size, device in made]


def read_back_shared(func: Any, layout: RelaxLayout, groups: list[list[str]]) -> None:
    """Check the rewritten ``func``: each tensor of ``groups`` at offset 0 of a storage of
    memplan's, with no ``ensure_zero_offset`` on it, fitting it, and the storages' tensors
    never live at once (the validator, over the storages laid end to end);
    `InvalidPlanError` naming what is wrong."""
    storage_bytes, alloc_of, views = _allocations(func, STORAGE)
    zero_offset = set(views.values())
    problem = layout.problem
    bases, top, offsets = {}, 0, {}
    for group in groups:
        for buffer_id in group:
            var = layout.tensors[buffer_id]
            if var not in alloc_of or var in zero_offset:
                raise InvalidPlanError([f"tensor {buffer_id!r} of {layout.function!r} is not "
                                        f"alone at offset 0 of a memplan storage"])
            storage, offset = alloc_of[var]
            size = int(problem.sizes[problem.index(buffer_id)])
            if offset or size > storage_bytes[storage]:
                raise InvalidPlanError([f"tensor {buffer_id!r} at {offset} does not fit its "
                                        f"storage of {storage_bytes[storage]} bytes"])
            if storage not in bases:
                bases[storage] = top
                top += -(-storage_bytes[storage] // ALIGNMENT) * ALIGNMENT
            offsets[buffer_id] = bases[storage]
    check(problem, offsets)
