"""One benchmark run, in a process of its own: build the problem, plan, validate, measure.

The runner starts ``python -m benchmarks.worker '<json task>'`` once per run,
so the peak resident memory (``ru_maxrss``) is this run's alone and a hung
planner can be killed from outside. Steps:
- build the problem of (suite, case) in the task's mode, and its lower bound;
- load the planner registry (its imports: ortools...) and note the resident
  memory so far (imports and problem: the baseline);
- run the planner through `memplan.registry.plan_with`, timing the wall clock;
- check the plan with `memplan.validate.validate`; a plan that breaks its
  problem gets status ``INVALID`` and its first violations, never a figure
  that looks valid. A plan whose status is ``infeasible`` or ``unknown``
  (it does not claim to fit: the exact planner's time ran out) may exceed the
  capacity, but nothing else;
- print ``SETUP {json}`` (buffers, lower bound) before planning and
  ``RESULT {json}`` at the end, one line each, on stdout.

Failures are results too: ``no plan`` (`NoPlanError`), ``ERROR`` with the
exception, ``BELOW-BOUND`` when a valid plan beats the lower bound (a bug in
the bound or the validator).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULT_PREFIX = "RESULT "
SETUP_PREFIX = "SETUP "  # the problem's figures, printed before planning: kept on a timeout


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def import_plugins(names) -> None:
    """Import modules (by name, or ``.py`` files by path) that register more planners."""
    for name in names:
        if not name.endswith(".py"):
            importlib.import_module(name)
            continue
        module_name = f"benchmark_plugin_{Path(name).stem}"
        if module_name in sys.modules:  # imported already: it has registered its planners
            continue
        spec = importlib.util.spec_from_file_location(module_name, name)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {name}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


def _judge(problem, plan) -> tuple[str, list[str]]:
    """The status to report and the violations (as text) that make a plan invalid."""
    from memplan.validate import validate

    violations = validate(problem, plan, limit=100)
    if plan.status in ("infeasible", "unknown"):  # not claimed to fit: may exceed the capacity
        violations = [v for v in violations if v.kind != "capacity"]
    if violations:
        return "INVALID", [str(v) for v in violations]
    if plan.arena_size < plan.lower_bound:
        return "BELOW-BOUND", [f"arena {plan.arena_size} < lower bound {plan.lower_bound}"]
    return plan.status, []


def _note(problem, plan, violations: list[str]) -> str | None:
    """What the table must say beside the figures: violations, or an unknown plan's overflow."""
    if violations:
        return "; ".join(violations[:3])
    if plan.status == "unknown" and problem.capacity is not None \
            and plan.arena_size > problem.capacity:
        return (f"status unknown: no plan within the capacity {problem.capacity} found, "
                f"none proven impossible; the arena {plan.arena_size} exceeds it")
    return None


def run(task: dict[str, Any]) -> dict[str, Any]:
    """Run ``task`` (suite, case, mode, planner, time_limit, seed, options, imports) here."""
    from benchmarks.suites import find_case
    from memplan.bounds import lower_bound
    from memplan.errors import NoPlanError
    from memplan.registry import get_planner, plan_with

    result: dict[str, Any] = dict(task)
    began = time.perf_counter()
    try:
        import_plugins(task.get("imports") or ())
        get_planner(task["planner"])  # imports every planner now, not in the timed call
        problem = find_case(task["suite"], task["case"]).problem(task["mode"])
    except Exception as error:  # a missing frontend, data folder or plugin: this run only
        result.update(status="ERROR", error=f"cannot set up the run: "
                                            f"{type(error).__name__}: {error}")
        return result
    result.update(buffers=len(problem), capacity=problem.capacity,
                  lower_bound=lower_bound(problem), load_seconds=time.perf_counter() - began,
                  base_rss_mb=_rss_mb())
    print(SETUP_PREFIX + json.dumps(result, default=str), flush=True)
    options = dict(task.get("options") or {})
    if task.get("time_limit") is not None:
        options["time_limit"] = task["time_limit"]
    began = time.perf_counter()
    try:
        plan = plan_with(task["planner"], problem, seed=task.get("seed", 0), **options)
    except NoPlanError as error:
        result.update(status="no plan", seconds=time.perf_counter() - began, error=str(error))
        return result
    except Exception as error:  # reported in the table, loudly
        result.update(status="ERROR", seconds=time.perf_counter() - began,
                      error=f"{type(error).__name__}: {error}",
                      traceback=traceback.format_exc(limit=8))
        return result
    seconds = time.perf_counter() - began
    peak_rss_mb = _rss_mb()  # before the validator adds its own
    checked = time.perf_counter()
    status, violations = _judge(problem, plan)
    result.update(status=status, seconds=seconds, plan_seconds=plan.seconds,
                  validate_seconds=time.perf_counter() - checked, arena_size=plan.arena_size,
                  best_bound=plan.best_bound, gap=plan.gap, plan_status=plan.status,
                  violations=len(violations), error=_note(problem, plan, violations),
                  peak_rss_mb=peak_rss_mb)
    return result


def main(argv: list[str]) -> int:
    task = json.loads(argv[0])
    result = run(task)
    result.setdefault("peak_rss_mb", _rss_mb())
    print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
