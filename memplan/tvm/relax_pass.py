"""memplan as a Relax module pass, right after ``StaticPlanBlockMemory``.

For every Relax function of the module and every device it plans tensors on:

- `memplan.tvm.relax.relax_layouts` reads the tensors Relax put in its
  storages (Relax's rules for what may be planned stay as they are);
- `memplan.solve` plans them within ``time_limit`` seconds (heuristics, then
  the exact planner: status and gap say how close to the optimum), and
  `memplan.validate.check` checks the plan;
- where memplan's arena is smaller than Relax's storages together, the
  function is rewritten (`memplan.tvm.rewrite`): one ``alloc_storage`` per
  device, every tensor at memplan's offset, wrapped in
  ``R.memory.ensure_zero_offset`` so that kernels see ``byte_offset`` 0 (a
  view on CPU and CUDA, since offsets are multiples of 64); the rewritten
  function is read back and its offsets validated once more.

On a device whose ``ensure_zero_offset`` copies (Metal, Vulkan, OpenCL,
WebGPU, ROCm: their device API has no pointer arithmetic on the host) the
pass plans *shared storages* instead (``form="shared"``, the default there):

- the storages of Relax's that are larger than the device's storage cap
  (`STORAGE_CAPS`, or ``storage_cap``) stay Relax's with their tensors, with a
  warning naming the tensors over the cap;
- the other tensors are planned by ``shared_objects_exact`` (warm-started by
  ``shared_objects`` and by Relax's own storages): each tensor gets a storage,
  no two tensors of one storage live at once, each storage as large as its
  largest tensor, their total least (its status and gap are those of the
  objects: `memplan.bounds.ranked_live_bound` and CP-SAT's bound);
- where their total is below Relax's, the function is rewritten
  (`memplan.tvm.rewrite.rewrite_shared`): one ``alloc_storage`` per group,
  every tensor at offset 0 of it, nothing copied; read back and validated.

Tensors of any dtypes share a storage: the planned storages are ``global``
scope, which every one of these devices allocates as an untyped buffer, and
the VM's ``alloc_tensor`` at offset 0 makes a view of any dtype (Relax's own
rule to reuse a storage only for one dtype is its heuristic's, not the
device's). ``form="offsets"`` keeps the one-arena form: on those devices it
leaves Relax's plan, with a warning, since a copy would lose the saving;
``form="shared"`` plans shared storages on CPU and CUDA as well. What cannot
be expressed is refused (`ProblemError` naming the function and binding), or
with ``fallback="relax"`` left to Relax with a warning. Every function gets a
`FunctionReport` in ``reports``, also logged (logger ``memplan.tvm``).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import tvm

from memplan.api import SolveOptions, solve
from memplan.bounds import lower_bound
from memplan.budget import Budget, Stopwatch
from memplan.errors import MemplanError, ProblemError, renamed_keyword
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.registry import plan_with
from memplan.tvm.relax import RelaxLayout, relax_functions, relax_layouts
from memplan.tvm.rewrite import rewrite_function, rewrite_shared
from memplan.validate import check

log = logging.getLogger("memplan.tvm")
ZERO_COPY = ("llvm", "c", "cuda")  # targets whose devices make offset views, not copies
# (their device API does pointer arithmetic on the host; ROCm's does not)
FALLBACKS = (None, "relax")
FORMS = (None, "offsets", "shared")
SHARED_PLANNER = "shared_objects_exact"
MiB = 1 << 20
ANY_KIND = "*"  # the cap of every target kind, when ``storage_cap`` is one number
STORAGE_CAPS: dict[str, int | None] = {  # bytes one storage may have, per target kind
    "webgpu": 128 * MiB,  # WebGPU's default maxStorageBufferBindingSize
    "vulkan": 128 * MiB,  # the least maxStorageBufferRange Vulkan lets a device report
    "metal": None, "opencl": None, "rocm": None,  # no per-buffer limit below memory
}


@dataclass
class FunctionReport:
    """One function on one device: Relax's bytes and memplan's, and what the pass did."""

    function: str
    device: int
    tensors: int
    relax_bytes: int  # Relax's storages together
    memplan_bytes: int  # the bytes the function now allocates for these tensors
    bound: int  # live-load lower bound
    status: str  # memplan's plan: optimal, feasible...; "relax" when Relax's plan stays
    gap: float  # proven gap of memplan's plan
    seconds: float
    action: str  # "planned", or why Relax's plan stays
    problem: Problem | None = None
    plan: Plan | None = None
    form: str = "offsets"  # memplan's plan: one arena ("offsets") or "shared" storages
    storages: int = 1  # the storages memplan's plan allocates (shared form: its groups)

    def line(self) -> str:
        """The report as one line."""
        saved = 1 - self.memplan_bytes / self.relax_bytes if self.relax_bytes else 0.0
        form = f"{self.storages} shared storages" if self.form == "shared" else "one arena"
        return (f"{self.function} (device {self.device}): {self.tensors} tensors, Relax "
                f"{self.relax_bytes:,} B, memplan {self.memplan_bytes:,} B in {form} "
                f"({saved:.1%} less), "
                f"bound {self.bound:,} B, {self.status}, gap {self.gap:.1%}, "
                f"{self.seconds:.2f} s: {self.action}")


def typed_errors(method):
    """``transform_module`` keeping memplan's error: TVM's pass machinery turns what a
    Python pass raises into its own ``RuntimeError``; `rethrow` raises the original."""

    def transform_module(self, mod: Any, ctx: Any) -> Any:
        try:
            return method(self, mod, ctx)
        except MemplanError as error:
            self.error = error
            raise

    return transform_module


def rethrow(run: Any, mod: Any, *passes: Any) -> Any:
    """``run(mod)``; on failure, the first memplan error one of ``passes`` kept, as it was
    raised (a `ProblemError` stays one), else TVM's."""
    for each in passes:
        each.error = None
    try:
        return run(mod)
    except Exception:
        for each in passes:
            if each.error is not None:
                raise each.error from None
        raise


