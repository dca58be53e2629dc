"""Apache TVM Relax modules in, `Problem` out: the tensors Relax's planner put in storages.

Relax plans intermediate memory in ``StaticPlanBlockMemory``: each tensor it
may plan becomes an ``R.memory.alloc_tensor`` at offset 0 of an
``R.memory.alloc_storage``, one tensor per storage at a time. Which tensors
it may plan is Relax's rule and stays so here: function outputs, tensors
used across binding blocks and tensors passed to calls other than kernels
keep their own ``R.builtin.alloc_tensor``. `from_relax` reads the module
right after that pass:

- a module not yet lowered (``relax.frontend.nn``'s ``export_tvm``, the
  zero pipeline's output, TVMScript) is first lowered through the pipeline
  ``tvm.compile`` runs for the target (`default_passes`) up to
  ``StaticPlanBlockMemory`` (`lower_to_planned`);
- per function and device, every ``alloc_tensor`` on a storage of constant
  size in global memory is one buffer; storages of symbolic size (a
  dimension without ``tir_var_upper_bound``), of another memory scope, or
  used inside ``If`` branches stay Relax's and are left out;
- sizes come from the shape and dtype, each symbolic dimension at its
  upper bound (``tir_var_upper_bound``, as Relax sizes its storages);
- steps are the calls of the function's top-level bindings in order, each
  named by its kernel (the ``PrimFunc`` or packed function called); a
  buffer lives from the first to one past the last call that reads or
  writes it, followed through trivial bindings, views and reshapes
  (``R.reshape``, ``R.memory.view``, ``ensure_zero_offset``,
  ``vm.builtin.reshape``), tuples and ``match_cast``, as
  ``KillAfterLastUse`` later kills them;
- alignment 64 (``kAllocAlignment``: the VM's allocations and the offsets
  at which ``ensure_zero_offset`` makes a view, not a copy).

A planned tensor that escapes (returned, captured by a branch, passed to a
call that may keep it) cannot be expressed and is refused naming the
function and binding. Cost: one walk over the bindings, O(bindings + uses).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memplan.errors import ProblemError, require
from memplan.problem import Buffer, Problem, Step
from memplan.tvm.relax_walk import FunctionWalk, call_name

ALIGNMENT = 64  # TVM's kAllocAlignment
PLANNED = ("relax.memory.alloc_storage", "relax.memory.alloc_tensor")  # the planner's output
UNPLANNED = ("relax.builtin.alloc_tensor",)  # CallTIRRewrite's allocations, its input


@dataclass
class RelaxLayout:
    """One function's planned tensors on one device, as Relax's pass left them."""

    function: str
    device: int  # the storages' virtual device index
    problem: Problem
    storages: list[Any]  # the planned ``alloc_storage`` bindings' vars, in order
    storage_bytes: list[int]  # their sizes
    tensors: dict[str, Any] = field(default_factory=dict)  # buffer id -> alloc_tensor's var
    relax_offsets: dict[str, int] = field(default_factory=dict)  # storages end to end
    storage_of: dict[str, Any] = field(default_factory=dict)  # buffer id -> its storage var

    @property
    def relax_bytes(self) -> int:
        """What Relax allocates for these tensors: the sum of its storages."""
        return sum(self.storage_bytes)

    def only(self, storages: list[Any]) -> RelaxLayout:
        """The layout of ``storages`` (some of this one's) and their tensors alone."""
        keep = [k for k, var in enumerate(self.storages) if any(var.same_as(s) for s in storages)]
        kept = [self.storages[k] for k in keep]
        ids = [i for i, var in self.storage_of.items() if any(var.same_as(s) for s in kept)]
        problem = self.problem
        sub = Problem([problem.buffer(problem.index(i)) for i in ids], name=problem.name,
                      source=problem.source, steps=problem.steps)
        return RelaxLayout(self.function, self.device, sub, kept,
                           [self.storage_bytes[k] for k in keep],
                           {i: self.tensors[i] for i in ids},
                           {i: self.relax_offsets[i] for i in ids},
                           {i: self.storage_of[i] for i in ids})


def from_relax(module: Any, function: str | None = "forward", *, device: int | None = None,
               target: Any = "llvm") -> Problem:
    """The problem of ``function``'s planned tensors on ``device`` (see the module
    docstring). ``module``: an ``IRModule`` or a TVMScript ``.py`` file; lowered for
    ``target`` first when it has not been through ``StaticPlanBlockMemory``."""
    source = None
    if isinstance(module, str | os.PathLike):
        source = str(module)
        module = read_tvmscript(module)
    module = lower_to_planned(module, target)
    name = function_name(module, function, source)
    layouts = relax_layouts(module, name, source=source)
    if device is None:
        if len(layouts) > 1:
            raise ProblemError(f"function {name!r} plans tensors on several devices: choose "
                               f"device= {', '.join(map(str, sorted(layouts)))}", file=source)
        device = next(iter(layouts), 0)
    if device not in layouts:
        if layouts:
            raise ProblemError(f"function {name!r} plans no tensor on device {device}; "
                               f"devices: {', '.join(map(str, sorted(layouts)))}", file=source)
        return Problem([], name=name, source=source, steps=())
    return layouts[device].problem


def read_tvmscript(path: str | os.PathLike) -> Any:
    """The ``IRModule`` of a TVMScript file (as ``IRModule.script()`` writes it); parsed,
    never run: `memplan.tvm.relax_script` refuses any other Python first."""
    require("tvm", "tvm", "reading Relax modules")
    from memplan.tvm.relax_script import parse_script

    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ProblemError(f"cannot read: {error.strerror or error}", file=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProblemError(f"not UTF-8 text: byte 0x{data[error.start]:02x} at offset "
                           f"{error.start}", file=str(path)) from None
    try:
        parsed = parse_script(text, str(path))
    except ProblemError:
        raise
    except Exception as error:  # TVM's parser reports in many types
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ProblemError(f"not a TVMScript module: {first}", file=str(path)) from None
    if type(parsed).__name__ != "IRModule":
        raise ProblemError("holds a single function, not a module (@I.ir_module)",
                           file=str(path))
    return parsed


def function_name(module: Any, function: str | None, source: str | None = None) -> str:
    """``function`` if the module has that Relax function; the only one when ``function``
    is None or ``"forward"`` is missing; else refused naming the valid ones."""
    names = relax_functions(module)
    if function in names:
        return function
    if len(names) == 1 and function in (None, "forward"):
        return names[0]
    raise ProblemError(f"no Relax function {function!r}; the module has "
                       f"{', '.join(names) or 'none'}", file=source)


def relax_functions(module: Any) -> list[str]:
    """The names of the module's Relax functions, sorted."""
    from tvm import relax

    return sorted(gv.name_hint for gv, func in module.functions.items()
                  if isinstance(func, relax.Function))


def lower_to_planned(module: Any, target: Any = "llvm") -> Any:
    """``module`` after ``tvm.compile``'s pipeline for ``target`` up to
    ``StaticPlanBlockMemory``: as it is when it has Relax's storages already, through that
    pass alone when it has only ``R.builtin.alloc_tensor`` (lowered up to it)."""
    require("tvm", "tvm", "reading Relax modules")
    import tvm

    if _has_ops(module, PLANNED):
        return module
    if _has_ops(module, UNPLANNED):
        return tvm.relax.transform.StaticPlanBlockMemory()(module)
    target = tvm.target.Target(target) if isinstance(target, str) else target
    passes = default_passes(target)
    cut = [i for i, p in enumerate(passes) if p.info.name == "StaticPlanBlockMemory"]
    with target:
        return tvm.transform.Sequential(passes[:cut[0] + 1])(module)


def default_passes(target: Any) -> list[Any]:
    """The passes of the Relax pipeline ``tvm.compile`` runs for ``target`` by default, as a
    list, so that a pass can be put among them: on a GPU target (``"gpu"`` in its keys) the
    target's own (``relax.get_default_pipeline``), elsewhere the generic one
    (`build_passes`), which keeps side-effecting calls whose results are unused."""
    import importlib

    if "gpu" not in target.keys:
        return build_passes()
    kind = target.kind.name
    backend = {"cuda": "cuda", "rocm": "rocm"}.get(kind, "gpu_generic")
    if kind == "opencl" and "adreno" in target.keys:
        backend = "adreno"
    stages = importlib.import_module(f"tvm.relax.backend.{backend}.pipeline")
    return (stages.library_dispatch_passes(target) + stages.legalize_passes(target)
            + stages.dataflow_lower_passes(target) + stages.finalize_passes(target))


def build_passes() -> list[Any]:
    """The passes of ``relax.pipeline.default_build_pipeline`` (which builds them inside
    its pass, out of reach), in its order; ``tests/test_tvm.py`` holds them equal to it."""
    from tvm.relax import backend, transform

    return [backend.DispatchSampling(), backend.DispatchSortScan(), transform.LegalizeOps(),
            transform.RewriteDataflowReshape(), transform.ToNonDataflow(),
            transform.RemovePurityChecking(), transform.CallTIRRewrite(),
            transform.StaticPlanBlockMemory(), transform.RewriteCUDAGraph(),
            transform.LowerAllocTensor(), transform.KillAfterLastUse(),
            transform.LowerRuntimeBuiltin(), transform.ComputePrimValue(),
            transform.VMShapeLower(), transform.AttachGlobalSymbol()]


def _has_ops(module: Any, names: tuple[str, ...]) -> bool:
    from tvm import relax

    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and call_name(expr) in names:
            found.append(expr)

    for func in module.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
            if found:
                return True
    return False


def relax_layouts(module: Any, function: str, *, source: str | None = None,
                  alignment: int = ALIGNMENT) -> dict[int, RelaxLayout]:
    """Per device, the planned tensors of ``function`` in a module after
    ``StaticPlanBlockMemory`` (see the module docstring)."""
    func = module[function]
    walk = FunctionWalk(module, func, function, source)
    layouts = {}
    for device, storages in walk.storages_by_device().items():
        tensors = [t for t in walk.tensors if t.storage in storages]
        buffers, ids, offsets, bases, held = [], {}, {}, {}, {}
        for var in storages:  # Relax's storages end to end, each at a multiple of 64
            bases[var] = sum(-(-walk.storage_size[s] // alignment) * alignment
                             for s in bases)
        for tensor in tensors:
            start, end = walk.lifetime(tensor)
            buffers.append(Buffer(tensor.id, tensor.size, start, end, alignment=alignment))
            ids[tensor.id] = tensor.var
            offsets[tensor.id] = bases[tensor.storage]
            held[tensor.id] = tensor.storage
        steps = [Step(name=s.name, op=s.op, reads=tuple(s.reads), writes=tuple(s.writes))
                 for s in walk.steps_of(set(ids))]
        problem = Problem(buffers, name=f"{function} (device {device})" if device
                          else function, source=source, steps=steps)
        layouts[device] = RelaxLayout(function, device, problem, list(storages),
                                      [walk.storage_size[s] for s in storages], ids, offsets,
                                      held)
    return layouts
