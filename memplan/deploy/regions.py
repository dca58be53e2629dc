"""Memory regions: fast on-chip SRAM first, slow external DRAM for what does not fit.

A device has several memory pools (`Region`: name, capacity, cost per byte);
a buffer may list the regions it may use, preferred first. A plan puts each
buffer in one region (``Plan.regions``, an index) at an offset *inside* that
region; buffers of different regions never share bytes. Two objectives,
each within every region's capacity (`OBJECTIVES`):

- ``cost`` (the default): every buffer's bytes times its region's cost per
  byte (the bytes that live in slow memory, weighted), each buffer's bytes
  times its ``reads`` entry when given (how often it is read: the traffic
  to slow memory);
- ``arena``: every region's top (its arena) times its cost per byte: the
  smallest slow arena, for a model that must fit a given external memory;
  the cost breaks ties (`memplan.deploy.regions_exact` plans it; the
  heuristic below gives its warm start).

::

    SRAM (cost 0, 256 KiB)   | a | c  e |        short-lived, hot buffers
    DRAM (cost 1)            |    b     | d |   what the SRAM could not hold

The heuristic (`plan_regions`), steps:

- units: buffers tied by mandatory aliases go to one region together;
- order the units by benefit: preferred region first, then bytes per step
  of lifetime (the cost saved per byte-step of fast memory they occupy),
  then size;
- each unit goes to the cheapest region it may use whose live load (bytes
  live at each step of its lifetime) still fits the capacity;
- plan each region's buffers with any registered planner (through the
  scratch post-pass, so variable scratch grows into each region's gaps);
- a region whose plan ends above its capacity (fragmentation) sends its
  units above the capacity to their next cheapest region, and is planned
  again; repeated until every region fits or a unit has nowhere left to go;
- refill: in benefit order, a buffer in a dearer region than it could use
  moves down into the lowest free gap of a cheaper region that fits.

Cost: O(n log n) for the assignment (one live-load array per region), plus
one planner run per region and per eviction round. Known limits: optional
aliases between buffers of different regions are simply not taken; the cost
counts each buffer's minimum size; the heuristic minimises the cost, whatever
the objective. The exact version is `memplan.deploy.regions_exact`.
"""

from __future__ import annotations

import numpy as np

from memplan.bounds import live_bytes, lower_bound
from memplan.budget import Budget, Stopwatch
from memplan.deploy.scratch import Layout, align, plan_scratch, subproblem
from memplan.errors import ProblemError, renamed, renamed_keyword
from memplan.groups import AliasUnits, alias_units
from memplan.plan import Plan, plan_status
from memplan.problem import NO_OFFSET, Problem

_UNBOUNDED = np.iinfo(np.int64).max // 4  # the capacity of a region without one
OBJECTIVES = ("cost", "arena")  # what a region plan minimises (module docstring)


def allowed_matrix(problem: Problem) -> np.ndarray:
    """``allowed[i, r]``: buffer i may go to region r (all of a mandatory alias group's
    members must allow it); raises `ProblemError` for a buffer with no region left."""
    names = [r.name for r in problem.regions]
    allowed = np.ones((len(problem), len(names)), bool)
    for i, regions in enumerate(problem.allowed_regions):
        if regions is not None:
            allowed[i] = [name in regions for name in names]
    unit_of = alias_units(problem).unit_of
    together = np.ones((unit_of.max(initial=-1) + 1, len(names)), bool)
    np.logical_and.at(together, unit_of, allowed)
    allowed = together[unit_of]
    empty = ~allowed.any(axis=1)
    if empty.any():
        idx = int(np.flatnonzero(empty)[0])
        raise ProblemError("no region that every buffer of its alias group may use",
                           file=problem.source, buffer=problem.ids[idx])
    return allowed


def checked_reads(problem: Problem, reads=None) -> np.ndarray:
    """Per buffer, how many times its bytes count in the cost (1 each when None); refused
    with `ProblemError` unless one finite number >= 0 per buffer."""
    if reads is None:
        return np.ones(len(problem))
    reads = np.asarray(reads, float)
    if reads.shape != (len(problem),) or not np.isfinite(reads).all() or (reads < 0).any():
        raise ProblemError(f"reads must be one finite number >= 0 per buffer "
                           f"({len(problem)}), got shape {reads.shape}", file=problem.source)
    return reads


def region_cost(problem: Problem, regions: np.ndarray, reads=None) -> float:
    """Every buffer's (minimum) size, times its weight, times its region's cost per byte."""
    costs = np.array([r.cost for r in problem.regions], float)
    weighted = problem.sizes * checked_reads(problem, reads)
    return float((weighted * costs[np.asarray(regions)]).sum())


