"""Why a capacity cannot be met: the smallest reason memplan can find, and whether it is proven.

Two kinds of reason, tried in this order:

- **live load**: at some step the buffers live together need more than the
  capacity (alias groups counted once). The reason is that step and a
  minimal set of its live buffers: drop buffers, smallest first, while the
  rest still exceed the capacity (each drop is one load computation). Any
  set of buffers live at one step needs its load whatever the layout, so
  the set is infeasible alone and minimal by construction;
- **packing**: every step fits, yet no layout does (lifetimes that overlap in
  a chain force holes). CP-SAT decides it on the exact planner's model
  (`memplan.solver.model.build_model`, capacity left open) with one
  assumption literal per alias group, ``fits[u] => base[u] + extent[u] <=
  capacity``; a group whose assumption is dropped may sit above the
  capacity, which is as good as removing it. Steps:

  - solve with all assumptions, first for the buffers of a time window
    around one of the most loaded steps (widened by doubling, a few seconds
    each: a window that cannot fit is a proof for the whole), then for the
    whole problem; INFEASIBLE gives ``sufficient_assumptions_for_infeasibility``:
    a core of groups;
  - check the core *alone* (a new model of just those buffers, pinned groups
    added) and shrink it by deletion filtering: remove a
    block of groups (farthest in time from the core's most loaded step,
    smallest first); still infeasible -> keep the (smaller) new core, else
    halve the block; a group whose lone removal makes the rest fit is
    necessary (infeasibility is monotone: fewer buffers never fit worse);
  - the set is *proven minimal* when every group left was removed alone and
    CP-SAT found a layout of the rest; a check that runs out of time keeps
    the group and the set is then only *proven infeasible*.

Cost: one load profile per dropped buffer for a live-load reason; for a
packing reason, O(k log k) CP-SAT checks of the shrinking set (k groups in
the first core), each limited to what is left of ``time_limit``. Known
limits: single-region problems without variable scratch; only alias groups
are removed whole, so the set may hold buffers that are needed only as part
of their group.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from memplan.bounds import live_bytes
from memplan.problem import NO_OFFSET, Problem

FITS, LIVE_LOAD, PINNED, PACKING, UNDECIDED = "fits", "live_load", "pinned", "packing", "undecided"


@dataclass(frozen=True)
class Reason:
    """Why ``capacity`` cannot be met (or that it can): buffers by index, a step or a window."""

    kind: str  # fits, live_load, pinned, packing, or undecided (time ran out)
    capacity: int
    buffers: tuple[int, ...] = ()  # the buffers of the reason (indices into the problem)
    step: int | None = None  # the step whose live load is too high, or the tightest step
    window: tuple[int, int] | None = None  # [start, end) of the buffers' lifetimes
    live_bytes: int = 0  # the live load at ``step`` (live load) or the most the set has live
    live_count: int = 0  # buffers live at ``step`` (live load)
    proven: bool = False  # CP-SAT or the live load proves the set cannot fit
    minimal: bool = False  # removing any one group of the set makes it fit (proven)
    checks: int = 0  # CP-SAT checks run
    seconds: float = 0.0


def subproblem(problem: Problem, members, capacity: int | None) -> Problem:
    """The buffers ``members`` (indices) alone, with the aliases and conflicts among them."""
    keep = sorted(int(i) for i in members)
    ids = {problem.ids[i] for i in keep}
    return Problem([replace(problem.buffer(i), regions=None) for i in keep],
                   aliases=[a for a in problem.aliases if a.src in ids and a.dst in ids],
                   conflicts=[(problem.ids[a], problem.ids[b]) for a, b in problem.conflicts
                              if problem.ids[a] in ids and problem.ids[b] in ids],
                   capacity=capacity, name=problem.name, source=problem.source)


def live_load_reason(problem: Problem, capacity: int) -> Reason | None:
    """The most loaded step above ``capacity`` and a minimal set of its live buffers, or None."""
    load = live_bytes(problem)
    if len(problem) == 0 or int(load.max()) <= capacity:
        return None
    step = int(np.argmax(load))
    live = np.flatnonzero((problem.starts <= step) & (problem.ends > step))
    kept = sorted(live.tolist(), key=lambda i: (-int(problem.sizes[i]), i))
    for idx in reversed(list(kept)):  # smallest first
        rest = [i for i in kept if i != idx]
        if rest and _load_at(problem, rest, step) > capacity:
            kept = rest
    return Reason(LIVE_LOAD, capacity, tuple(kept), step, (step, step + 1), int(load[step]),
                  len(live), proven=True, minimal=True)


def _load_at(problem: Problem, members: list[int], step: int) -> int:
    sub = subproblem(problem, members, None)
    return int(live_bytes(sub)[step]) if sub.horizon > step else 0


def pinned_reason(problem: Problem, capacity: int) -> Reason | None:
    """A pinned buffer that ends above ``capacity`` by itself, or None."""
    tops = np.where(problem.pinned != NO_OFFSET, problem.pinned + problem.sizes, 0)
    if len(problem) == 0 or int(tops.max()) <= capacity:
        return None
    idx = int(np.argmax(tops))
    return Reason(PINNED, capacity, (idx,), int(problem.starts[idx]),
                  (int(problem.starts[idx]), int(problem.ends[idx])), int(problem.sizes[idx]),
                  1, proven=True, minimal=True)


class _Checker:
    """CP-SAT checks of 'these alias groups fit under the capacity', within one time budget."""

    def __init__(self, problem: Problem, capacity: int, time_limit: float, workers: int):
        self.problem, self.capacity, self.workers = problem, capacity, workers
        root = problem.alias_groups[0]
        groups: dict[int, list[int]] = {}
        for idx, r in enumerate(root.tolist()):
            groups.setdefault(r, []).append(idx)
        self.groups = list(groups.values())
        self.group_of = {idx: g for g, members in enumerate(self.groups) for idx in members}
        self.pinned = {g for g, members in enumerate(self.groups)
                       if (problem.pinned[members] != NO_OFFSET).any()}
        self.deadline = time.monotonic() + time_limit
        self.checks = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, groups: set[int], seconds: float | None = None) -> tuple[str, set[int]]:
        """``("infeasible", core)``, ``("feasible", set())`` or ``("unknown", set())``,
        within ``seconds`` (default: all the time left)."""
        from ortools.sat.python import cp_model  # imported on first use: it costs a second

        from memplan.solver.cp_params import cp_solver
        from memplan.solver.model import build_model

        if self.left() <= 0:
            return "unknown", set()
        self.checks += 1
        members = sorted(i for g in groups for i in self.groups[g])
        sub = subproblem(self.problem, members, None)
        top = int(np.where(sub.pinned != NO_OFFSET, sub.pinned + sub.sizes, 0).max())
        upper = self.capacity + top + int(sub.sizes.sum() + sub.alignments.sum())
        model = build_model(sub, lower_bound=0, upper_bound=upper, minimize=False,
                            by_section=True)
        cp, fits = model.cp, []
        for u, unit in enumerate(model.geometry.units):
            literal = cp.new_bool_var(f"fits[{sub.ids[unit.members[0]]}]")
            cp.add(model.base[u] + unit.extent <= self.capacity).only_enforce_if(literal)
            fits.append(literal)
        cp.add_assumptions(fits)
        solver = cp_solver(workers=self.workers, seed=0, ctrl_c=False,
                           seconds=max(0.01, min(self.left(), seconds or 1e9)))
        status = solver.solve(cp)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return "feasible", set()
        if status != cp_model.INFEASIBLE:
            return "unknown", set()
        core_literals = set(solver.sufficient_assumptions_for_infeasibility())
        core = {self.group_of[members[model.geometry.units[u].members[0]]]
                for u, literal in enumerate(fits) if literal.index in core_literals}
        return "infeasible", core or set(groups)

    def window(self, groups: set[int]) -> tuple[int, int]:
        members = [i for g in groups for i in self.groups[g]]
        return int(self.problem.starts[members].min()), int(self.problem.ends[members].max())

    def with_pinned(self, groups: set[int]) -> set[int]:
        """``groups`` and every pinned group: a pinned group stays where it is even when its
        assumption is dropped, so a core holds without it only when it is there too."""
        return groups | self.pinned


def packing_reason(problem: Problem, capacity: int, *, time_limit: float = 10.0,
                   workers: int = 1) -> Reason:
    """A small set of buffers CP-SAT proves cannot fit ``capacity`` (see the module docstring).

    Call it when every step's live load fits. Returns kind ``fits`` when CP-SAT
    finds a layout of the whole problem, ``undecided`` when time runs out first.
    """
    began = time.monotonic()
    checker = _Checker(problem, capacity, time_limit, workers)
    every = set(range(len(checker.groups)))
    status, core = _windowed(checker, every, time_limit)
    if status != "infeasible":
        return Reason(FITS if status == "feasible" else UNDECIDED, capacity,
                      checks=checker.checks, seconds=time.monotonic() - began)
    current, minimal = every, True
    candidate = checker.with_pinned(core)
    status, smaller = checker.check(candidate) if candidate != every else ("infeasible", core)
    if status == "infeasible":
        current = checker.with_pinned(smaller) if smaller < candidate else candidate
    current, minimal = _shrink(checker, current)
    members = sorted(i for g in current for i in checker.groups[g])
    sub = subproblem(problem, members, None)
    load = live_bytes(sub)
    return Reason(PACKING, capacity, tuple(members), int(np.argmax(load)),
                  checker.window(current), int(load.max()), len(members), proven=True,
                  minimal=minimal,
                  checks=checker.checks, seconds=time.monotonic() - began)


def _windowed(checker: _Checker, every: set[int], time_limit: float) -> tuple[str, set[int]]:
    """The first infeasible check among time windows around the most loaded steps, widened
    by doubling (a few seconds each), then the whole problem with the time left."""
    problem = checker.problem
    load = live_bytes(problem)
    tops = [int(t) for t in np.argsort(-load, kind="stable")[:3]]
    starts = np.array([problem.starts[g].min() for g in checker.groups])
    ends = np.array([problem.ends[g].max() for g in checker.groups])
    seen: set[frozenset[int]] = set()
    width = 1
    while width < problem.horizon:
        for t in tops:
            inside = frozenset(np.flatnonzero((starts < t + width) & (ends > t - width + 1))
                               .tolist())
            if len(inside) < 2 or inside in seen or inside == every:
                continue
            seen.add(inside)
            status, core = checker.check(set(inside) | checker.pinned,
                                         seconds=max(1.0, time_limit / 10))
            if status == "infeasible":
                return status, core
        width *= 2
    return checker.check(every)


def _shrink(checker: _Checker, current: set[int]) -> tuple[set[int], bool]:
    """Deletion filtering by blocks: ``(smaller infeasible set, proven minimal)``."""
    problem = checker.problem
    members = [i for g in current for i in checker.groups[g]]
    load = live_bytes(subproblem(problem, members, None))
    tight = int(np.argmax(load))

    def distance(g: int) -> tuple[int, int]:
        idx = checker.groups[g]
        start, end = int(problem.starts[idx].min()), int(problem.ends[idx].max())
        away = 0 if start <= tight < end else min(abs(start - tight), abs(end - 1 - tight))
        return (-away, int(problem.sizes[idx].sum()))

    order = sorted(current, key=distance)
    necessary: set[int] = set()
    undecided = False
    block, i = max(1, len(order) // 4), 0
    while i < len(order):
        chunk = [g for g in order[i:i + block] if g in current and g not in necessary]
        if not chunk:
            i += block
            continue
        status, core = checker.check(current - set(chunk))
        if status == "infeasible":
            current = checker.with_pinned(core) & (current - set(chunk)) or current - set(chunk)
            i += block
            block *= 2
        elif block > 1:
            block = max(1, block // 2)
        else:
            if status == "feasible":
                necessary.add(chunk[0])
            else:
                undecided = True
            i += 1
    return current, not undecided and current <= necessary