@tvm.transform.module_pass(opt_level=0, name="MemplanPlanMemory")
class _PlanMemory:
    """The pass; see the module docstring. Build it with `memory_planning_pass`."""

    def __init__(self, options: SolveOptions, fallback: str | None = None,
                 form: str | None = None, storage_cap: int | dict | None = None):
        if fallback not in FALLBACKS:
            raise ProblemError(f"fallback must be None or 'relax', got {fallback!r}")
        if form not in FORMS:
            raise ProblemError(f"form must be None, 'offsets' or 'shared', got {form!r}")
        self.options = options
        self.fallback = fallback
        self.form = form
        self.caps = _caps(storage_cap)
        self.reports: list[FunctionReport] = []
        self.warned: set[str] = set()
        self.error: MemplanError | None = None  # what the last run raised, for `rethrow`

    @typed_errors
    def transform_module(self, mod: Any, ctx: Any) -> Any:
        target = tvm.target.Target.current(allow_none=True)
        for name in relax_functions(mod):
            try:
                layouts = relax_layouts(mod, name)
            except ProblemError as error:
                self._leave(name, error)
                continue
            rewritten, shared = {}, {}
            for device, layout in sorted(layouts.items()):
                kind = _device_kind(mod, device, target)
                form = self.form or ("offsets" if kind in ZERO_COPY else "shared")
                if form == "shared":
                    planned = self._plan_shared(layout, kind)
                    if planned is not None:
                        shared[device] = planned
                    continue
                if kind not in ZERO_COPY:
                    self._warn_device(kind)
                    self._keep(layout, f"left to Relax: {kind} copies offset tensors")
                    continue
                report = self._plan(layout)
                if report.action == "planned":
                    rewritten[device] = (layout, report.plan)
            if rewritten:
                mod[name] = rewrite_function(mod, name, rewritten)
            if shared:
                mod[name] = rewrite_shared(mod, name, shared)
        return mod

    def _plan_shared(self, layout: RelaxLayout, kind: str
                     ) -> tuple[RelaxLayout, list[list[str]]] | None:
        """The shared storages of ``layout``'s tensors within the device's cap, as
        (the layout of the storages they replace, groups of tensor ids), or None when
        Relax's stay (see the module docstring)."""
        watch = Stopwatch()
        cap = self.caps.get(kind, self.caps.get(ANY_KIND, STORAGE_CAPS.get(kind)))
        within = [var for var, size in zip(layout.storages, layout.storage_bytes, strict=True)
                  if cap is None or size <= cap]
        part = layout.only(within)
        if len(within) < len(layout.storages):
            self._warn_cap(layout, part, kind, cap)
        kept = layout.relax_bytes - part.relax_bytes  # Relax's storages over the cap
        problem = part.problem
        hint = Plan.from_offsets(problem, [part.relax_offsets[i] for i in problem.ids],
                                 planner="relax")
        plan = plan_with(SHARED_PLANNER, problem, budget=Budget.of_limit(self.options.time_limit),
                         seed=self.options.seed, hint=hint,
                         threads=self.options.threads or 0)
        check(problem, plan)  # the independent validator, again, before any rewrite
        by_offset: dict[int, list[str]] = {}
        for buffer_id, offset in zip(problem.ids, plan.offsets.tolist(), strict=True):
            by_offset.setdefault(offset, []).append(buffer_id)
        groups = list(by_offset.values())
        total = sum(max(int(problem.sizes[problem.index(i)]) for i in g) for g in groups)
        smaller = total < part.relax_bytes
        stats = plan.stats
        report = FunctionReport(
            layout.function, layout.device, len(problem), layout.relax_bytes,
            kept + (total if smaller else part.relax_bytes), kept + stats["objects_bound"],
            stats["objects_status"] if smaller else "relax",
            stats["objects_gap"] if smaller else 0.0, watch.elapsed(),
            "planned" if smaller else "kept Relax's: memplan's is no smaller", problem, plan,
            "shared", len(groups) if smaller else len(part.storages))
        self._report(report)
        return (part, groups) if smaller else None

    def _warn_cap(self, layout: RelaxLayout, part: RelaxLayout, kind: str, cap: int) -> None:
        problem = layout.problem
        left = [i for i in problem.ids if i not in part.tensors]
        over = [i for i in left if int(problem.sizes[problem.index(i)]) > cap] or left
        warnings.warn(f"memplan leaves tensor(s) {', '.join(over)} of {layout.function!r} "
                      f"(device {layout.device}) to Relax: larger than the {kind} storage cap "
                      f"of {cap:,} bytes", stacklevel=4)

    def _plan(self, layout: RelaxLayout) -> FunctionReport:
        watch = Stopwatch()
        problem = layout.problem
        plan = solve(problem, self.options)
        check(problem, plan)  # the independent validator, again, before any rewrite
        smaller = plan.arena_size < layout.relax_bytes
        report = FunctionReport(
            layout.function, layout.device, len(problem), layout.relax_bytes,
            plan.arena_size if smaller else layout.relax_bytes, lower_bound(problem),
            plan.status, plan.gap, watch.elapsed(),
            "planned" if smaller else "kept Relax's: memplan's is no smaller", problem, plan)
        self._report(report)
        return report

    def _keep(self, layout: RelaxLayout, action: str) -> None:
        problem = layout.problem
        self._report(FunctionReport(layout.function, layout.device, len(problem),
                                    layout.relax_bytes, layout.relax_bytes,
                                    lower_bound(problem), "relax", 0.0, 0.0, action, problem))

    def _leave(self, name: str, error: ProblemError) -> None:
        if self.fallback != "relax":
            raise error
        warnings.warn(f"memplan cannot plan {name!r} ({error.reason}); Relax's plan stays",
                      stacklevel=3)
        self._report(FunctionReport(name, 0, 0, 0, 0, 0, "relax", 0.0, 0.0,
                                    f"left to Relax: {error.reason}"))

    def _warn_device(self, kind: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            warnings.warn(f"memplan leaves Relax's plan on {kind} devices: their "
                          f"ensure_zero_offset copies a tensor at an offset", stacklevel=3)

    def _report(self, report: FunctionReport) -> None:
        self.reports.append(report)
        log.info("%s", report.line())


class MemplanPlanMemory(_PlanMemory):
    """The pass (see the module docstring); called on a module, it raises memplan's own
    errors."""

    def __call__(self, mod: Any) -> Any:
        return rethrow(super().__call__, mod, self._inst)


def _device_kind(mod: Any, device: int, target: Any) -> str:
    """The target kind of virtual device ``device``: the module's ``vdevice`` entry when it
    has one, else the current target's; ``"unknown"`` without either."""
    vdevices = list(mod.global_infos.get("vdevice", [])) if mod.global_infos else []
    if 0 <= device < len(vdevices):
        return vdevices[device].target.kind.name
    return target.kind.name if target is not None else "unknown"


def _caps(storage_cap: int | dict | None) -> dict[str, int | None]:
    """Per target kind, the largest storage: an int for every kind, a dict for some (the
    others keep `STORAGE_CAPS`), None for the defaults."""
    if storage_cap is None:
        return {}
    caps = storage_cap if isinstance(storage_cap, dict) else {ANY_KIND: storage_cap}
    for kind, cap in caps.items():
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ProblemError(f"storage_cap for {kind!r} must be a positive number of bytes "
                               f"or None, got {cap!r}")
    return dict(caps)


def memory_planning_pass(time_limit: float | None = 10.0, *, fallback: str | None = None,
                         seed: int = 0, threads: int | None = None,
                         workers: int | None = None, form: str | None = None,
                         storage_cap: int | dict | None = None,
                         **solve_options: Any) -> Any:
    """The Relax module pass planned by memplan, ``time_limit`` seconds per function and
    device; to run right after ``StaticPlanBlockMemory`` (`memplan.tvm.pipeline` puts it
    there). ``fallback="relax"`` leaves what memplan cannot express to Relax's plan with a
    warning (default: refused). ``form``: None (by target: one arena on CPU and CUDA, shared
    storages elsewhere), ``"offsets"`` or ``"shared"``; ``storage_cap``: the largest shared
    storage in bytes, for every target kind (an int) or per kind (a dict); default
    `STORAGE_CAPS`. ``solve_options`` are `SolveOptions` fields."""
    threads = renamed_keyword("workers", workers, "threads", threads,
                              where="memory_planning_pass")
    options = SolveOptions(time_limit=time_limit, seed=seed, threads=threads, **solve_options)
    return MemplanPlanMemory(options, fallback, form, storage_cap)


__all__ = ["STORAGE_CAPS", "FunctionReport", "MemplanPlanMemory", "memory_planning_pass"]