def arena_cost(problem: Problem, region_sizes: dict[str, int]) -> float:
    """Every region's top (its arena, ``region_sizes`` by name) times its cost per byte."""
    return float(sum(r.cost * region_sizes.get(r.name, 0) for r in problem.regions))


def cost_bound(problem: Problem, reads=None) -> float:
    """A lower bound on the cost: each buffer in the cheapest region it may use, plus what
    the capacities force out of the cheaper regions, step by step.

    At step t the buffers that may use every region need ``load(t)`` bytes;
    what exceeds the capacities of the k cheapest regions lives in a dearer
    one, each byte costing at least the next cost step more, times its
    weight: at least the lightest bytes live at t (`_forced_out`, a fractional
    knapsack). Steps whose live buffers are disjoint (no buffer lives through
    both) pay for different bytes, so their costs add up: the bound takes the
    dearest chain of such steps. Buffers tied by aliases count only in the
    busiest step's load, at the smallest weight. O((n + events * regions) log n), events
    the steps where a buffer starts or ends.
    """
    costs = np.array([r.cost for r in problem.regions], float)
    reads = checked_reads(problem, reads)
    allowed = allowed_matrix(problem)
    cheapest = np.where(allowed, costs, np.inf).min(axis=1)
    base = float((problem.sizes * reads * cheapest).sum())
    anywhere = allowed.all(axis=1)
    if len(costs) < 2 or not anywhere.any():
        return base
    order = np.argsort(costs, kind="stable").tolist()
    rooms, room = [], 0  # (bytes the k cheapest regions hold, the next cost step)
    for below, above in zip(order[:-1], order[1:], strict=True):
        capacity = problem.regions[below].capacity
        if capacity is None:
            break
        room += capacity
        rooms.append((room, float(costs[above] - costs[below])))
    load = live_bytes(subproblem(problem, anywhere, one_arena=True)).astype(float)
    extra = np.zeros_like(load)
    for room, step in rooms:
        extra += np.maximum(0, load - room) * step
    aliased = np.zeros(len(problem), bool)
    aliased[problem.alias_src] = aliased[problem.alias_dst] = True
    lightest = _forced_out(problem, reads, anywhere & ~aliased, rooms)
    return base + max(float(extra.max()) * float(reads[anywhere].min()), lightest)


def _forced_out(problem: Problem, reads: np.ndarray, members: np.ndarray,
                rooms: list[tuple[int, float]]) -> float:
    """The least weighted cost the ``members`` pay above their cheapest region: the
    dearest chain of steps with disjoint live sets, each step's cost the lightest bytes
    live then beyond each room (`cost_bound`).

    Steps: the members sorted by weight, a Fenwick tree of their live bytes and
    weighted bytes over that order; a sweep over the steps adds and removes
    them and, per room, finds the lightest prefix that covers the excess (the
    last buffer in part); ``reach[t]``, the latest end of a member started by
    t, is nondecreasing, and step s may precede t in a chain iff
    ``reach[s] <= t``: a prefix, so the chain is a running maximum. Only the steps
    where a member starts or ends are swept: O(n log n) whatever the horizon.
    """
    index = np.flatnonzero(members)
    horizon = problem.horizon
    if not len(index) or not rooms or horizon == 0:
        return 0.0
    index = index[np.argsort(reads[index], kind="stable")]
    count = len(index)
    rank = {int(i): k + 1 for k, i in enumerate(index.tolist())}
    tree_bytes, tree_cost = [0] * (count + 1), [0.0] * (count + 1)
    top = 1 << count.bit_length()

    def add(i: int, sign: int) -> None:
        size = sign * int(problem.sizes[i])
        cost = size * float(reads[i])
        k = rank[i]
        while k <= count:
            tree_bytes[k] += size
            tree_cost[k] += cost
            k += k & -k

    def lightest(excess: int) -> float:
        position, held, paid, jump = 0, 0, 0.0, top
        while jump:
            nxt = position + jump
            if nxt <= count and held + tree_bytes[nxt] < excess:
                position, held, paid = nxt, held + tree_bytes[nxt], paid + tree_cost[nxt]
            jump >>= 1
        return paid + (excess - held) * float(reads[index[position]])

    # only the steps where a member starts or ends change the live set: the chain runs
    # over those (a step between two has the live set and the reach of the one before)
    events = np.unique(np.concatenate([problem.starts[index], problem.ends[index]]))
    events = events[events < horizon]
    starting = [[] for _ in events]
    ending = [[] for _ in events]
    for i in index.tolist():
        starting[int(np.searchsorted(events, problem.starts[i]))].append(i)
        if problem.ends[i] < horizon:
            ending[int(np.searchsorted(events, problem.ends[i]))].append(i)
    reach = np.zeros(len(events), np.int64)
    best = np.zeros(len(events) + 1)  # best[j]: the dearest chain among events < j
    live, latest = 0, 0
    for k, t in enumerate(events.tolist()):
        for i in ending[k]:
            add(i, -1)
            live -= int(problem.sizes[i])
        for i in starting[k]:
            add(i, 1)
            live += int(problem.sizes[i])
            latest = max(latest, int(problem.ends[i]))
        reach[k] = latest
        paid = sum(step * lightest(live - room) for room, step in rooms if live > room)
        before = int(np.searchsorted(reach[:k], t, side="right"))
        best[k + 1] = max(best[k], paid + best[before])
    return float(best[-1])


