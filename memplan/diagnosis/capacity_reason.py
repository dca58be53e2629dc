"""Why a capacity cannot be met: the smallest reason memplan can find, and whether it is proven.

Two kinds of reason, tried in this order:

- **live load**: at some step the buffers live together need more than the
  capacity (alias groups counted once). The reason is that step and a small
  set of its live buffers: drop buffers, smallest first, while the rest
  still exceed the capacity (each drop is one load computation). Any set of
  buffers live at one step needs its load whatever the layout, so the set
  is infeasible alone; it is *minimal* once each buffer's removal is shown
  to leave a set that fits (below);
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
  - then buffer by buffer, for the members of groups of two or more (a
    group may be needed for one of its members only);
  - the set is *proven minimal* when every buffer left was removed alone and
    a layout of the rest was found (a greedy plan, else CP-SAT); a check
    that runs out of time keeps the buffer and the set is then only
    *proven infeasible*.

"Alone" means `subproblem`: the buffers with what the problem asks of them
among themselves, alias groups kept whole, so that removing a buffer never
makes a set fit worse and every plan of the problem is one of the set.

Cost: one load profile per dropped buffer for a live-load reason, then one
lower bound and one greedy plan per buffer of the set (CP-SAT only where
the greedy plan does not fit); for a packing reason, O(k log k) CP-SAT
checks of the shrinking set (k groups in the first core) and one check per
member of a shared group, each limited to what is left of ``time_limit``.
Known limits: single-region problems without variable scratch.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

import numpy as np

from memplan.bounds import live_bytes
from memplan.budget import Budget, Stopwatch
from memplan.problem import NO_OFFSET, Alias, Problem
from memplan.shares import (
    LEAST_SECONDS,
    QUICK_CHECK,
    WATCH_SECONDS,
    WINDOW_CHECK_LEAST,
    WINDOW_CHECK_SHARE,
)

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
    """The buffers ``members`` (indices) alone: what the problem asks of them among themselves.

    Every plan of ``problem`` restricted to ``members`` is a plan of the result, so a
    set that cannot fit alone shows that the whole cannot, and removing a member never
    makes a set fit worse. For that the alias groups stay whole: the members of a
    mandatory group keep their distances (and may share bytes) though the buffers that
    linked them are gone, and an optional alias with an end removed is kept between
    the members left of the two groups. Conflicts among the members are kept.
    """
    keep = sorted({int(i) for i in members})
    kept = set(keep)
    root, delta = problem.alias_groups
    first: dict[int, int] = {}  # a group's first member kept: the others hang on it
    for i in keep:
        first.setdefault(int(root[i]), i)

    def stand_in(i: int) -> tuple[int, int] | None:
        """A kept buffer ``j`` and ``d`` with ``offset[i] == offset[j] + d``, if any."""
        j = i if i in kept else first.get(int(root[i]))
        return None if j is None else (j, int(delta[i]) - int(delta[j]))

    ids = problem.ids
    aliases: dict[tuple[str, str], Alias] = {}
    for i in keep:  # each mandatory group as a star around its first member kept
        j = first[int(root[i])]
        if j != i:
            aliases[ids[j], ids[i]] = Alias(ids[j], ids[i], int(delta[i]) - int(delta[j]))
    for k, a in enumerate(problem.aliases):
        ends = stand_in(int(problem.alias_src[k])), stand_in(int(problem.alias_dst[k]))
        if not a.optional or None in ends or ends[0][0] == ends[1][0]:
            continue
        (src, shift_src), (dst, shift_dst) = ends
        moved = a.delta + shift_src - shift_dst
        if moved % math.gcd(int(problem.alignments[src]), int(problem.alignments[dst])):
            continue  # the alignments never let it be taken: as good as absent
        aliases.setdefault((ids[src], ids[dst]), Alias(ids[src], ids[dst], moved, optional=True))
    return Problem([replace(problem.buffer(i), regions=None) for i in keep],
                   aliases=list(aliases.values()),
                   conflicts=[(ids[a], ids[b]) for a, b in problem.conflicts
                              if int(a) in kept and int(b) in kept],
                   capacity=capacity, name=problem.name, source=problem.source)


def live_load_reason(problem: Problem, capacity: int, *, time_limit: float = 10.0,
                     threads: int = 1, budget: Budget | None = None) -> Reason | None:
    """The most loaded step above ``capacity`` and a small set of its live buffers, or None;
    its checks within ``budget`` (a caller's) or ``time_limit`` wall seconds.

    The set is shrunk by the load at the step, then checked buffer by buffer
    (`_minimal_by_buffer`): a load that fits does not mean a layout does
    (alignment, conflicts, alias groups wider than their load).
    """
    watch = Stopwatch()
    load = live_bytes(problem)
    if len(problem) == 0 or int(load.max()) <= capacity:
        return None
    step = int(np.argmax(load))
    live = np.flatnonzero((problem.starts <= step) & (problem.ends > step))
    checker = _Checker(problem, capacity, _limit(budget, time_limit), threads)
    kept = _over_capacity(checker, live, step)
    kept, minimal = _minimal_by_buffer(checker, kept, kept)
    if _load_at(problem, kept, step) <= capacity:  # CP-SAT, not the load, proved the rest
        return _packing(checker, kept, minimal, watch)
    return Reason(LIVE_LOAD, capacity, tuple(kept), step, (step, step + 1), int(load[step]),
                  len(live), proven=True, minimal=minimal, checks=checker.checks,
                  seconds=watch.elapsed())


def _over_capacity(checker: _Checker, live: np.ndarray, step: int) -> list[int]:
    """The buffers ``live`` at ``step`` less the smallest ones while the rest still exceed
    the capacity there. Buffers without aliases weigh their size (O(k)); otherwise the
    load of the rest is recomputed (a sub-problem each), while time is left."""
    problem, capacity = checker.problem, checker.capacity
    kept = sorted(live.tolist(), key=lambda i: (-int(problem.sizes[i]), i))
    root, optional = problem.alias_groups[0], problem.alias_optional
    tied = np.concatenate([problem.alias_src[optional], problem.alias_dst[optional]])
    if (np.bincount(root, minlength=len(problem))[root[live]] == 1).all() and \
            not np.isin(live, tied).any():  # no alias: the load is the sum of the sizes
        total = int(problem.sizes[live].sum())
        for idx in reversed(list(kept)):  # smallest first
            if len(kept) > 1 and total - int(problem.sizes[idx]) > capacity:
                kept.remove(idx)
                total -= int(problem.sizes[idx])
        return kept
    for idx in reversed(list(kept)):
        if checker.left() <= 0:  # the set still exceeds the capacity: not yet minimal
            break
        rest = [i for i in kept if i != idx]
        if rest and _load_at(problem, rest, step) > capacity:
            kept = rest
    return kept


def _fits(checker: _Checker, members: list[int]) -> str:
    """``feasible``, ``infeasible`` or ``unknown``: whether the buffers ``members`` alone fit
    the capacity, by the cheapest test that decides it (lower bound, a greedy plan, CP-SAT)."""
    from memplan.bounds import lower_bound
    from memplan.registry import plan_with
    from memplan.validate import validate

    if not members:
        return "feasible"
    sub = subproblem(checker.problem, members, None)
    if lower_bound(sub) > checker.capacity:
        return "infeasible"
    plan = plan_with("greedy_by_size", sub)
    if plan.arena_size <= checker.capacity and not validate(sub, plan):
        return "feasible"
    return checker.check_members(members)[0]


def _minimal_by_buffer(checker: _Checker, members: list[int], candidates
                       ) -> tuple[list[int], bool]:
    """Deletion filtering one buffer at a time over ``candidates`` (smallest first): a buffer
    whose removal leaves a set that still cannot fit goes. ``(the set, proven minimal)``:
    minimal when the rest fit without each candidate left (removal never makes a set fit
    worse, `subproblem`, so one pass is enough)."""
    problem, kept, proven = checker.problem, sorted(members), True
    for idx in sorted(candidates, key=lambda i: (int(problem.sizes[i]), i)):
        if checker.left() <= 0:
            return kept, False
        rest = [i for i in kept if i != idx]
        status = _fits(checker, rest)
        if status == "infeasible":
            kept = rest
        elif status == "unknown":
            proven = False
    return kept, proven


def _packing(checker: _Checker, members: list[int], minimal: bool, watch: Stopwatch) -> Reason:
    """The packing `Reason` of the buffers ``members``, which CP-SAT proved cannot fit."""
    problem = checker.problem
    load = live_bytes(subproblem(problem, members, None))
    return Reason(PACKING, checker.capacity, tuple(members), int(np.argmax(load)),
                  (int(problem.starts[members].min()), int(problem.ends[members].max())),
                  int(load.max()), len(members), proven=True, minimal=minimal,
                  checks=checker.checks, seconds=watch.elapsed())


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


def _limit(budget: Budget | None, time_limit: float) -> Budget:
    """The checks' budget: the caller's, or one of ``time_limit`` wall seconds from now."""
    return Budget.of_limit(time_limit) if budget is None else budget


class _Checker:
    """CP-SAT checks of 'these alias groups fit under the capacity', within one time budget."""

    def __init__(self, problem: Problem, capacity: int, clock: Budget, threads: int):
        self.problem, self.capacity, self.threads = problem, capacity, threads
        root = problem.alias_groups[0]
        groups: dict[int, list[int]] = {}
        for idx, r in enumerate(root.tolist()):
            groups.setdefault(r, []).append(idx)
        self.groups = list(groups.values())
        self.group_of = {idx: g for g, members in enumerate(self.groups) for idx in members}
        self.pinned = {g for g, members in enumerate(self.groups)
                       if (problem.pinned[members] != NO_OFFSET).any()}
        self.clock = clock  # every check's limit: the time left
        self.checks = 0

    def left(self) -> float:
        return self.clock.left()

    def check(self, groups: set[int], seconds: float | None = None) -> tuple[str, set[int]]:
        """``("infeasible", core)``, ``("feasible", set())`` or ``("unknown", set())``,
        within ``seconds`` (default: all the time left)."""
        status, core = self.check_members([i for g in groups for i in self.groups[g]], seconds)
        return status, (core or set(groups)) if status == "infeasible" else set()

    def check_members(self, members, seconds: float | None = None) -> tuple[str, set[int]]:
        """`check` of the buffers ``members``; the core as the groups of its buffers."""
        from ortools.sat.python import cp_model  # imported on first use: it costs a second

        from memplan.solver.cp_params import cp_solver
        from memplan.solver.model import build_model

        members = sorted(members)
        if not members:
            return "feasible", set()
        if self.left() <= 0:
            return "unknown", set()
        self.checks += 1
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
        solver = cp_solver(threads=self.threads, seed=0, ctrl_c=False,
                           seconds=max(LEAST_SECONDS, min(self.left(), seconds or math.inf)))
        status = _solve(solver, cp)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return "feasible", set()
        if status != cp_model.INFEASIBLE:
            return "unknown", set()
        core_literals = set(solver.sufficient_assumptions_for_infeasibility())
        return "infeasible", {self.group_of[members[model.geometry.units[u].members[0]]]
                              for u, literal in enumerate(fits) if literal.index in core_literals}

    def with_pinned(self, groups: set[int]) -> set[int]:
        """``groups`` and every pinned group: a pinned group stays where it is even when its
        assumption is dropped, so a core holds without it only when it is there too."""
        return groups | self.pinned


def _solve(solver, cp) -> int:
    """``solver.solve(cp)`` for its time limit, Ctrl-C honoured within `QUICK_CHECK`
    seconds: first a solve of at most that long in this thread (most checks end there;
    a Ctrl-C waits for it), then, when undecided, a new solve of the time left in a
    thread, the caller waiting in slices of 50 ms: Ctrl-C (``KeyboardInterrupt``) stops
    it at once and is raised again."""
    from ortools.sat.python import cp_model

    from memplan.solver.cp_params import limit_of, retime

    seconds = limit_of(solver)
    retime(solver, min(seconds, QUICK_CHECK))
    status = solver.solve(cp)
    if status != cp_model.UNKNOWN or seconds <= QUICK_CHECK:
        return status
    retime(solver, seconds - QUICK_CHECK)
    result: list = []

    def run():
        try:
            result.append(solver.solve(cp))
        except BaseException as error:  # noqa: BLE001  (raised again in the caller)
            result.append(error)

    thread = threading.Thread(target=run, name="memplan-capacity-check", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(WATCH_SECONDS)
    except KeyboardInterrupt:
        solver.stop_search()
        thread.join()
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def packing_reason(problem: Problem, capacity: int, *, time_limit: float = 10.0,
                   threads: int = 1, budget: Budget | None = None) -> Reason:
    """A small set of buffers CP-SAT proves cannot fit ``capacity`` (see the module docstring),
    within ``budget`` (a caller's) or ``time_limit`` wall seconds.

    Call it when every step's live load fits. Returns kind ``fits`` when CP-SAT
    finds a layout of the whole problem, ``undecided`` when time runs out first.
    """
    watch = Stopwatch()
    checker = _Checker(problem, capacity, _limit(budget, time_limit), threads)
    every = set(range(len(checker.groups)))
    status, core = _windowed(checker, every)
    if status != "infeasible":
        return Reason(FITS if status == "feasible" else UNDECIDED, capacity,
                      checks=checker.checks, seconds=watch.elapsed())
    current, minimal = every, True
    candidate = checker.with_pinned(core)
    status, smaller = checker.check(candidate) if candidate != every else ("infeasible", core)
    if status == "infeasible":
        current = checker.with_pinned(smaller) if smaller < candidate else candidate
    current, minimal = _shrink(checker, current)
    members = sorted(i for g in current for i in checker.groups[g])
    shared = [i for g in current if len(checker.groups[g]) > 1 for i in checker.groups[g]]
    members, by_buffer = _minimal_by_buffer(checker, members, shared)
    return _packing(checker, members, minimal and by_buffer, watch)


def _windowed(checker: _Checker, every: set[int]) -> tuple[str, set[int]]:
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
            status, core = checker.check(set(inside) | checker.pinned, seconds=None if
                                         checker.clock.limit is None else max(
                                             WINDOW_CHECK_LEAST,
                                             WINDOW_CHECK_SHARE * checker.clock.limit))
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
