"""Lower bounds on the arena size: the live-load profile and conflict cliques.

The live load at step t is the memory that the buffers live at t need
together. No plan can use less at t, so the largest live load bounds every
plan from below (XLA's "no fragmentation" heap)::

    bytes
      ^      ___
      |  ___|   |___       lower_bound = the highest step
      | |           |___
      +-----------------> time

Aliases tie buffers to each other's memory, so the load counts an alias
group's live members once: the union of their address ranges (relative to the
group through the alias deltas), not the sum of their sizes. Optional aliases
count as taken, which keeps the bound valid whatever the planner decides
(a union is never larger than the sum of its parts), unless optional aliases
contradict each other: then which are taken is open, and such a group counts
only its largest mandatory part at each step.

With explicit conflicts the buffers that pairwise conflict form a clique of
the conflict graph and need their total size; `clique_bound` finds heavy
cliques greedily (any clique is a valid bound).
"""

from __future__ import annotations

import weakref

import numpy as np

from memplan.problem import Problem, alias_components


def _alias_components(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alias groups with optional aliases counted as taken (mandatory ones first).

    Aliases that contradict the others (a choice between two optional aliases
    can close an inconsistent cycle) stay out of the groups; `load_profile`
    counts such a group cautiously.
    """
    return alias_components(problem, np.argsort(problem.alias_optional, kind="stable"))


def _union_size(lows, highs) -> int:
    used = 0
    reach = None
    for lo, hi in sorted(zip(lows, highs, strict=True)):
        if reach is None or lo >= reach:
            used += hi - lo
            reach = hi
        elif hi > reach:
            used += hi - reach
            reach = hi
    return used


def _cautious_events(problem: Problem, members: np.ndarray, delta: np.ndarray,
                     units: np.ndarray):
    """Events (time, bytes) for an alias group whose optional aliases contradict each
    other (which are taken is open): per segment, only its largest mandatory unit's
    union of live ranges counts (``units``: a label per buffer, its mandatory group).
    O(m^2 log m) for m members; such groups are rare.
    """
    sizes = problem.sizes
    starts, ends = problem.starts[members], problem.ends[members]
    points = np.unique(np.concatenate([starts, ends]))
    times, changes, previous = [], [], 0
    for t in points[:-1]:
        live = members[(starts <= t) & (ends > t)]
        parts = (live[units[live] == u] for u in np.unique(units[live]))
        used = max((_union_size(delta[p], delta[p] + sizes[p]) for p in parts), default=0)
        times.append(t)
        changes.append(used - previous)
        previous = used
    times.append(points[-1])
    changes.append(-previous)
    return times, changes


def _cells_events(problem: Problem, members: np.ndarray, group: np.ndarray,
                  delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Events (times, bytes) of alias groups: the union of their live members' ranges.

    Each group's address range is cut into *cells* at its members' edges; a cell
    counts its bytes while any member that covers it is live, so its lifetimes
    (one per covering member) are merged into runs, each run an event pair::

        address    member ranges      cells       cell 1 is live while a or b is
          6 +--+                       2 [4, 6)
          4 |b |--+                    1 [2, 4)
          2 +--|a |                    0 [0, 2)
          0    +--+

    Vectorised over all groups: O(c log c) for c (cell, member) pairs, which is
    the member count when ranges nest shallowly (views, in-place chains, Concat
    slices) and at most m^2 for a group of m members.
    """
    low = delta[members]
    high = low + problem.sizes[members]
    # breakpoints: the distinct (group, address) edges, sorted; cell j spans [edge j, j + 1)
    edge_group = np.concatenate([group, group])
    edge_at = np.concatenate([low, high])
    order = np.lexsort((edge_at, edge_group))
    edge_group, edge_at = edge_group[order], edge_at[order]
    distinct = np.ones(len(edge_at), bool)
    distinct[1:] = (np.diff(edge_group) != 0) | (np.diff(edge_at) != 0)
    edge_group, edge_at = edge_group[distinct], edge_at[distinct]
    values = np.unique(edge_at)
    key = edge_group * (len(values) + 1) + np.searchsorted(values, edge_at)

    def edge(at):
        return np.searchsorted(key, group * (len(values) + 1) + np.searchsorted(values, at))

    first, last = edge(low), edge(high)  # a member covers cells first .. last - 1
    counts = last - first
    owner = np.repeat(np.arange(len(members)), counts)
    cell = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) \
        + np.repeat(first, counts)
    starts = problem.starts[members][owner]
    ends = problem.ends[members][owner]
    # merge each cell's lifetimes: sorted by (cell, start), a run ends where the next
    # start passes the running latest end (cell-major keys keep the maximum per cell)
    order = np.lexsort((starts, cell))
    cell, starts, ends = cell[order], starts[order], ends[order]
    times = np.unique(ends)
    reach = np.maximum.accumulate(cell * (len(times) + 1) + np.searchsorted(times, ends))
    reach = times[reach - cell * (len(times) + 1)]
    opens = np.ones(len(cell), bool)
    opens[1:] = (cell[1:] != cell[:-1]) | (starts[1:] > reach[:-1])
    closes = np.append(opens[1:], True)
    size = (edge_at[1:] - edge_at[:-1])[cell]  # a cell lies below its group's top edge
    return (np.concatenate([starts[opens], reach[closes]]),
            np.concatenate([size[opens], -size[closes]]))


