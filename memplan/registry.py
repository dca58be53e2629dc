"""Planners by name: the heuristics and the exact solver, one table.

Every planner has one signature::

    plan(problem, *, time_limit=None, seed=0, hint=None, **options) -> Plan

so the CLI, the notebooks, the benchmarks and the exact solver (which takes
the best heuristic plan as its warm start ``hint``) can list and run them all.
A module registers its planner with ``@register("name")``. This module is
only the table: importing ``memplan`` imports heuristics/ and solver/,
which fill it (no import runs back up from here).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import Protocol

from memplan.errors import UnknownPlannerError
from memplan.limits import check_time_limit, check_workers
from memplan.plan import Plan
from memplan.problem import Problem


class Planner(Protocol):
    def __call__(self, problem: Problem, *, time_limit: float | None = None, seed: int = 0,
                 hint: Plan | None = None, **options) -> Plan: ...


_PLANNERS: dict[str, Planner] = {}


def register(name: str) -> Callable[[Planner], Planner]:
    """Decorator: make ``fn`` available as ``plan_with(name, ...)``."""

    def add(fn: Planner) -> Planner:
        if name in _PLANNERS and _PLANNERS[name] is not fn:
            raise ValueError(f"planner {name!r} is registered twice")
        _PLANNERS[name] = fn
        return fn

    return add


def planners() -> dict[str, Planner]:
    """All registered planners by name, sorted."""
    return dict(sorted(_PLANNERS.items()))


def get_planner(name: str) -> Planner:
    try:
        return _PLANNERS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), _PLANNERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownPlannerError(f"unknown planner {name!r}{hint}; valid planners: "
                                  f"{', '.join(sorted(_PLANNERS))}") from None


def plan_with(name: str, problem: Problem, **options) -> Plan:
    """Run the planner ``name`` on ``problem``; the plan's ``seconds`` is its wall time."""
    planner = get_planner(name)
    if "time_limit" in options:  # one rule for every entry point (`memplan.limits`)
        options["time_limit"] = check_time_limit(options["time_limit"], "time_limit")
    if options.get("workers"):  # 0: the planner's own default
        check_workers(options["workers"], "workers")
    began = time.perf_counter()
    plan = planner(problem, **options)
    if not plan.seconds:
        plan.seconds = time.perf_counter() - began
    return plan