def arena_bound(problem: Problem) -> float:
    """A lower bound on the arena cost: at every step, the live bytes in the cheapest room.

    At step t each region holds at least the bytes live then that may use it
    alone; the bytes of the buffers that may use every region fill the
    cheapest room left (capacities less those bytes), and no region's arena is
    below what it holds at any step. The largest such cost over the steps is
    the bound; buffers allowed some but not all regions count in none (sound).
    O(n log n + steps * regions).
    """
    costs = np.array([r.cost for r in problem.regions], float)
    allowed = allowed_matrix(problem)
    only = allowed.sum(axis=1) == 1
    anywhere = allowed.all(axis=1)
    steps = problem.horizon + 1

    def load(mask: np.ndarray) -> np.ndarray:
        at = np.zeros(steps)
        if mask.any():
            width = live_bytes(subproblem(problem, mask, one_arena=True))
            at[:len(width)] = width
        return at

    held = np.array([load(only & allowed[:, r]) for r in range(len(costs))])
    free = load(anywhere) if len(costs) > 1 else np.zeros(steps)
    best = held.copy()
    for r in np.argsort(costs, kind="stable").tolist():  # the free bytes, cheapest room first
        capacity = problem.regions[r].capacity
        room = np.inf if capacity is None else np.maximum(0, capacity - held[r])
        taken = np.minimum(free, room)
        best[r] += taken
        free = free - taken
    return float((costs[:, None] * best).sum(axis=0).max()) if steps else 0.0


def plan_gaps(stats: dict) -> dict[str, float]:
    """Per objective (``cost``, ``arena``), how far a region plan (its ``stats``) may be from
    the optimum, proven (0: optimal): its value against the larger of its bound over every
    plan and the one proven among the plans within a ceiling (``stats["ceiling"]``, the set
    `memplan.deploy.regions_exact` chose from when a ceiling bound it)."""
    inside = stats.get("ceiling", {})
    gaps = {}
    for objective, value, bound in (("cost", "cost", "cost_bound"),
                                    ("arena", "arena_cost", "arena_bound")):
        floor = max(stats[bound], inside.get(bound, 0.0))
        gaps[objective] = max(0.0, stats[value] - floor) / stats[value] \
            if stats[value] > 0 else 0.0
    return gaps


def slow_regions(problem: Problem) -> np.ndarray:
    """Per region, whether it is slow: it costs something per byte (of a target memory
    map's banks, every one but the fastest)."""
    return np.array([r.cost > 0 for r in problem.regions], bool)


def slow_measures(problem: Problem, plan: Plan) -> tuple[int, int]:
    """A region plan's slow bytes (its buffers' minimum sizes in slow regions) and slow
    arena (the slow regions' tops, summed)."""
    slow = slow_regions(problem)
    if not slow.any():
        return 0, 0
    in_slow = slow[plan.regions]
    ends = plan.offsets + (problem.sizes if plan.sizes is None else plan.sizes)
    tops = np.zeros(len(slow), np.int64)
    np.maximum.at(tops, plan.regions, ends)
    return int(problem.sizes[in_slow].sum()), int(tops[slow].sum())


def within(problem: Problem, plan: Plan, ceiling: Plan | None) -> bool:
    """Whether ``plan``'s slow bytes and slow arena are each at most ``ceiling``'s (True
    without a ceiling)."""
    return ceiling is None or all(mine <= theirs for mine, theirs in zip(
        slow_measures(problem, plan), slow_measures(problem, ceiling), strict=True))


