"""The boxes the exact model packs: alias groups turned into disjoint rectangles.

NoOverlap2D forbids any two of its boxes to share area, but aliased buffers
*must* share memory: an in-place output starts in its input's bytes at the
step where the input dies, a view lives in the very bytes of its source, and
Concat inputs sit inside their output. So the model never packs buffers;
it packs the *shape* of each alias group:

- a **unit** is a group tied by mandatory aliases; it moves rigidly, every
  member at a fixed height ``rel`` above the unit's base offset;
- its shape (the union of its members' lifetime x address boxes) is cut into
  disjoint rectangles, one per run of time steps with the same address ranges::

      address    +--------+           in-place: src [0, 3), dst [2, 5),
        ^        |  dst   |           dst at src + 0 and larger: the shape is
        |  +-----+--+     |           three disjoint rectangles
        |  | src    | dst |           [0,2) x src, [2,3) x dst (covers src),
        +--+--------+-----+--> time   [3,5) x dst

  Two units then overlap in the packing exactly when two of their members
  overlap, and members of one unit never clash;
- **optional** aliases (may-alias) join units by *links* the solver takes or
  not (parallel aliases with the same shift make one link). The validator
  lets two units share memory when a taken link joins them directly, so
  where units of one link component live at the same time, the shape
  depends on the taken links: one rectangle set per *arrangement* (a set
  partition of the live units into merged classes, and for each class the
  shift of each member unit, which is the total shift of some simple path of
  links to the class's first unit), present only when the taken links make
  that arrangement. `Geometry.arrangements` lists them per live set.

The model is exact up to `MAX_ARRANGEMENTS` arrangements of one live set and
`MAX_PATHS` simple paths between two units; a link component beyond them is
left to chance (its optional aliases are in ``Geometry.loose``: the solver may
still honour them, never relies on them; sound, but it may miss a sharing).

Cost: O(n log n) for buffers without aliases (one box each); a link
component of m members over s segments costs O(m s) per arrangement.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from memplan.groups import AliasUnits, alias_units
from memplan.problem import Problem, union_find

MAX_ARRANGEMENTS = 64  # most arrangements modelled for one set of live units
MAX_PATHS = 32  # most simple paths of links modelled between two units
MAX_PATH_STEPS = 20_000  # most steps of the search for those paths

Path = tuple[int, tuple[int, ...]]  # (total shift base[v] - base[u], links on the path)
Arrangement = tuple[tuple[tuple[int, int], ...], ...]  # classes of (unit, shift from the first)


@dataclass(frozen=True)
class Unit:
    """Buffers tied by mandatory aliases: ``offset[members[j]] == base + rel[j]``."""

    members: tuple[int, ...]  # buffer indices
    rel: tuple[int, ...]  # each member's offset above the unit's base (>= 0; min is 0)
    extent: int  # bytes from the base to the top of the highest member


@dataclass(frozen=True)
class Link:
    """Optional aliases between two units: taken means ``base[high] == base[low] + shift``."""

    aliases: tuple[int, ...]  # the optional aliases it stands for (same shift)
    low: int  # unit
    high: int  # unit
    shift: int


@dataclass(frozen=True)
class Box:
    """A rectangle of a unit's (or merged units') shape.

    It covers ``[start, end) x [base + low, base + high)``, ``base`` being the
    base offset of ``unit``.
    """

    start: int
    end: int
    low: int  # above the base of ``unit``
    high: int
    unit: int  # whose base offset the rectangle moves with
    live: tuple[int, ...] = ()  # the units live together here; () = always present
    arrangement: int = 0  # present only when ``live`` is arranged as ``arrangements[live][.]``


@dataclass
class Geometry:
    """Units, links, boxes and the explicit conflicts left for pairwise constraints."""

    units: list[Unit]
    unit_of: np.ndarray  # buffer -> unit
    links: list[Link]
    loose: list[int]  # optional aliases not modelled as links (sound, maybe not exact)
    groups: AliasUnits  # the alias units behind ``units`` (alignment, pinned base)
    boxes: list[Box] = field(default_factory=list)
    arrangements: dict[tuple[int, ...], list[Arrangement]] = field(default_factory=dict)
    separations: list[tuple[int, int]] = field(default_factory=list)  # buffer pairs
    component: list[int] = field(default_factory=list)  # unit -> its link component
    _paths: dict[tuple[int, int], list[Path]] = field(default_factory=dict)
    _adjacency: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    _up: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    #  in a tree of links: unit -> (parent unit, link to it, shift from it, depth)
    _offset: dict[int, int] = field(default_factory=dict)  # in a tree: base - the root's base

    def paths(self, u: int, v: int) -> list[Path]:
        """Every simple path of links from unit ``u`` to unit ``v``, with its total shift.

        In a tree of links (the usual case) the one path climbs to the common
        ancestor, O(depth); otherwise a depth-first search without recursion
        (link chains can be long) that raises `Crowded` past `MAX_PATHS` paths
        or `MAX_PATH_STEPS` steps.
        """
        if (u, v) in self._paths:
            return self._paths[u, v]
        if self.component[u] != self.component[v]:
            return []
        if u in self._up:  # a tree of links
            return [self._climb(u, v)]
        found: list[Path] = []
        stack = [(u, 0, frozenset((u,)), ())]  # (unit, shift so far, units on it, links)
        steps = 0
        while stack:
            at, shift, visited, links = stack.pop()
            steps += 1
            if steps > MAX_PATH_STEPS or len(found) > MAX_PATHS:
                raise Crowded
            if at == v:
                found.append((shift, links))
                continue
            for k, other, step in self._adjacency.get(at, ()):
                if other not in visited:
                    stack.append((other, shift + step, visited | {other}, links + (k,)))
        self._paths[u, v] = found
        return found

    def _climb(self, u: int, v: int) -> Path:
        """The path from u to v in their tree: both climb to their common ancestor."""
        shift = self._offset[v] - self._offset[u]
        up, down = [], []
        while u != v:
            if self._up[u][3] >= self._up[v][3]:
                up.append(self._up[u][1])
                u = self._up[u][0]
            else:
                down.append(self._up[v][1])
                v = self._up[v][0]
        return shift, tuple(up + down[::-1])

    def index_links(self):
        """Adjacency of the links, and for each tree of links its parents and offsets."""
        for k, link in enumerate(self.links):
            self._adjacency.setdefault(link.low, []).append((k, link.high, link.shift))
            self._adjacency.setdefault(link.high, []).append((k, link.low, -link.shift))
        units_in: dict[int, list[int]] = {}
        for u, c in enumerate(self.component):
            units_in.setdefault(c, []).append(u)
        links_in: dict[int, int] = {}
        for link in self.links:
            links_in[self.component[link.low]] = links_in.get(self.component[link.low], 0) + 1
        for c, units in units_in.items():
            if len(units) == 1 or links_in.get(c, 0) != len(units) - 1:
                continue  # alone, or a cycle: no tree
            root = units[0]
            self._up[root] = (root, -1, 0, 0)
            self._offset[root] = 0
            stack = [root]
            while stack:
                at = stack.pop()
                for k, other, step in self._adjacency.get(at, ()):
                    if other not in self._up:
                        self._up[other] = (at, k, step, self._up[at][3] + 1)
                        self._offset[other] = self._offset[at] + step
                        stack.append(other)


class Crowded(Exception):
    """A link component with too many paths or arrangements to model exactly."""


def _units(groups: AliasUnits) -> list[Unit]:
    """The alias units as tuples (the model reads them unit by unit)."""
    return [Unit(tuple(members.tolist()), tuple(groups.rel[members].tolist()),
                 int(groups.extent[u]))
            for u, members in ((u, groups.members(u)) for u in range(len(groups)))]


def _links(problem: Problem, units: list[Unit], unit_of: np.ndarray) -> list[Link]:
    """Optional aliases between different units, bundled by (units, shift)."""
    rel = np.zeros(len(problem), np.int64)
    for unit in units:
        rel[list(unit.members)] = unit.rel
    bundles: dict[tuple[int, int, int], list[int]] = {}
    for k in np.flatnonzero(problem.alias_optional).tolist():
        src, dst = int(problem.alias_src[k]), int(problem.alias_dst[k])
        u, v = int(unit_of[src]), int(unit_of[dst])
        shift = int(rel[src] + problem.alias_delta[k] - rel[dst])  # base[v] - base[u]
        if u != v:  # inside one unit: always or never honoured, nothing to decide
            bundles.setdefault((u, v, shift) if u < v else (v, u, -shift), []).append(k)
    return [Link(tuple(aliases), u, v, shift) for (u, v, shift), aliases in bundles.items()]


def set_partitions(items: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], ...]]:
    """Every partition of ``items`` into classes (Bell(len) of them), classes sorted."""
    if not items:
        yield ()
        return
    first, rest = items[0], items[1:]
    for partition in set_partitions(rest):
        yield ((first,),) + partition
        for i, cls in enumerate(partition):
            yield tuple(sorted(((first,) + cls,) + partition[:i] + partition[i + 1:]))


def _arrangements(geometry: Geometry, live: tuple[int, ...]) -> list[Arrangement] | None:
    """Every way the taken links can merge ``live`` (None when there are too many)."""
    found: list[Arrangement] = []
    for partition in set_partitions(live):
        choices = []
        for cls in partition:
            per_unit = [sorted({shift for shift, _ in geometry.paths(cls[0], u)})
                        for u in cls[1:]]
            choices.append([tuple(zip(cls, (0, *shifts), strict=True))
                            for shifts in itertools.product(*per_unit)])
        for arrangement in itertools.product(*choices):
            found.append(arrangement)
            if len(found) > MAX_ARRANGEMENTS:
                return None
    return found


def _union(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return tuple((low, high) for low, high in merged)


def _shape_boxes(problem: Problem, geometry: Geometry,
                 component: list[int]) -> list[Box] | None:
    """The rectangles of one link component (units joined by links), merged over time.

    None when a live set has too many arrangements or two units too many paths.
    """
    units = geometry.units
    if len(component) == 1 and len(units[component[0]].members) == 1:
        (idx,) = units[component[0]].members
        return [Box(int(problem.starts[idx]), int(problem.ends[idx]), 0,
                    int(problem.sizes[idx]), component[0])]
    members = [i for u in component for i in units[u].members]
    rel = {i: r for u in component for i, r in zip(units[u].members, units[u].rel, strict=True)}
    starts, ends, sizes = problem.starts, problem.ends, problem.sizes
    points = np.unique(np.r_[starts[members], ends[members]]).tolist()
    open_boxes: dict[tuple, list[int]] = {}  # (unit, live, arrangement, low, high) -> span
    boxes: list[Box] = []
    for t0, t1 in zip(points[:-1], points[1:], strict=True):
        shape: dict[int, tuple[tuple[int, int], ...]] = {}
        for u in component:
            ranges = [(rel[i], rel[i] + int(sizes[i])) for i in units[u].members
                      if starts[i] <= t0 < ends[i]]
            if ranges:
                shape[u] = _union(ranges)
        live = tuple(sorted(shape))
        if len(live) == 1:
            pieces = [(live[0], (), 0, shape[live[0]])]
        elif live:
            if live not in geometry.arrangements:
                try:
                    options = _arrangements(geometry, live)
                except Crowded:
                    return None
                if options is None:
                    return None
                geometry.arrangements[live] = options
            pieces = [(cls[0][0], live, index,
                       _union([(low + shift, high + shift) for u, shift in cls
                               for low, high in shape[u]]))
                      for index, arrangement in enumerate(geometry.arrangements[live])
                      for cls in arrangement]
        else:
            pieces = []
        for unit, key_live, index, ranges in pieces:
            for low, high in ranges:
                key = (unit, key_live, index, low, high)
                span = open_boxes.get(key)
                if span is not None and span[1] == t0:
                    span[1] = t1
                    continue
                if span is not None:
                    boxes.append(Box(span[0], span[1], *key[3:], *key[:3]))
                open_boxes[key] = [t0, t1]
    boxes += [Box(span[0], span[1], *key[3:], *key[:3]) for key, span in open_boxes.items()]
    return boxes


def _link_components(n_units: int, links: list[Link]) -> list[int]:
    root, _, _ = union_find(n_units, ((link.low, link.high, 0) for link in links))
    return root


def build_geometry(problem: Problem) -> Geometry:
    """Units, links and boxes of ``problem``; see the module docstring."""
    groups = alias_units(problem)
    units, unit_of = _units(groups), groups.unit_of
    links, loose = _links(problem, units, unit_of), []
    while True:
        geometry = Geometry(units, unit_of, links, loose, groups)
        geometry.component = _link_components(len(units), links)
        geometry.index_links()
        by_component: dict[int, list[int]] = {}
        for u, c in enumerate(geometry.component):
            by_component.setdefault(c, []).append(u)
        crowded = set()
        for c, component in by_component.items():
            boxes = _shape_boxes(problem, geometry, component)
            if boxes is None:
                crowded.add(c)
            else:
                geometry.boxes.extend(boxes)
        if not crowded:
            break
        loose = loose + [k for link in links if geometry.component[link.low] in crowded
                         for k in link.aliases]
        links = [link for link in links if geometry.component[link.low] not in crowded]
    geometry.separations = _separations(problem, unit_of)
    return geometry


def _separations(problem: Problem, unit_of: np.ndarray) -> list[tuple[int, int]]:
    """Explicit conflicts the boxes do not already keep apart (lifetimes disjoint)."""
    pairs = set()
    starts, ends = problem.starts, problem.ends
    for a, b in problem.conflicts.tolist():
        if unit_of[a] == unit_of[b] or (starts[a] < ends[b] and starts[b] < ends[a]):
            continue
        pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)
