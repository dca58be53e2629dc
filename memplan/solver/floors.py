"""Floors above the live load: fit probes at the floor on relaxations of a part.

The live load bounds every peak from below, and when the optimum is higher
only a proof that nothing fits at the floor can raise it. A fit search of the
whole part at the floor (the canonical search, exhausted) is such a proof,
but on large parts it rarely ends. A *relaxation* is a smaller problem that
every layout of the part turns into a layout of the same peak; when nothing
fits it at height h, nothing fits the part either, so its optimum is above h.

Relaxations (all problems for the canonical search):

- **sections**: keep a set S of the part's time sections (`canonical
  .sections`), each buffer occupying the sections of S inside its lifetime,
  with S's ranks as time. Two buffers that share a section of S overlap in
  time, so a layout of the part is a layout of this; buffers live in no
  section of S drop out::

      sections     0 1 2 3 4 5 6        S = {1, 2, 5} (tight: slack <= s)
      a              ====               a: [0, 2)   (sections 1, 2 of S)
      b                ========         b: [1, 3)   (sections 2, 5 of S)
      c            ==                   c: dropped  (section 0 only)

  Two families, each growing: *tight* sections (slack, the height minus the
  live load, at most s, for s rising through the slacks that occur) and
  *windows* (consecutive sections around the tightest one, doubling). Only
  the whole part (every section kept) gives layouts of the part: a sparse S
  can keep every buffer and still leave out the section where two meet;
- **spanning buffers**: a buffer live in every section of a relaxation
  overlaps all the others; any layout can move it to the top (the ones above
  it move down by its size), so it leaves, and its size comes off the height.
  Exact, not a relaxation; only when its size is a multiple of every
  alignment (the moves keep offsets aligned).

Steps (`raise_floor`): the relaxations in order of size (buffers kept), the
whole part last; each is probed at the floor h by the canonical search with
a budget (an equal share of the time or node budget left): a layout sends
the next one, none proves h + 1 a floor and the same relaxation is probed at
h + 1; a probe that runs out of budget is given up. Cost: the probes'
budgets; building a relaxation is O(n log n + s).

Known limits: on MiniMalloc's D and J every relaxation small enough to
settle packs at the live load, and the larger ones are not settled in
minutes (see BENCHMARKS.md); the proof is then the exact planner's usual
one, CP-SAT's bound or an exhausted fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memplan.budget import Stopwatch
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.solver import canonical
from memplan.validate import validate

MAX_RUNGS = 12  # most relaxations of each family (tight, windows) on the ladder
MIN_PROBE_NODES = 2_000  # the smallest node budget one probe gets


@dataclass(frozen=True)
class Relaxation:
    """A problem whose optimum bounds the part's from below (see the module doc)."""

    name: str  # what it keeps, e.g. "tight<=18" or "window[10, 42)" or "whole"
    problem: Problem  # buffers live in its sections, time as section ranks
    widths: np.ndarray  # the kept buffers' lifetimes in the part's time (for the orders)
    lift: int  # the sizes of the spanning buffers taken out: add to its height
    kept: np.ndarray  # the part's buffers that it keeps, in its order
    spanning: np.ndarray  # the part's buffers taken out as spanning
    whole: bool  # every section kept: not a relaxation, the part itself (spanning out)


@dataclass
class Lifted:
    """What `raise_floor` proved, and how far each probe got."""

    floor: int  # proven: no layout of the part has a smaller peak
    offsets: np.ndarray | None = None  # a layout of the part at the floor, if one was found
    nodes: int = 0  # the probes' nodes, all together
    interrupted: bool = False  # stopped by ``stop`` or Ctrl-C
    probes: list = field(default_factory=list)  # (relaxation, height, status, nodes)


def relax(problem: Problem, keep: np.ndarray, name: str, widths=None) -> Relaxation | None:
    """The relaxation of ``problem`` to the sections ``keep`` (sorted indices); None if empty."""
    first, end, totals = canonical.sections(problem)
    keep = np.asarray(keep, np.int64)
    lo, hi = np.searchsorted(keep, first), np.searchsorted(keep, end)
    live = hi > lo
    if not live.any():
        return None
    widths = problem.ends - problem.starts if widths is None else np.asarray(widths)
    sizes, alignments = problem.sizes[live], problem.alignments[live]
    starts, ends, widths = lo[live], hi[live], widths[live]
    common = int(np.lcm.reduce(alignments))
    spanning = (starts == 0) & (ends == len(keep)) & (sizes % common == 0)
    if spanning.all():  # one must stay: the height is then its size plus the others'
        spanning[np.argmax(sizes)] = False
    lift = int(sizes[spanning].sum())
    rest = ~spanning
    relaxed = Problem.from_arrays(sizes[rest], starts[rest], ends[rest],
                                  alignments=alignments[rest], name=name)
    live = np.flatnonzero(live)
    whole = bool(np.array_equal(keep, np.arange(len(totals))))
    return Relaxation(name, relaxed, widths[rest], lift, live[rest], live[spanning], whole)