def region_tops(problem: Problem, offsets: np.ndarray, regions: np.ndarray,
                sizes: np.ndarray) -> tuple[dict[str, int], list[str]]:
    """Each region's top by name, and the regions whose top is above their capacity."""
    tops = offsets + sizes
    region_sizes = {r.name: int(tops[regions == k].max()) if (regions == k).any() else 0
                    for k, r in enumerate(problem.regions)}
    over = [r.name for k, r in enumerate(problem.regions)
            if min(r.capacity or np.inf, problem.capacity or np.inf) < region_sizes[r.name]]
    return region_sizes, over


def region_plan(problem: Problem, offsets, regions, *, planner: str, seconds: float,
                sizes=None, best_cost: float | None = None, stats=None, reads=None,
                best_arena: float | None = None) -> Plan:
    """A plan over regions: arena size = the sum of the regions' tops, stats with the cost.

    ``best_cost`` is the best proven lower bound on the cost (default
    `cost_bound`); ``stats["cost_optimal"]`` says whether the cost reaches it;
    the same for the arena cost (`arena_cost`, `arena_bound`, ``best_arena``,
    ``stats["arena_optimal"]``). The status means what it means for every plan:
    ``optimal`` when the arena meets the proven bound on bytes, else ``feasible``
    (a cost-optimal plan may have a gap); ``infeasible`` when a region overflows
    its capacity.
    """
    offsets, regions = np.asarray(offsets, np.int64), np.asarray(regions, np.int64)
    used = problem.sizes if sizes is None else np.asarray(sizes, np.int64)
    region_sizes, over = region_tops(problem, offsets, regions, used)
    cost = region_cost(problem, regions, reads)
    bound = max(cost_bound(problem, reads), best_cost or 0.0)
    arena = arena_cost(problem, region_sizes)
    floor = max(arena_bound(problem), best_arena or 0.0)
    bytes_bound = lower_bound(problem)
    status = plan_status(sum(region_sizes.values()), bytes_bound, fits=not over)
    info = dict(stats or {}, region_sizes=region_sizes, cost=cost, cost_bound=bound,
                cost_optimal=not over and cost <= bound + 1e-9, arena_cost=arena,
                arena_bound=floor, arena_optimal=not over and arena <= floor + 1e-9,
                over_capacity=over)
    return Plan(offsets, sum(region_sizes.values()), bytes_bound, status, bytes_bound, planner,
                seconds, info, regions, None if sizes is None else used)


