"""One walk over a Relax function after ``StaticPlanBlockMemory``: its planned tensors,
their sizes at the upper bounds, and the calls that use them.

`FunctionWalk` reads the function's top-level bindings in order (the rules
are those of `memplan.tvm.relax`'s docstring):

- candidate storages: ``R.memory.alloc_storage`` of constant size in global
  memory; one used for anything but an ``alloc_tensor`` at offset 0 among
  the top-level bindings (an ``If`` branch, a call, the return value) is
  dropped, and its tensors stay Relax's;
- each ``R.memory.alloc_tensor`` on a candidate is one tensor, sized from
  its shape at the upper bounds of the function's symbolic dimensions;
- which tensors each variable may hold, as a nested tuple of sets (tuples
  keep their fields apart, as Relax's planner does): aliases pass their
  input's tensors on;
- every other call is a step; a kernel call (a ``PrimFunc``, a packed
  function, ``call_tir_dyn``) uses the tensors its arguments hold; any other
  call, a branch or the return value holding a planned tensor is refused.

Cost: O(bindings + uses), plus TVM's free-variable walk of each binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memplan.errors import ProblemError

EMPTY: frozenset[str] = frozenset()
VIEWS = ("relax.reshape", "relax.memory.view", "relax.memory.ensure_zero_offset",
         "vm.builtin.reshape")  # their result holds their first argument's tensors
ALLOCATIONS = ("relax.memory.alloc_storage", "relax.memory.alloc_tensor",
               "relax.builtin.alloc_tensor")


@dataclass
class PlannedTensor:
    """An ``alloc_tensor`` in one of Relax's storages: one buffer."""

    id: str
    var: Any  # the binding's var
    storage: Any  # the storage var it is allocated in
    size: int  # bytes at the upper bounds
    binding: int  # its binding's position among the top-level bindings


@dataclass
class CallStep:
    """A call among the top-level bindings; its planned tensors, once known."""

    name: str  # the kernel's name, or the operator's for another call
    op: str  # call_tir (a PrimFunc), call_packed, call_tir_dyn, or the operator
    binding: int
    uses: set[str] = field(default_factory=set)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


