"""``shared_objects_exact``: the shared-objects assignment solved exactly (CP-SAT).

For back ends that give every tensor a whole storage (GPU buffers without
offsets, textures): each alias unit goes into one object, no two units of an
object live at once (their spans, first member start to last member end) nor
in explicit conflict, and each object is as large as its largest unit. The
objects' total is minimised; ``shared_objects`` is its greedy.

Steps:
- warm starts: ``shared_objects``'s plan and the ``hint`` (Relax's storages,
  say), each read back as an assignment by grouping the units at one base
  offset (a valid plan never puts two live units there); the smaller total;
- a CP-SAT model over representatives: units ranked by size (ties by index),
  ``x[i, j]`` when unit i may join the object led by unit j (j ranked first,
  spans disjoint, no explicit conflict, alignments compatible); each unit in
  one object, ``x[i, j] <= x[j, j]``, at most one member of an object live
  at each start (the maximal cliques of the interval graph), objective the
  leaders' sizes;
- the better of the search's and the warm start's assignments, laid out
  objects one above another, above the pinned units' bytes, so that the
  plan is an offset plan the validator checks like any other.

``stats``: ``object_total``, ``objects``, ``objects_bound`` (the larger of
CP-SAT's proven bound and `memplan.bounds.ranked_live_bound`),
``objects_status`` (``optimal`` when the total meets it) and ``objects_gap``.
The plan's own status and bound speak of the offset problem (the live load):
an object plan is seldom an optimal arena. Limits: optional aliases are not
taken (the objects bound is then not claimed); the model has O(n^2) variables
and constraints in the live sets: past `MAX_PAIRS` candidate pairs it is not
built and the warm start stays, with its ranked bound as the gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memplan.bounds import ranked_live_bound, time_overlap_count
from memplan.budget import Budget
from memplan.groups import AliasUnits, alias_units, combine_congruences
from memplan.options import option, parse_options
from memplan.plan import Plan, gap_of
from memplan.problem import NO_OFFSET, Problem, check_single_region
from memplan.registry import plan_with, register
from memplan.shares import SHARED_OBJECTS_UNTIMED_SECONDS
from memplan.solver.cp_import import import_within

NAME = "shared_objects_exact"
GREEDY = "shared_objects"
MAX_PAIRS = 2_000_000  # more candidate pairs: no model (see the module doc)


@dataclass(frozen=True)
class SharedObjectsExactOptions:
    """Options of ``shared_objects_exact``."""

    threads: int = option(0, "CP-SAT search threads; 0 = one per core")


DEFAULTS = SharedObjectsExactOptions()


@dataclass
class Objects:
    """An assignment: the units of each object, the largest (its leader) first."""

    groups: list[list[int]]
    extent: np.ndarray  # per unit

    @property
    def total(self) -> int:
        return sum(int(self.extent[g[0]]) for g in self.groups)


def spans(problem: Problem, units: AliasUnits) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's span: its members' first start and last end."""
    start = np.full(len(units), np.iinfo(np.int64).max)
    np.minimum.at(start, units.unit_of, problem.starts)
    end = np.zeros(len(units), np.int64)
    np.maximum.at(end, units.unit_of, problem.ends)
    return start, end


def _ranked(units: AliasUnits, chosen: np.ndarray) -> np.ndarray:
    """``chosen`` units by decreasing extent, ties by index."""
    return chosen[np.lexsort((chosen, -units.extent[chosen]))]


def objects_of(plan: Plan, units: AliasUnits, chosen: np.ndarray, start: np.ndarray,
               end: np.ndarray) -> Objects | None:
    """``plan`` read as an assignment of the ``chosen`` units: one object per base offset;
    None when two units of one base have overlapping spans (a layout the model cannot
    express: aliases interleaved in time)."""
    first = units.member_buffers[units.member_ptr[:-1]]
    base = plan.offsets[first] - units.rel[first]
    by_base: dict[int, list[int]] = {}
    for unit in _ranked(units, chosen).tolist():
        by_base.setdefault(int(base[unit]), []).append(unit)
    for group in by_base.values():
        ordered = sorted(group, key=lambda u: start[u])
        if any(end[a] > start[b] for a, b in zip(ordered, ordered[1:], strict=False)):
            return None
    return Objects(list(by_base.values()), units.extent)


