"""The CP-SAT model of one (scaled, renumbered) part: offsets, boxes, one NoOverlap2D.

Steps of `build_model`:

- one ``base`` variable per unit (buffers tied by mandatory aliases, see
  `geometry`); a member's offset is ``base + rel``. A pinned member fixes it;
  alignments become ``base == modulus * k + residue`` (the members'
  congruences combined by the Chinese remainder theorem);
- one fixed time interval and one offset interval per box of the units'
  shapes, and a single ``add_no_overlap_2d`` over all of them (plus, redundant,
  a 1-D ``add_no_overlap`` per set of boxes live together: its edge finding
  prunes more);
- per link (optional aliases between two units) a Boolean ``take`` with
  ``take => base[high] == base[low] + shift`` (never taken between units an
  explicit conflict keeps apart); two units joined *directly* by a taken link
  may share memory (an in-place write serves one output: a chain of two
  links does not let its ends share), so the boxes of units live together
  are optional, one set per arrangement (`geometry`), present exactly when
  the taken links make that arrangement: every two units of a merged class
  directly linked at their shifts, no two of different classes (literals for
  links and joins defined as AND / OR);
- explicit conflicts that lifetimes do not imply: ``a below b or b below a``
  (whatever the aliases), plus a redundant 1-D NoOverlap per clique of such
  conflicts;
- ``peak >= base + extent`` for every unit, minimised within ``[lower bound,
  upper bound]``; or, to fit a capacity, ``base + extent <= capacity`` and no
  objective.

The model is exact: a plan is valid (`memplan.validate`) if and only if its
offsets, with ``take`` set where the plan honours an optional alias, satisfy
it (up to the optional aliases `Geometry.loose` leaves to chance, and one
more limit: three units live together where the middle one shares with both
others through two taken links while those two keep apart is not modelled;
the search may miss such a plan, never produces an invalid one).

Size: O(b) intervals for b boxes (b = n without aliases), O(c) Booleans for
c explicit conflicts, O(l) for l links.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from memplan.problem import Problem
from memplan.solver.geometry import Geometry, build_geometry


@dataclass
class Model:
    """A built CP-SAT model and the variables needed to read or hint a plan."""

    cp: cp_model.CpModel
    problem: Problem
    geometry: Geometry
    base: list[cp_model.IntVar]  # per unit: the offset of its lowest member
    quotient: list[tuple[cp_model.IntVar, int, int] | None]  # per unit: (k, modulus, residue)
    take: list[cp_model.IntVar]  # per link
    peak: cp_model.IntVar | None  # the arena size (minimise mode)
    lower_bound: int  # no plan of this part has a smaller peak
    stacked: np.ndarray  # a plan that shares nothing: pinned units, the rest stacked above
    derived: list[tuple[cp_model.IntVar, bool, list]] = field(default_factory=list)
    #  (literal, True for all-of / False for any-of, operand literals): for hints
    below: list[tuple[cp_model.IntVar, int, int]] = field(default_factory=list)  # (lit, a, b)

    def offsets(self, values) -> np.ndarray:
        """The offsets of a solution; ``values`` is a solver or a solution callback."""
        offsets = np.empty(len(self.problem), np.int64)
        for unit, base in zip(self.geometry.units, self.base, strict=True):
            offsets[list(unit.members)] = values.value(base) + np.array(unit.rel)
        return offsets

    def hint(self, offsets: np.ndarray, into: cp_model.CpModel | None = None) -> None:
        """Hint every variable from a plan's (scaled) offsets, in this model or a clone."""
        cp, geometry = into or self.cp, self.geometry
        cp.clear_hints()
        bases = [int(offsets[unit.members[0]]) - unit.rel[0] for unit in geometry.units]
        hinted = set()  # CP-SAT caches constants: pinned units at one offset share one
        for base, value, quotient in zip(self.base, bases, self.quotient, strict=True):
            if base.index in hinted:
                continue  # a duplicate hint variable makes CP-SAT reject the model
            hinted.add(base.index)
            cp.add_hint(base, value)
            if quotient is not None:
                k, modulus, residue = quotient
                cp.add_hint(k, (value - residue) // modulus)
        value: dict[int, bool] = {}

        def truth(literal) -> bool:
            index = literal.index
            return value[index] if index >= 0 else not value[-index - 1]

        for literal, link in zip(self.take, geometry.links, strict=True):
            value[literal.index] = bases[link.high] == bases[link.low] + link.shift
        for literal, every, operands in self.derived:  # in creation order: operands first
            value[literal.index] = (all if every else any)(truth(o) for o in operands)
        for index, truth_value in value.items():
            cp.add_hint(self.cp.get_bool_var_from_proto_index(index), truth_value)
        sizes = self.problem.sizes
        for literal, a, b in self.below:
            cp.add_hint(literal, bool(offsets[a] + sizes[a] <= offsets[b]))
        if self.peak is not None:
            cp.add_hint(self.peak, int((offsets + sizes).max()))


def sections(boxes) -> list[list[int]]:
    """The maximal sets of boxes live at one time (the maximal cliques of their lifetimes).

    A set is maximal where some box starts at a point and some box ends at
    the next point. Sweep, O(b log b + total clique size).
    """
    points = sorted({b.start for b in boxes} | {b.end for b in boxes})
    starting: dict[int, list[int]] = {}
    ending: dict[int, list[int]] = {}
    for n, box in enumerate(boxes):
        starting.setdefault(box.start, []).append(n)
        ending.setdefault(box.end, []).append(n)
    live: set[int] = set()
    found = []
    for t, following in zip(points[:-1], points[1:], strict=True):
        live.difference_update(ending.get(t, ()))
        live.update(starting.get(t, ()))
        if t in starting and following in ending and len(live) > 1:
            found.append(sorted(live))
    return found


def _stacked(problem: Problem, geometry: Geometry, congruences, pinned) -> np.ndarray:
    """Offsets that share nothing: pinned units in place, every other unit above them all."""
    offsets = np.empty(len(problem), np.int64)
    floor = max([p + geometry.units[u].extent for u, p in pinned.items()], default=0)
    for u, (unit, (residue, modulus)) in enumerate(zip(geometry.units, congruences,
                                                      strict=True)):
        if u in pinned:
            base = pinned[u]
        else:
            base = floor + (residue - floor) % modulus
            floor = base + unit.extent
        offsets[list(unit.members)] = base + np.array(unit.rel)
    return offsets


def conflict_cliques(pairs: list[tuple[int, int]], sizes) -> list[list[int]]:
    """Cliques of three or more buffers covering the conflict pairs they can (greedy).

    Each clique's 1-D NoOverlap is redundant with the pairwise disjunctions but
    prunes far more (a conflict graph's cliques need their total size). For
    each uncovered pair, heaviest first: add every common neighbour that
    conflicts with all members so far. O(p * d^2) for p pairs of degree d.
    """
    neighbours: dict[int, set[int]] = {}
    for a, b in pairs:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    covered: set[tuple[int, int]] = set()
    found = []
    for a, b in sorted(pairs, key=lambda p: -int(sizes[p[0]] + sizes[p[1]])):
        if (a, b) in covered:
            continue
        clique = [a, b]
        for c in sorted(neighbours[a] & neighbours[b], key=lambda c: -int(sizes[c])):
            if all(c in neighbours[m] for m in clique):
                clique.append(c)
        covered.update((min(x, y), max(x, y)) for x in clique for y in clique)
        if len(clique) > 2:
            found.append(sorted(clique))
    return found


def build_model(problem: Problem, *, lower_bound: int, upper_bound: int | None, minimize: bool,
                by_section: bool = True) -> Model:
    """The model of ``problem`` (a part, already scaled); see the module docstring.

    ``upper_bound`` caps every top (a known plan's arena; None: a layout that
    shares nothing); in minimise mode the peak lies in ``[lower_bound,
    upper_bound]``, and the capacity, if any, caps it too.
    ``by_section`` adds a redundant 1-D NoOverlap over the boxes of each
    `sections` set, whose propagation (edge finding) is stronger.

    Steps (each a function below): the geometry (`build_geometry`: alias
    units, links, boxes), `_add_variables` (a base per unit, its alignment,
    the peak), `_add_links` (a ``take`` per link), `_add_boxes`
    (arrangements, boxes, NoOverlap2D), `_add_separations` (explicit
    conflicts and their cliques), then the objective.
    """
    cp = cp_model.CpModel()
    cp.name = problem.name or "memplan"
    geometry = build_geometry(problem)
    groups = geometry.groups  # alignment and pinned base per unit, checked
    congruences = list(zip(groups.residue.tolist(), groups.modulus.tolist(), strict=True))
    pinned = {int(u): int(groups.pinned_base[u]) for u in groups.pinned}
    stacked = _stacked(problem, geometry, congruences, pinned)
    if upper_bound is None:
        upper_bound = int((stacked + problem.sizes).max())
    top = upper_bound if problem.capacity is None else min(upper_bound, problem.capacity)
    peak = cp.new_int_var(lower_bound, max(lower_bound, top), "peak") if minimize else None
    base, quotient = _add_variables(cp, problem, geometry, congruences, pinned, top, peak)
    take = _add_links(cp, problem, geometry, base)
    model = Model(cp, problem, geometry, base, quotient, take, peak, lower_bound, stacked)
    joins = _Joins(model)
    _add_boxes(model, joins, by_section)
    _add_separations(model, joins)
    if peak is not None:
        cp.minimize(peak)
    return model


def _add_variables(cp: cp_model.CpModel, problem: Problem, geometry: Geometry, congruences,
                   pinned: dict[int, int], top: int, peak: cp_model.IntVar | None):
    """Per unit: ``base`` (a constant when pinned) in ``[0, top - extent]``, aligned by
    ``base == modulus * k + residue``; ``base + extent <= peak``. Returns (base, quotient)."""
    ids = problem.ids
    base, quotient = [], []
    for u, unit in enumerate(geometry.units):
        name = ids[unit.members[0]] if len(unit.members) == 1 else "+".join(
            ids[i] for i in unit.members[:3])
        residue, modulus = congruences[u]
        if u in pinned:
            variable = cp.new_constant(pinned[u])
            cp.add(variable + unit.extent <= top)
            quotient.append(None)
        else:
            variable = cp.new_int_var(0, max(0, top - unit.extent), f"offset[{name}]")
            if top < unit.extent:
                cp.add_bool_or([])  # this unit alone is above every allowed top
            if modulus > 1:
                k = cp.new_int_var(0, max(0, top // modulus), f"blocks[{name}]")
                cp.add(variable == modulus * k + residue)
                quotient.append((k, modulus, residue))
            else:
                quotient.append(None)
        base.append(variable)
        if peak is not None:
            cp.add(variable + unit.extent <= peak)
    return base, quotient


def _add_links(cp: cp_model.CpModel, problem: Problem, geometry: Geometry,
               base: list[cp_model.IntVar]) -> list[cp_model.IntVar]:
    """Per link a Boolean ``take`` with ``take => base[high] == base[low] + shift``."""
    take = []
    for link in geometry.links:
        low, high = geometry.units[link.low], geometry.units[link.high]
        literal = cp.new_bool_var(
            f"take[{problem.ids[low.members[0]]}->{problem.ids[high.members[0]]}]")
        cp.add(base[link.high] == base[link.low] + link.shift).only_enforce_if(literal)
        take.append(literal)
    apart_units = {frozenset((int(geometry.unit_of[a]), int(geometry.unit_of[b])))
                   for a, b in problem.conflicts.tolist()}
    for literal, link in zip(take, geometry.links, strict=True):
        if frozenset((link.low, link.high)) in apart_units:
            cp.add(literal == 0)  # an explicit conflict holds whatever the alias says
    return take


class _Joins:
    """Literals for "taken links join these units", made once each and recorded for hints."""

    def __init__(self, model: Model):
        self.model = model
        self.paths: dict[tuple[int, ...], cp_model.IntVar] = {}
        self.joined: dict[tuple[int, int, int | None], cp_model.IntVar] = {}

    def combine(self, operands: list, every: bool, name: str):
        """A literal equal to all (``every``) or any of ``operands``."""
        if len(operands) == 1:
            return operands[0]
        cp = self.model.cp
        literal = cp.new_bool_var(name)
        if every:
            cp.add_bool_and(operands).only_enforce_if(literal)
            cp.add_bool_or([~o for o in operands] + [literal])
        else:
            cp.add_bool_or(operands).only_enforce_if(literal)
            for o in operands:
                cp.add_implication(o, literal)
        self.model.derived.append((literal, every, operands))
        return literal

    def merged(self, u: int, v: int, shift: int | None = None) -> cp_model.IntVar:
        """True when taken links join unit v to unit u (at ``base[v] - base[u] == shift``)."""
        if (u, v, shift) not in self.joined:
            options = []
            for path_shift, links in self.model.geometry.paths(u, v):
                if len(links) != 1:  # only a direct link lets two units share memory
                    continue
                if shift is None or path_shift == shift:
                    if links not in self.paths:
                        self.paths[links] = self.combine([self.model.take[k] for k in links],
                                                         True, f"path{list(links)}")
                    options.append(self.paths[links])
            self.joined[u, v, shift] = self.combine(options, False, f"merged[{u},{v},{shift}]")
        return self.joined[u, v, shift]


def _add_boxes(model: Model, joins: _Joins, by_section: bool) -> None:
    """One arrangement per live set holds; a time x address interval per box (optional
    where it belongs to an arrangement); one NoOverlap2D, plus a 1-D one per section."""
    cp, geometry = model.cp, model.geometry
    present: dict[tuple[tuple[int, ...], int], cp_model.IntVar] = {}
    for live, arrangements in geometry.arrangements.items():
        literals = []
        for index, arrangement in enumerate(arrangements):
            where = {u: c for c, cls in enumerate(arrangement) for u, _ in cls}
            conditions = [joins.merged(a, b, shift_b - shift_a) for cls in arrangement
                          for (a, shift_a), (b, shift_b) in itertools.combinations(cls, 2)]
            conditions += [~joins.merged(u, v) for u in live for v in live
                           if u < v and where[u] != where[v]]
            literal = joins.combine(conditions, True, f"arranged{arrangement}")
            present[live, index] = literal
            literals.append(literal)
        cp.add_exactly_one(literals)

    times, addresses = [], []
    for n, box in enumerate(geometry.boxes):
        times.append(cp.new_fixed_size_interval_var(box.start, box.end - box.start, f"time{n}"))
        start = model.base[box.unit] + box.low
        if box.live:
            addresses.append(cp.new_optional_fixed_size_interval_var(
                start, box.high - box.low, present[box.live, box.arrangement], f"address{n}"))
        else:
            addresses.append(cp.new_fixed_size_interval_var(start, box.high - box.low,
                                                            f"address{n}"))
    cp.add_no_overlap_2d(times, addresses)
    if by_section:
        for members in sections(geometry.boxes):
            cp.add_no_overlap([addresses[n] for n in members])


def _add_separations(model: Model, joins: _Joins) -> None:
    """Explicit conflicts: ``a below b or b below a`` (or merged by taken links), and a
    redundant 1-D NoOverlap per clique of conflicts between different link components."""
    cp, geometry, ids, sizes = model.cp, model.geometry, model.problem.ids, model.problem.sizes
    offset = {}
    for unit, variable in zip(geometry.units, model.base, strict=True):
        for idx, r in zip(unit.members, unit.rel, strict=True):
            offset[idx] = variable + r
    for a, b in geometry.separations:
        a_below = cp.new_bool_var(f"below[{ids[a]},{ids[b]}]")
        b_below = cp.new_bool_var(f"below[{ids[b]},{ids[a]}]")
        cp.add(offset[a] + int(sizes[a]) <= offset[b]).only_enforce_if(a_below)
        cp.add(offset[b] + int(sizes[b]) <= offset[a]).only_enforce_if(b_below)
        cp.add_bool_or([a_below, b_below])  # explicit conflicts hold whatever the aliases say
        model.below += [(a_below, a, b), (b_below, b, a)]
    apart = [(a, b) for a, b in geometry.separations
             if geometry.component[geometry.unit_of[a]] != geometry.component[geometry.unit_of[b]]]
    for members in conflict_cliques(apart, sizes):
        cp.add_no_overlap([cp.new_fixed_size_interval_var(offset[i], int(sizes[i]),
                                                          f"conflict[{ids[i]}]")
                           for i in members])