class FunctionWalk:
    """See the module docstring."""

    def __init__(self, module: Any, func: Any, name: str, source: str | None = None):
        from tvm import relax

        self.relax, self.module, self.name, self.source = relax, module, name, source
        body = func.body
        if not isinstance(body, relax.SeqExpr):
            raise ProblemError(f"function {name!r}: its body is no sequence of bindings",
                               file=source)
        self.bindings = [b for block in body.blocks for b in block.bindings]
        self.result = body.body
        self.bounds = _bounded_analyzer(func)
        self.storage_size: dict[Any, int] = {}
        self.storage_device: dict[Any, int] = {}
        self._find_storages()
        self.tensors: list[PlannedTensor] = []
        self.steps: list[CallStep] = []
        self._walk()

    def storages_by_device(self) -> dict[int, list[Any]]:
        """The candidate storages that hold a tensor, per device, in binding order."""
        used = {t.storage for t in self.tensors}
        found: dict[int, list[Any]] = {}
        for var in self.storage_size:
            if var in used:
                found.setdefault(self.storage_device[var], []).append(var)
        return found

    def lifetime(self, tensor: PlannedTensor) -> tuple[int, int]:
        """Half-open steps from the first call using the tensor to one past the last; an
        unused tensor lives at the first call after its binding."""
        steps = [k for k, step in enumerate(self.steps) if tensor.id in step.uses]
        if not steps:
            after = [k for k, s in enumerate(self.steps) if s.binding > tensor.binding]
            first = after[0] if after else len(self.steps)
            return first, first + 1
        return steps[0], steps[-1] + 1

    def steps_of(self, ids: set[str]) -> list[CallStep]:
        """The steps, each with the tensors of ``ids`` it writes (first use) and reads."""
        seen: set[str] = set()
        for step in self.steps:
            mine = [i for i in sorted(step.uses) if i in ids]
            step.writes = [i for i in mine if i not in seen]
            step.reads = [i for i in mine if i in seen]
            seen.update(mine)
        return self.steps

    # the walk

    def _find_storages(self) -> None:
        relax = self.relax
        for binding in self.bindings:
            value = binding.value
            if not (isinstance(value, relax.Call)
                    and call_name(value) == "relax.memory.alloc_storage"):
                continue
            size, device, scope = value.args[0], _const(value.args[1]), value.args[2]
            values = list(getattr(size, "values", []))
            bytes_ = _const(values[0]) if len(values) == 1 else None
            if bytes_ is not None and device is not None \
                    and getattr(scope, "value", None) == "global":
                self.storage_size[binding.var] = bytes_
                self.storage_device[binding.var] = device
        for binding in self.bindings:  # any other use: left to Relax
            value = binding.value
            allocating = (isinstance(value, self.relax.Call)
                          and call_name(value) == "relax.memory.alloc_tensor"
                          and _const(value.args[1]) == 0)
            for var in self._free(value):
                if var in self.storage_size and not (allocating
                                                     and value.args[0].same_as(var)):
                    self._drop(var)
        for var in self._free(self.result):
            if var in self.storage_size:
                self._drop(var)

    def _drop(self, var: Any) -> None:
        self.storage_size.pop(var, None)
        self.storage_device.pop(var, None)

    def _walk(self) -> None:
        relax = self.relax
        held: dict[Any, Any] = {}
        ids: set[str] = set()
        for position, binding in enumerate(self.bindings):
            value, var = binding.value, binding.var
            name = call_name(value) if isinstance(value, relax.Call) else ""
            if name == "relax.memory.alloc_tensor" and value.args[0] in self.storage_size:
                tensor = self._tensor(var, value, position, ids)
                held[var] = frozenset({tensor.id})
            elif isinstance(binding, relax.MatchCast) or not isinstance(value, relax.Call):
                held[var] = self._held(value, held)
                if not isinstance(value, relax.Var | relax.Tuple | relax.TupleGetItem) \
                        and _leaves(held[var]):
                    self._refuse(var, _leaves(held[var]), type(value).__name__)
            elif name in VIEWS:
                held[var] = self._held(value.args[0], held)
            elif name not in ALLOCATIONS:
                self._call(binding, name, position, held)
        escaping = sorted(_leaves(self._held(self.result, held)))
        if escaping:
            tensor = next(t for t in self.tensors if t.id == escaping[0])
            self._fail(tensor.var, "a planned tensor the function returns")

    def _tensor(self, var: Any, call: Any, position: int, ids: set[str]) -> PlannedTensor:
        size = self._bytes(call.args[2], call.args[3], var)
        capacity = self.storage_size[call.args[0]]
        if size > capacity:
            self._fail(var, f"{size} bytes in a storage of {capacity}")
        tensor_id, n = var.name, 1
        while tensor_id in ids:
            n += 1
            tensor_id = f"{var.name}#{n}"
        ids.add(tensor_id)
        tensor = PlannedTensor(tensor_id, var, call.args[0], size, position)
        self.tensors.append(tensor)
        return tensor

    def _call(self, binding: Any, name: str, position: int, held: dict[Any, Any]) -> None:
        relax = self.relax
        value = binding.value
        used = set().union(*(_leaves(held.get(v, EMPTY)) for v in self._free(value)))
        if isinstance(value.op, relax.ExternFunc):
            kind = "call_packed"
        elif name == "relax.vm.call_tir_dyn":
            kind, name = "call_tir_dyn", _callee(value.args[0])
        elif self._is_prim_func(value.op):
            kind = "call_tir"
        else:  # no kernel: it may keep what it is given
            kind = name
            if used:
                self._refuse(binding.var, used, name)
        held[binding.var] = EMPTY
        self.steps.append(CallStep(name, kind, position, used))

    def _is_prim_func(self, op: Any) -> bool:
        from tvm import ir

        if not isinstance(op, ir.GlobalVar):
            return False
        return op in self.module.functions and not isinstance(self.module[op],
                                                              self.relax.Function)

    def _held(self, expr: Any, held: dict[Any, Any]) -> Any:
        relax = self.relax
        if isinstance(expr, relax.Var):
            return held.get(expr, EMPTY)
        if isinstance(expr, relax.Tuple):
            return tuple(self._held(f, held) for f in expr.fields)
        if isinstance(expr, relax.TupleGetItem):
            inner = self._held(expr.tuple_value, held)
            if isinstance(inner, tuple) and 0 <= expr.index < len(inner):
                return inner[expr.index]
            return _leaves(inner)
        return frozenset().union(*(_leaves(held.get(v, EMPTY)) for v in self._free(expr)))

    def _free(self, expr: Any) -> list[Any]:
        if isinstance(expr, self.relax.Var):
            return [expr]
        return list(self.relax.analysis.free_vars(expr))

    def _bytes(self, shape: Any, dtype: Any, var: Any) -> int:
        import tvm

        count = 1
        for dim in getattr(shape, "values", None) or self._fail(var, "no shape"):
            bound = self.bounds.const_int_bound(dim).max_value
            if bound >= 2 ** 62:  # unbounded: no tir_var_upper_bound for a dimension
                self._fail(var, f"dimension {dim} has no upper bound")
            count *= int(bound)
        kind = tvm.DataType(str(getattr(dtype, "value", dtype)))
        return count * -(-kind.bits * kind.lanes // 8)

    def _refuse(self, var: Any, tensors: set[str], where: str) -> None:
        self._fail(var, f"planned tensor(s) {', '.join(sorted(tensors))} reach {where}, "
                        f"which may keep them")

    def _fail(self, var: Any, why: str):
        raise ProblemError(f"function {self.name!r}, binding {var.name!r}: {why}; cannot be "
                           f"expressed", file=self.source)


def _callee(expr: Any) -> str:
    """The name of the function ``call_tir_dyn`` calls."""
    return str(getattr(expr, "name_hint", None) or getattr(expr, "global_symbol", expr))


def _bounded_analyzer(func: Any) -> Any:
    """TVM's arithmetic analyzer with each symbolic dimension of the signature bound to
    ``[tir_var_lower_bound or 0, tir_var_upper_bound]`` where the function says so."""
    import tvm
    from tvm import relax

    attrs = func.attrs or {}
    upper = dict(attrs["tir_var_upper_bound"]) if "tir_var_upper_bound" in attrs else {}
    lower = dict(attrs["tir_var_lower_bound"]) if "tir_var_lower_bound" in attrs else {}
    analyzer = tvm.sym.Analyzer()
    for var in relax.analysis.tir_vars_in_type(func.ty):
        if var.name in upper:
            low = int(lower.get(var.name, 0))
            analyzer.bind(var, tvm.ir.Range(low, int(upper[var.name]) + 1))
    return analyzer


def _leaves(held: Any) -> frozenset[str]:
    if isinstance(held, tuple):
        return frozenset().union(*map(_leaves, held))
    return held


def call_name(call: Any) -> str:
    """What ``call`` calls: an operator's name, a packed function's symbol, a global
    function's name."""
    op = call.op
    for attribute in ("name", "global_symbol", "name_hint"):
        value = getattr(op, attribute, None)
        if isinstance(value, str):
            return value
    return type(op).__name__


def _const(expr: Any) -> int | None:
    """The integer a ``PrimValue``/``IntImm`` holds, or None when it is symbolic."""
    value = getattr(expr, "value", None)
    if hasattr(value, "value"):  # a PrimValue around an IntImm
        value = value.value
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