def _kept_apart(problem: Problem, units: AliasUnits, chosen: np.ndarray
                ) -> set[tuple[int, int]]:
    """Unit pairs (low, high) that may not share an object although their spans are
    disjoint: explicit conflicts, and alignments no one base meets (with one alignment
    class there are none, else every pair is checked: O(n^2))."""
    pairs = units.unit_of[problem.conflicts] if len(problem.conflicts) else np.zeros((0, 2))
    apart = {(min(a, b), max(a, b)) for a, b in pairs.tolist() if a != b}
    classes = {(int(units.residue[u]) % int(units.modulus[u]), int(units.modulus[u]))
               for u in chosen.tolist()}
    if len(classes) > 1 and any(residue for residue, _ in classes):
        listed = chosen.tolist()
        for k, a in enumerate(listed):
            for b in listed[k + 1:]:
                if combine_congruences((int(units.residue[a]), int(units.modulus[a])),
                                       (int(units.residue[b]), int(units.modulus[b]))) is None:
                    apart.add((min(a, b), max(a, b)))
    return apart


def _cliques(members: list[int], start: np.ndarray, end: np.ndarray):
    """The largest sets of ``members`` live together (each read at a start, once every
    member starting there is in); a sweep, O(m log m + the sets' sizes)."""
    live: list[int] = []
    ordered = sorted(members, key=lambda u: start[u])
    for k, unit in enumerate(ordered):
        t = start[unit]
        live = [v for v in live if end[v] > t]
        live.append(unit)
        if (k + 1 == len(ordered) or start[ordered[k + 1]] != t) and len(live) > 1:
            yield list(live)