def restore(problem: Problem, relaxation: Relaxation, offsets: np.ndarray) -> np.ndarray | None:
    """A layout of ``problem`` from one of its whole relaxation (spanning buffers on top).

    None unless the relaxation is the whole part (every section kept): a relaxation's
    layout may overlap in the sections it left out. The layout is checked by the
    validator all the same (None if it fails).
    """
    if not relaxation.whole or len(relaxation.kept) + len(relaxation.spanning) != len(problem):
        return None
    layout = np.empty(len(problem), np.int64)
    layout[relaxation.kept] = offsets
    top = int((offsets + relaxation.problem.sizes).max(initial=0))
    for b in relaxation.spanning.tolist():
        top += -top % int(problem.alignments[b])
        layout[b] = top
        top += int(problem.sizes[b])
    if validate(problem, Plan.from_offsets(problem, layout, planner="floors")):
        return None
    return layout


def ladder(problem: Problem, height: int, widths=None) -> list[Relaxation]:
    """The relaxations to probe at ``height``, smallest first, the whole part last."""
    _, _, totals = canonical.sections(problem)
    slack = height - totals
    rungs: dict[tuple, Relaxation] = {}

    def add(keep: np.ndarray, name: str):
        relaxation = relax(problem, keep, name, widths)
        if relaxation is None or len(relaxation.problem) == len(problem):
            return
        p = relaxation.problem
        key = (relaxation.lift, p.sizes.tobytes(), p.starts.tobytes(), p.ends.tobytes(),
               p.alignments.tobytes())
        rungs.setdefault(key, relaxation)

    levels = np.unique(slack)
    for s in levels[np.unique(np.linspace(0, len(levels) - 1, MAX_RUNGS).astype(int))]:
        add(np.flatnonzero(slack <= s), f"tight<={int(s)}")
    center, count = int(np.argmin(slack)), len(totals)
    for k in range(MAX_RUNGS):
        half = 1 << k
        lo, hi = max(0, center - half + 1), min(count, center + half)
        add(np.arange(lo, hi), f"window[{lo}, {hi})")
        if lo == 0 and hi == count:
            break
    order = sorted(rungs.values(), key=lambda r: (len(r.problem), r.name))
    whole = relax(problem, np.arange(len(totals)), "whole", widths)
    return order + ([] if whole is None else [whole])


def raise_floor(problem: Problem, floor: int, *, seconds: float | None = None,
                nodes: int | None = None, cpu: float | None = None, threads: int = 1,
                stop=None, widths=None, on_floor=None) -> Lifted:
    """Prove floors above ``floor`` for ``problem`` (plain: see `canonical.plain`).

    ``cpu`` (CPU seconds of the probes' threads, `canonical.Race.cpu`) or ``nodes``
    (deterministic) bound the whole effort, shared equally by the probes left; ``seconds``
    (wall) caps it; ``on_floor(floor)`` reports each rise.
    Returns the highest floor proven (``floor`` if none), and the layout of
    the part that the whole relaxation found, if it fits (not always at the
    floor: the spanning buffers' alignment may lift it).
    """
    watch = Stopwatch()
    lifted = Lifted(floor)
    rungs = ladder(problem, floor, widths)
    spent, used, i = 0, 0.0, 0  # nodes, CPU seconds
    while i < len(rungs):
        if stop is not None and stop.is_set():
            lifted.interrupted = True
            break
        left = None if seconds is None else seconds - watch.elapsed()
        budget = None if nodes is None else nodes - spent
        cpu_left = None if cpu is None else cpu - used
        if any(rest is not None and rest <= 0 for rest in (left, budget, cpu_left)):
            break
        share = len(rungs) - i
        rung = rungs[i]
        height = lifted.floor - rung.lift
        race = canonical.Race(rung.problem, height, widths=rung.widths,
                              node_budget=None if budget is None
                              else max(budget // share, MIN_PROBE_NODES))
        race.start(threads, left if cpu is not None else None if left is None else left / share,
                   None if cpu_left is None else cpu_left / share)
        lifted.interrupted = canonical.wait(race, None, stop)
        race.cancel()
        used += race.cpu()
        verdict = race.result()
        spent += verdict.stats["nodes"]
        lifted.nodes = spent
        lifted.probes.append((rung.name, lifted.floor, verdict.status, verdict.stats["nodes"]))
        if verdict.status == "feasible" and lifted.offsets is None:
            lifted.offsets = restore(problem, rung, verdict.offsets)
        if verdict.status == "infeasible":  # a proof, even if interrupted right after
            lifted.floor += 1
            if on_floor is not None:
                on_floor(lifted.floor)
        else:
            i += 1  # else the same relaxation, one higher
        if lifted.interrupted:
            break
    return lifted
