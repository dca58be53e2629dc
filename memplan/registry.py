"""Planners by name: the heuristics and the exact solver, one table.

Every planner has one signature::

    plan(problem, *, budget, seed=0, hint=None, **options) -> Plan

(``budget``: a `memplan.budget.Budget`, its deadline and CPU allowance), so the
CLI, the notebooks, the benchmarks and the exact solver (which takes the best
heuristic plan as its warm start ``hint``) can list and run them all.
A module registers its planner with ``@register("name")``. This module is
the table and the one door every planner is entered by (registered planners
are wrapped, so a direct call goes through it too): a ``time_limit=`` given
there (`plan_with`'s keyword) becomes the planner's `Budget` once the hint is
checked, and a planner registered with the old signature (``time_limit=``
seconds) gets the budget's ``seconds`` that way, with a `DeprecationWarning`,
for one release. A ``hint`` is checked
against the problem with the independent validator (`rejected_hint`) before the
planner sees it, and one that is no valid layout of it (another problem's plan,
overlapping buffers; a capacity exceeded is allowed) is set aside with a
`HintWarning`, so no planner can hand an unchecked hint back as its plan.
Importing ``memplan`` imports heuristics/ and solver/, which fill the table
(no import runs back up from here).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Protocol

import numpy as np

from memplan.bounds import time_overlap_count
from memplan.budget import Budget, Stopwatch
from memplan.errors import HintWarning, ProblemError, UnknownPlannerError, renamed, renamed_keyword
from memplan.limits import check_seed, check_time_limit, check_workers
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.shares import CEILING_LEAST_WORK, CEILING_PAIRS_PER_SECOND, CEILING_SHARE
from memplan.validate import known_valid, mark_valid, validate


class Planner(Protocol):
    def __call__(self, problem: Problem, *, budget: Budget | None = None, seed: int = 0,
                 hint: Plan | None = None, **options) -> Plan: ...


_PLANNERS: dict[str, Planner] = {}
CEILING = "greedy_by_size"  # the cheapest greedy: `best`, `exact` and `memplan.solve` run it
# first, uncut by any time limit, and never return a larger plan (see `ceiling_planner`)
CEILING_PAIRS = 8_000_000  # ... unless its compiled pass cannot take the problem (optional
# aliases) and more pairs overlap in time: its pair lists in Python would take minutes
# ... or unless its work (the compiled pass meets every pair of overlapping lifetimes once,
# O(E log n)) would take more than CEILING_SHARE of the time limit (`memplan.shares`)


def ceiling_planner(problem: Problem, time_limit: float | None = None) -> str:
    """The planner whose plan is the ceiling of ``problem``: `CEILING`, or the time sweep
    (which lists no pairs, O(n log n)) where `CEILING` would list more
    than `CEILING_PAIRS` pairs in Python (``best``'s ``max_pairs`` rule) or where its work
    (`ceiling_fits`) would not fit in `CEILING_SHARE` of ``time_limit`` (seconds)."""
    if problem.alias_optional.any() and \
            time_overlap_count(problem.starts, problem.ends) > CEILING_PAIRS:
        return "time_sweep"
    return CEILING if ceiling_fits(problem, time_limit) else "time_sweep"


def ceiling_fits(problem: Problem, time_limit: float | None) -> bool:
    """Whether `CEILING`'s compiled pass fits in `CEILING_SHARE` of ``time_limit`` (seconds;
    None: no limit) or is small (`CEILING_LEAST_WORK`): its work, in pairs visited (every
    pair of overlapping lifetimes and every explicit conflict once, and each buffer), at
    `CEILING_PAIRS_PER_SECOND`. A count of work, so the same problem and limit get the same
    ceiling on a busy machine; O(n log n)."""
    if time_limit is None:
        return True
    work = time_overlap_count(problem.starts, problem.ends) + len(problem.conflicts) + \
        len(problem)
    return work <= max(CEILING_LEAST_WORK, CEILING_PAIRS_PER_SECOND * CEILING_SHARE * time_limit)


def register(name: str) -> Callable[[Planner], Planner]:
    """Decorator: make ``fn`` available as ``plan_with(name, ...)``; it returns ``fn``
    wrapped so that its ``hint`` is checked first (`rejected_hint`), its ``seed`` is a
    Python int (`memplan.limits.check_seed`) and it gets a `Budget` (`_budget`), however it
    is called. A ``fn`` without a ``budget`` parameter takes ``time_limit=`` seconds
    (deprecated)."""

    def add(fn: Planner) -> Planner:
        if name in _PLANNERS and getattr(_PLANNERS[name], "__wrapped__", None) is not fn:
            raise ValueError(f"planner {name!r} is registered twice")
        budgeted = "budget" in inspect.signature(fn).parameters
        if not budgeted:
            warnings.warn(f"planner {name!r} takes time_limit=: a planner takes budget= (a "
                          f"memplan.budget.Budget); time_limit= is given for one release",
                          DeprecationWarning, stacklevel=3)

        @functools.wraps(fn)
        def planner(problem: Problem, *args, hint: Plan | None = None,
                    budget: Budget | None = None, **options) -> Plan:
            if "seed" in options:  # a numpy integer as a Python int (the kernels take those)
                options["seed"] = check_seed(options["seed"])
            if "workers" in options:  # the old name of CP-SAT's threads, for one release
                options["threads"] = renamed_keyword("workers", options.pop("workers"), "threads",
                                                     options.get("threads"), where=name)
            why = None
            if hint is not None:
                why = rejected_hint(problem, hint, name)
                hint = None if why else hint
            budget = _budget(budget, options)
            if budgeted:
                options["budget"] = budget
            else:
                options["time_limit"] = budget.seconds
            plan = fn(problem, *args, hint=hint, **options)
            if why:
                plan.stats["hint_rejected"] = why
            return plan

        _PLANNERS[name] = planner
        return planner

    return add


def _budget(budget: Budget | None, options: dict) -> Budget:
    """The planner's budget: ``budget``, or one of the edges' ``time_limit`` (wall seconds
    from now) and ``cpu`` (CPU seconds, the allowance) in ``options``, which it takes out.
    Made after the hint is checked, as the planner starts, like the planners' own clocks
    were: a caller whose hint may need the validator gives these rather than a budget."""
    edges = {key: options.pop(key) for key in ("time_limit", "cpu") if key in options}
    if budget is None:
        return Budget.of_limit(check_time_limit(edges.get("time_limit"), "time_limit"),
                               cpu=check_time_limit(edges.get("cpu"), "cpu"))
    if edges:
        raise TypeError(f"give budget= or {' and '.join(f'{k}=' for k in edges)}, not both")
    return budget


def rejected_hint(problem: Problem, hint: Plan, name: str) -> str | None:
    """Why ``hint`` is no valid layout of ``problem`` (with a `HintWarning`), or None when it
    is one (a capacity it exceeds aside: the planner's status says whether a plan fits).

    A hint that is no `Plan` is refused (`ProblemError`). Cost: O(1) for a hint already
    checked against this very problem (`memplan.validate.known_valid`: the warm start
    that `memplan.solve` hands the exact planner), else one run of the validator."""
    if not isinstance(hint, Plan):
        raise ProblemError(f"planner {name!r}: the hint must be a Plan, not "
                           f"{type(hint).__name__}")
    if known_valid(hint, problem):
        return None
    count = np.shape(hint.offsets)
    if count != (len(problem),):
        why = f"{count[0] if count else 0} offsets for {len(problem)} buffers"
    else:
        broken = [v for v in validate(problem, hint) if v.kind != "capacity"]
        if not broken:
            mark_valid(hint, problem)
            return None
        why = f"{broken[0]}" + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else "")
    why = f"not a valid layout of this problem: {why}"
    warnings.warn(f"planner {name!r}: the hint is set aside, {why}", HintWarning, stacklevel=3)
    return why


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
    """Run the planner ``name`` on ``problem``; the plan's ``seconds`` is its wall time.
    ``time_limit=`` (wall seconds) and ``cpu=`` (CPU seconds) become its `Budget` as it
    starts; ``budget=`` gives one made by the caller (a share of its own, `Budget.split`)."""
    planner = get_planner(name)
    if "time_limit" in options:  # one rule for every entry point (`memplan.limits`)
        options["time_limit"] = check_time_limit(options["time_limit"], "time_limit")
    for key in ("threads", "workers"):
        if options.get(key):  # 0: the planner's own default
            check_workers(options[key], key)
    watch = Stopwatch()
    plan = planner(problem, **options)
    if not plan.seconds:
        plan.seconds = watch.elapsed()
    return plan


__getattr__ = renamed(__name__, {old: old.replace("FLOOR", "CEILING").replace("floor", "ceiling")
                                 for old in ("FLOOR", "FLOOR_PAIRS", "FLOOR_PAIRS_PER_SECOND",
                                             "FLOOR_SHARE", "FLOOR_LEAST_WORK",
                                             "floor_planner", "floor_fits")})