def solve_objects(problem: Problem, units: AliasUnits, chosen: np.ndarray, start: np.ndarray,
                  end: np.ndarray, warm: Objects, *, seconds: float, threads: int,
                  seed: int) -> tuple[Objects, int, str]:
    """The representatives model (see the module doc) from ``warm``: (assignment, proven
    bound on the total, CP-SAT's status name)."""
    cp_model = import_within("ortools.sat.python.cp_model", seconds)  # CP-SAT: when used
    if cp_model is None:
        return warm, 0, "not imported"
    from memplan.solver.cp_params import cp_solver, proven_bound
    ranked = _ranked(units, chosen)
    rank = {u: k for k, u in enumerate(ranked.tolist())}
    apart = _kept_apart(problem, units, chosen)
    model = cp_model.CpModel()
    leader = {j: model.new_bool_var(f"leader_{j}") for j in rank}
    joins: dict[int, dict[int, object]] = {j: {} for j in rank}  # leader -> member -> x
    for k, i in enumerate(ranked.tolist()):
        before = ranked[:k]
        disjoint = before[(end[before] <= start[i]) | (start[before] >= end[i])]
        options = [leader[i]]
        for j in disjoint.tolist():
            if (min(i, j), max(i, j)) not in apart:
                x = model.new_bool_var(f"unit_{i}_in_{j}")
                model.add_implication(x, leader[j])
                joins[j][i] = x
                options.append(x)
        model.add_exactly_one(options)
    for members in joins.values():
        for live in _cliques(list(members), start, end):
            model.add_at_most_one(members[i] for i in live)
        if apart:
            listed = list(members)
            for k, a in enumerate(listed):
                for b in listed[k + 1:]:
                    if (min(a, b), max(a, b)) in apart:
                        model.add_bool_or([members[a].Not(), members[b].Not()])
    model.minimize(sum(int(units.extent[j]) * leader[j] for j in rank))
    for group in warm.groups:
        first = min(group, key=rank.get)
        model.add_hint(leader[first], True)
        for i in group:
            if i != first and i in joins[first]:
                model.add_hint(joins[first][i], True)
    solver = cp_solver(threads=threads, seed=seed, seconds=seconds)
    status = solver.solve(model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return warm, 0, name
    bound = proven_bound(solver, model)
    groups = {j: [j] for j in rank if solver.value(leader[j])}
    for j, members in joins.items():
        for i, x in members.items():
            if solver.value(x):
                groups[j].append(i)
    found = Objects(list(groups.values()), units.extent)
    return (found if found.total < warm.total else warm), bound, name


def lay_out(units: AliasUnits, objects: Objects, chosen: np.ndarray) -> np.ndarray:
    """Buffer offsets: pinned units where pinned, the objects one above another over them
    (each base meeting all its units' alignments), units of no extent at their residue."""
    base = np.zeros(len(units), np.int64)
    pinned = units.pinned
    base[pinned] = units.pinned_base[pinned]
    top = int((units.pinned_base[pinned] + units.extent[pinned]).max()) if len(pinned) else 0
    placed = np.zeros(len(units), bool)
    for group in objects.groups:
        residue, modulus = 0, 1
        for unit in group:
            residue, modulus = combine_congruences(
                (residue, modulus), (int(units.residue[unit]), int(units.modulus[unit])))
        at = top + (residue - top) % modulus
        base[group] = at
        placed[group] = True
        top = at + int(units.extent[group[0]])
    rest = np.setdiff1d(chosen, np.flatnonzero(placed))
    base[rest] = units.residue[rest]  # units of no extent overlap nothing
    return units.offsets(base)


@register(NAME)
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """Shared objects of least total size, proven optimal or with a proven gap (see the
    module doc); ``hint``: a valid plan whose units at one offset form a warm start."""
    chosen_options = parse_options(NAME, DEFAULTS, options)
    check_single_region(problem)
    seconds = SHARED_OBJECTS_UNTIMED_SECONDS if budget.seconds is None else budget.seconds
    # it spends wall seconds from the budget's start (`Budget.wall_end`), no CPU allowance
    greedy = plan_with(GREEDY, problem, budget=Budget.of_limit(seconds))
    units = alias_units(problem)
    start, end = spans(problem, units)
    free = np.flatnonzero(units.pinned_base == NO_OFFSET)
    chosen = free[(units.extent[free] > 0) & (end[free] > start[free])]
    starts = [objects_of(p, units, chosen, start, end) for p in (greedy, hint) if p is not None]
    warm = min((s for s in starts if s is not None), key=lambda s: s.total, default=None)
    if warm is None:  # the greedy's taken optional aliases interleave: one object per unit
        warm = Objects([[u] for u in _ranked(units, chosen).tolist()], units.extent)
    claims = not problem.alias_optional.any()  # without optional aliases the bounds hold
    bound = ranked_live_bound(units.extent[chosen], start[chosen], end[chosen]) if claims \
        else 0
    pairs = len(chosen) * (len(chosen) - 1) // 2 - time_overlap_count(start[chosen],
                                                                       end[chosen])
    objects, status = warm, "not run"
    if warm.total > bound and pairs <= MAX_PAIRS:
        left = seconds - budget.elapsed()
        objects, proven, status = solve_objects(
            problem, units, chosen, start, end, warm, seconds=max(left, 0.0),
            threads=chosen_options.threads, seed=seed)
        bound = max(bound, proven) if claims else 0
    elif pairs > MAX_PAIRS:
        status = f"not built: {pairs:,} candidate pairs"
    total = objects.total
    stats = {"objects": len(objects.groups), "object_total": total,
             "objects_bound": bound if claims else None,
             "objects_status": "optimal" if claims and total <= bound else "feasible",
             "objects_gap": gap_of(total, bound) if claims else math.nan,
             "greedy_total": greedy.stats.get("object_total"), "search": status}
    if hint is not None:
        relax = objects_of(hint, units, chosen, start, end)
        stats["hint_total"] = None if relax is None else relax.total
    return Plan.from_offsets(problem, lay_out(units, objects, chosen), planner=NAME,
                             seconds=budget.elapsed(), stats=stats)


plan.options = DEFAULTS