def _preference_order(problem: Problem, units: AliasUnits, allowed: np.ndarray,
                      costs: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """Units by benefit: preferred-region rank, weighted bytes per step, size."""
    unit_of, count = units.unit_of, len(units)
    starts = np.full(count, np.iinfo(np.int64).max)
    ends = np.zeros(count, np.int64)
    np.minimum.at(starts, unit_of, problem.starts)
    np.maximum.at(ends, unit_of, problem.ends)
    total = np.zeros(count, np.int64)  # the members' bytes
    np.add.at(total, unit_of, problem.sizes)
    weighted = np.zeros(count)  # and those bytes times their reads
    np.add.at(weighted, unit_of, problem.sizes * reads)
    first = units.first_member
    cheapest = np.where(allowed[first], costs, np.inf).argmin(axis=1)
    names = [r.name for r in problem.regions]
    rank = np.array([0 if problem.allowed_regions[i] is None
                     or problem.allowed_regions[i][0] == names[cheapest[u]] else 1
                     for u, i in enumerate(first.tolist())])
    density = weighted / (ends - starts)  # weighted bytes per step of lifetime
    return np.lexsort((-total, -density, rank))


def assign(problem: Problem, allowed: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """Each unit to the cheapest allowed region whose live load still fits its capacity."""
    costs = np.array([r.cost for r in problem.regions], float)
    by_cost = np.argsort(costs, kind="stable")
    units = alias_units(problem)
    load = np.zeros((len(problem.regions), problem.horizon + 1), np.int64)
    region = np.full(len(problem), -1, np.int64)
    for unit in _preference_order(problem, units, allowed, costs, reads).tolist():
        group = units.members(unit)
        choices = [r for r in by_cost.tolist() if allowed[group[0], r]]
        for r in choices:
            capacity = problem.regions[r].capacity
            extra = np.zeros(problem.horizon + 1, np.int64)
            for i in group.tolist():
                extra[problem.starts[i]:problem.ends[i]] += problem.sizes[i]
            if capacity is None or r == choices[-1] or (load[r] + extra).max() <= capacity:
                load[r] += extra
                region[group] = r
                break
    return region


def plan_regions(problem: Problem, *, planner: str = "best", time_limit: float | None = None,
                 seed: int = 0, reads=None, weights=None, **options) -> Plan:
    """Assign regions and plan each one with ``planner`` (see the module doc); ``reads`` per
    buffer (how often it is read) multiply its bytes in the cost (``weights``: their old
    name)."""
    reads = renamed_keyword("weights", weights, "reads", reads, where="plan_regions")
    if not problem.regions:
        raise ProblemError("the problem has no memory regions", file=problem.source)
    watch = Stopwatch()
    reads = checked_reads(problem, reads)
    allowed = allowed_matrix(problem)
    region = assign(problem, allowed, reads)
    costs = np.array([r.cost for r in problem.regions], float)
    units = alias_units(problem)
    unit_of, first = units.unit_of, units.first_member
    offsets = np.zeros(len(problem), np.int64)
    sizes = problem.sizes.copy()
    stale = set(range(len(problem.regions)))
    benefit = _preference_order(problem, units, allowed, costs, reads).tolist()

    def _dearer(unit: int, r: int) -> list[int]:
        return [k for k in np.argsort(costs, kind="stable").tolist()
                if allowed[first[unit], k] and (costs[k], k) > (costs[r], r)]

    rounds = 0
    while stale:
        rounds += 1
        plan_each(problem, region, stale, offsets, sizes, planner=planner,
                  time_limit=time_limit, seed=seed, **options)
        stale = set()
        for r, reg in enumerate(problem.regions):
            capacity = min(reg.capacity or _UNBOUNDED, problem.capacity or _UNBOUNDED)
            over = set(unit_of[(region == r) & (offsets + sizes > capacity)].tolist())
            movable = [unit for unit in benefit if unit in over and _dearer(unit, r)]
            if movable:  # the least beneficial goes one region up the cost order
                unit = movable[-1]
                target = _dearer(unit, r)[0]
                region[unit_of == unit] = target
                stale |= {r, target}
    moved = refill(problem, allowed, region, offsets, sizes, reads)
    return region_plan(problem, offsets, region, planner=f"regions+{planner}",
                       seconds=watch.elapsed(), sizes=sizes, reads=reads,
                       stats={"eviction_rounds": rounds, "refilled": moved})


def plan_each(problem: Problem, region: np.ndarray, chosen, offsets: np.ndarray,
              sizes: np.ndarray, *, planner: str = "best", time_limit: float | None = None,
              seed: int = 0, **options) -> None:
    """Plan the buffers of each ``chosen`` region on their own with ``planner`` (through
    the scratch post-pass), each with a budget of ``time_limit`` wall seconds, writing
    their offsets and granted sizes in place."""
    for r in sorted(chosen):
        members = region == r
        if not members.any():
            continue
        plan = plan_scratch(subproblem(problem, members, one_arena=True), planner=planner,
                            budget=Budget.of_limit(time_limit), seed=seed, **options)
        offsets[members], sizes[members] = plan.offsets, plan.sizes


def refill(problem: Problem, allowed: np.ndarray, region: np.ndarray, offsets: np.ndarray,
           sizes: np.ndarray, reads: np.ndarray | None = None) -> int:
    """Move buffers back down the cost order into free space; returns how many moved.

    In benefit order, each buffer alone in its alias group (not pinned, no
    explicit conflict) and not in the cheapest region it may use goes to the
    lowest free gap of a cheaper region that fits below the capacity (its
    variable scratch as large as the gap allows). Leaving a region keeps
    that region's layout valid.
    """
    costs = np.array([r.cost for r in problem.regions], float)
    units = alias_units(problem)
    free = (np.bincount(units.unit_of)[units.unit_of] == 1) & (problem.pinned == NO_OFFSET)
    free[problem.conflicts.ravel()] = False
    moved = 0
    order = _preference_order(problem, units, allowed, costs,
                              checked_reads(problem, reads))
    for unit in order.tolist():
        idx = int(units.first_member[unit])
        if not free[idx]:
            continue
        for k in np.argsort(costs, kind="stable").tolist():
            if costs[k] >= costs[region[idx]]:
                break
            if not allowed[idx, k]:
                continue
            capacity = min(problem.regions[k].capacity or _UNBOUNDED,
                           problem.capacity or _UNBOUNDED)
            layout = Layout(problem, offsets, sizes, region == k, 0)
            alignment, need = int(problem.alignments[idx]), int(problem.sizes[idx])
            for lo, hi in layout.gaps(int(problem.starts[idx]), int(problem.ends[idx])):
                offset = align(lo, alignment)
                room = min(hi, capacity) - offset
                if room >= need:
                    region[idx], offsets[idx] = k, offset
                    sizes[idx] = min(int(problem.max_sizes[idx]), room)
                    moved += 1
                    break
            if region[idx] == k:
                break
    return moved


__getattr__ = renamed(__name__, {"checked_weights": "checked_reads"})