def load_profile(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """The live load as a step function: ``(times, loads)``.

    ``loads[i]`` bytes are live on ``[times[i], times[i + 1])``; the last load
    is 0. Sort-based, O(n log n) for buffers without aliases; alias groups by
    their cells (`_cells_events`), and a group whose optional aliases
    contradict each other by a loop over its segments, O(m^2 log m).
    """
    sizes = problem.sizes
    if len(problem) == 0:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    root, delta, dropped = _alias_components(problem)
    ambiguous = np.zeros(len(problem), bool)
    ambiguous[root[problem.alias_src[dropped]]] = True
    counts = np.bincount(root, minlength=len(problem))
    single = counts[root] == 1
    event_times = [problem.starts[single], problem.ends[single]]
    event_bytes = [sizes[single], -sizes[single]]
    grouped = np.flatnonzero(~single & ~ambiguous[root])
    if len(grouped):
        times, changes = _cells_events(problem, grouped, root[grouped], delta)
        event_times.append(times)
        event_bytes.append(changes)
    cautious = np.flatnonzero(~single & ambiguous[root])
    if len(cautious):
        order = cautious[np.argsort(root[cautious], kind="stable")]
        for members in np.split(order, np.flatnonzero(np.diff(root[order])) + 1):
            times, changes = _cautious_events(problem, members, delta,
                                              problem.alias_groups[0])
            event_times.append(np.array(times, np.int64))
            event_bytes.append(np.array(changes, np.int64))
    all_times = np.concatenate(event_times)
    all_bytes = np.concatenate(event_bytes)
    times, inverse = np.unique(all_times, return_inverse=True)
    change = np.zeros(len(times), np.int64)
    np.add.at(change, inverse, all_bytes)
    return times, np.cumsum(change)


def live_bytes(problem: Problem) -> np.ndarray:
    """The live load at every step ``0 .. horizon - 1`` (operator widths); O(n + horizon)."""
    times, loads = load_profile(problem)
    horizon = problem.horizon
    width = np.zeros(horizon, np.int64)
    for i in range(len(times) - 1):
        width[times[i]:times[i + 1]] = loads[i]
    return width


def live_load_bound(problem: Problem) -> int:
    """The largest live load over time."""
    return int(load_profile(problem)[1].max()) if len(problem) else 0


def clique_bound(problem: Problem) -> int:
    """A heavy clique of the conflict graph (explicit conflicts and lifetime overlaps).

    Steps, for every buffer with an explicit conflict:
    - take its neighbours (explicit, or live at the same time), heaviest first;
    - add each one that conflicts with every buffer taken so far.
    Any clique is a valid bound; greedy, O(c * d^2) for c such buffers of
    degree d. Buffers of one alias group never count as conflicting.
    """
    if len(problem.conflicts) == 0:
        return live_load_bound(problem)
    root, _, _ = _alias_components(problem)
    sizes, starts, ends = problem.sizes, problem.starts, problem.ends
    explicit: dict[int, set[int]] = {}
    for a, b in problem.conflicts.tolist():
        explicit.setdefault(a, set()).add(b)
        explicit.setdefault(b, set()).add(a)

    def conflict(a: int, b: int) -> bool:
        if root[a] == root[b]:
            return False
        return b in explicit.get(a, ()) or (starts[a] < ends[b] and starts[b] < ends[a])

    best = 0
    for v, neighbours in explicit.items():
        overlapping = np.flatnonzero((starts < ends[v]) & (starts[v] < ends) & (root != root[v]))
        candidates = sorted(neighbours | set(overlapping.tolist()), key=lambda u: -sizes[u])
        clique = [v]
        for u in candidates:
            if u != v and all(conflict(u, w) for w in clique):
                clique.append(u)
        best = max(best, int(sizes[clique].sum()))
    return best


_LOWER_BOUNDS: weakref.WeakKeyDictionary[Problem, int] = weakref.WeakKeyDictionary()


def lower_bound(problem: Problem) -> int:
    """The best cheap lower bound: the live load, or a conflict clique when heavier.
    Computed once per problem (a `Problem` never changes): every plan asks for it."""
    bound = _LOWER_BOUNDS.get(problem)
    if bound is None:
        bound = live_load_bound(problem)
        if len(problem.conflicts):
            bound = max(bound, clique_bound(problem))
        _LOWER_BOUNDS[problem] = bound
    return bound


def time_overlap_count(starts: np.ndarray, ends: np.ndarray) -> int:
    """How many pairs of half-open intervals intersect, without listing them; O(n log n)."""
    order = np.argsort(starts, kind="stable")
    last = np.searchsorted(starts[order], ends[order], side="left")  # first that starts after
    return int(np.maximum(last - np.arange(len(order)) - 1, 0).sum())


def ranked_live_bound(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """A lower bound on the total size of shared objects (each object as large as its
    largest member, no two members of one object live at once): ``sum_k m_k``, where
    ``m_k`` is the largest k-th largest size live at any one step.

    Why it holds: the buffers live at step t sit in distinct objects, so the k largest of
    them (each at least ``s_k(t)``, the k-th largest live size) fill k distinct objects
    of size at least ``s_k(t)``; the k-th largest object is therefore at least
    ``max_t s_k(t) = m_k``, and the objects together at least ``sum_k m_k``. It is never
    below the live load (``sum_k s_k(t)`` for each t). Lifetimes half-open; the live sets
    are read at each start (every largest live set begins at one). O(n log n + sum of
    the live sets' sizes times their log).
    """
    sizes, starts, ends = (np.asarray(a, np.int64) for a in (sizes, starts, ends))
    by_start = np.argsort(starts, kind="stable")
    best = np.zeros(0, np.int64)
    live: list[int] = []  # indices live at the current start
    for k, i in enumerate(by_start.tolist()):
        t = int(starts[i])
        live = [j for j in live if ends[j] > t]
        if ends[i] > t:  # an empty lifetime is never live
            live.append(i)
        if k + 1 < len(by_start) and starts[by_start[k + 1]] == t:
            continue  # read the live set once every buffer starting at t is in
        ranked = np.sort(sizes[live])[::-1]
        if len(ranked) > len(best):
            best = np.concatenate([best, np.zeros(len(ranked) - len(best), np.int64)])
        best[:len(ranked)] = np.maximum(best[:len(ranked)], ranked)
    return int(best.sum())
