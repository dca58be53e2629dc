"""TVM's default Relax build pipeline with memplan's pass right after ``StaticPlanBlockMemory``.

Use it wherever TVM takes a Relax pipeline::

    executable = relax.build(mod, target, relax_pipeline=memplan.tvm.pipeline(time_limit=10))
    with target:
        lowered = memplan.tvm.pipeline()(mod)

The passes are those ``tvm.compile`` (``relax.build``) runs by default for
the target given or the current one (``relax.build`` enters its target), in
the same order (`memplan.tvm.relax.default_passes`): on a GPU target
the target's own pipeline (``relax.get_default_pipeline``: library
dispatch, legalization and fusion, dataflow lowering, finalization), on a
CPU the generic ``default_build_pipeline`` (no fusion, which could drop a
side-effecting call whose result is unused); only memplan's pass is added.
``reports`` holds the pass's `memplan.tvm.FunctionReport` per function and
device, of every run.
"""

from __future__ import annotations

from typing import Any

import tvm

from memplan.errors import MemplanError, ProblemError, renamed_keyword
from memplan.tvm.relax import default_passes
from memplan.tvm.relax_pass import memory_planning_pass, rethrow, typed_errors

PLANNER = "StaticPlanBlockMemory"  # memplan's pass runs right after it


@tvm.transform.module_pass(opt_level=0, name="MemplanPipeline")
class _Pipeline:
    """The pipeline as one module pass; see the module docstring."""

    def __init__(self, planning: Any, target: Any = None):
        self.planning = planning  # the `memplan.tvm.MemplanPlanMemory` pass
        self.target = target
        self.error: MemplanError | None = None  # what the last run raised, for `rethrow`

    @property
    def reports(self) -> list[Any]:
        """The planning pass's reports, one per function and device, of every run."""
        return self.planning.reports

    @typed_errors
    def transform_module(self, mod: Any, ctx: Any) -> Any:
        target = self.target or tvm.target.Target.current(allow_none=True)
        if target is None:
            raise ProblemError("memplan.tvm.pipeline needs a target: pass target=, or run it "
                               "inside 'with target:' (relax.build does)")
        target = tvm.target.Target(target) if isinstance(target, str | dict) else target
        with target:
            return tvm.transform.Sequential(self.passes(target))(mod)

    def passes(self, target: Any) -> list[Any]:
        """The pipeline's passes for ``target``: ``tvm.compile``'s, memplan's pass after
        ``StaticPlanBlockMemory``."""
        passes = default_passes(target)
        cut = [p.info.name for p in passes].index(PLANNER) + 1
        return passes[:cut] + [self.planning] + passes[cut:]


class MemplanPipeline(_Pipeline):
    """The pipeline (see the module docstring); called on a module, it raises memplan's
    own errors (inside ``relax.build``, TVM's ``RuntimeError`` carries their message)."""

    def __call__(self, mod: Any) -> Any:
        return rethrow(super().__call__, mod, self._inst, self._inst.planning._inst)


def pipeline(time_limit: float | None = 10.0, *, target: Any = None,
             fallback: str | None = None, seed: int = 0, threads: int | None = None,
             workers: int | None = None,
             **solve_options: Any) -> Any:
    """The Relax pipeline ``tvm.compile`` runs for ``target`` (default: the current target)
    with `memplan.tvm.memory_planning_pass` after ``StaticPlanBlockMemory``; the options are
    the pass's."""
    threads = renamed_keyword("workers", workers, "threads", threads,
                              where="pipeline")
    planning = memory_planning_pass(time_limit, fallback=fallback, seed=seed,
                                    threads=threads, **solve_options)
    return MemplanPipeline(planning, target)
