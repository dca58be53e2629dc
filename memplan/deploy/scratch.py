"""Scratch buffers: operator workspace placed in the space the activations leave free.

An operator may ask for private workspace for the step it runs: a fixed
size, or a variable size between a minimum (``Buffer.size``) and a maximum
(``Buffer.max_size``), where more runs faster (TFLite-Micro's
``RequestScratchBufferInArena``, CMSIS-NN's buffers). Runtimes plan the
activations first and fit the scratch into the holes at that step, growing
the arena only when nothing fits::

    address                               at step 3 the activations leave two
      ^  +------+  arena top              gaps; the fixed scratch s takes the
      |  | act  |  . . gap 2 . .          smaller one that fits, the variable
      |  +------+  #### s ####            scratch v grows into what is left
      |  | act  |  vvvvvvvvvvvv
      +--+------+----------------> time

Steps of `plan_scratch`:

- the *post-pass* scratch buffers are those of kind ``scratch`` with no
  alias, pin or explicit conflict (the others are planned as activations, at
  their minimum size);
- plan everything else with any registered planner;
- for each lifetime of scratch (a step, in step order): the free gaps of the
  arena beside the buffers placed so far that live then;
- fixed scratch, largest first, into the smallest gap that fits;
- variable scratch, largest minimum first, each to the gap with the most
  room left after the minimums already sent there; the buffers of one gap
  share it in equal shares (water-filling within ``[minimum, maximum]``);
- when no gap inside the arena fits a buffer's minimum, it goes on top of
  the highest buffer live then, at its minimum, and the arena grows.

Cost: O(n) per scratch lifetime to find the live buffers, plus
O(k log k) for its k gaps: O(n * steps) in all. Known limits: one arena (no
memory regions; `memplan.deploy.regions` plans each region with this); a gap is
shared evenly, not by any benefit model. The exact version (peak first,
then the most scratch at that peak) is `memplan.deploy.scratch_exact`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.budget import Budget, Stopwatch
from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Problem
from memplan.registry import plan_with

_OPEN = np.iinfo(np.int64).max  # the top gap has no upper end: the arena may grow into it


def post_pass_scratch(problem: Problem) -> np.ndarray:
    """Mask of the scratch buffers the post-pass places (no alias, pin or explicit conflict)."""
    mask = np.array([kind == "scratch" for kind in problem.kinds], bool)
    mask &= problem.pinned == NO_OFFSET
    for tied in (problem.alias_src, problem.alias_dst, problem.conflicts.ravel()):
        mask[tied] = False
    return mask


def subproblem(problem: Problem, keep: np.ndarray, *, one_arena: bool = False) -> Problem:
    """The buffers ``keep`` (a mask) as a problem of their own, with the aliases and
    conflicts among them; ``one_arena`` drops the memory regions (to plan one of them)."""
    ids = problem.ids
    aliases = [a for a, s, d in zip(problem.aliases, problem.alias_src.tolist(),
                                    problem.alias_dst.tolist(), strict=True)
               if keep[s] and keep[d]]
    conflicts = [(ids[a], ids[b]) for a, b in problem.conflicts.tolist() if keep[a] and keep[b]]
    rows = np.flatnonzero(keep)
    listed = rows.tolist()
    return Problem.from_arrays(
        problem.sizes[rows], problem.starts[rows], problem.ends[rows],
        ids=[ids[i] for i in listed], alignments=problem.alignments[rows],
        pinned=problem.pinned[rows], max_sizes=problem.max_sizes[rows],
        kinds=[problem.kinds[i] for i in listed],
        allowed_regions=None if one_arena else [problem.allowed_regions[i] for i in listed],
        aliases=aliases, conflicts=conflicts, capacity=problem.capacity, widths=problem.widths,
        regions=() if one_arena else problem.regions, name=problem.name,
        source=problem.source, steps=problem.steps)


def align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def _water_fill(minimum: np.ndarray, maximum: np.ndarray, room: int) -> np.ndarray:
    """Equal shares of ``room`` clamped to ``[minimum, maximum]``; the minimums when short."""
    if maximum.sum() <= room:
        return maximum.copy()
    if minimum.sum() >= room:
        return minimum.copy()
    low, high = 0, int(maximum.max())
    while low < high:  # the highest level whose clamped shares still fit
        level = (low + high + 1) // 2
        if np.clip(level, minimum, maximum).sum() <= room:
            low = level
        else:
            high = level - 1
    return np.clip(low, minimum, maximum)


@dataclass
class Layout:
    """Offsets and granted sizes as a pass fills them in; ``placed`` marks the buffers that
    count as obstacles, ``arena`` is the highest top so far."""

    problem: Problem
    offsets: np.ndarray
    sizes: np.ndarray
    placed: np.ndarray
    arena: int

    def gaps(self, start: int, end: int) -> list[list[int]]:
        """Free ``[lo, hi)`` ranges beside the placed buffers live in ``[start, end)``; the
        last one is open above."""
        p = self.problem
        live = self.placed & (p.starts < end) & (p.ends > start)
        lows, highs = self.offsets[live], self.offsets[live] + self.sizes[live]
        order = np.argsort(lows)
        gaps, reach = [], 0
        for lo, hi in zip(lows[order].tolist(), highs[order].tolist(), strict=True):
            if lo > reach:
                gaps.append([reach, lo])
            reach = max(reach, hi)
        gaps.append([reach, _OPEN])
        return gaps

    def put(self, idx: int, offset: int, size: int) -> None:
        self.offsets[idx], self.sizes[idx], self.placed[idx] = offset, size, True
        self.arena = max(self.arena, offset + size)

    def room(self, gap: list[int]) -> int:
        return min(gap[1], self.arena) - gap[0]

    def place_fixed(self, gaps: list[list[int]], idx: int) -> None:
        """Into the smallest gap that fits inside the arena, else on top (the arena grows)."""
        size, alignment = int(self.sizes[idx]), int(self.problem.alignments[idx])
        fitting = [g for g in gaps if align(g[0], alignment) + size <= min(g[1], self.arena)]
        gap = min(fitting, key=self.room) if fitting else gaps[-1]
        offset = align(gap[0], alignment)
        self.put(idx, offset, size)
        gaps.remove(gap)
        for lo, hi in ((gap[0], offset), (offset + size, gap[1])):
            if hi > lo:
                gaps.append([lo, hi])
        gaps.sort()

    def place_variable(self, gaps: list[list[int]], members: list[int]) -> None:
        """Send each to the roomiest gap left, then share every gap in equal parts."""
        p = self.problem
        need = {i: int(p.sizes[i] + p.alignments[i] - 1) for i in members}
        sent: dict[int, list[int]] = {}
        left = [self.room(g) for g in gaps]
        for i in members:
            k = int(np.argmax(left))
            if left[k] < need[i]:
                k = len(gaps) - 1  # nothing fits: on top, at the minimum
            sent.setdefault(k, []).append(i)
            left[k] -= need[i]
        for k, group in sent.items():
            lo = gaps[k][0]
            padding = sum(int(p.alignments[i]) - 1 for i in group)
            shares = _water_fill(p.sizes[group], p.max_sizes[group],
                                 max(0, self.room(gaps[k]) - padding))
            for i, share in zip(group, shares.tolist(), strict=True):
                offset = align(lo, int(p.alignments[i]))
                self.put(i, offset, share)
                lo = offset + share


def place_scratch(problem: Problem, offsets: np.ndarray, scratch: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and granted sizes: the buffers outside the mask ``scratch`` stay at ``offsets``,
    the scratch buffers are placed as the module doc says."""
    placed = ~scratch
    layout = Layout(problem, np.where(placed, offsets, 0).astype(np.int64),
                     problem.sizes.copy(), placed.copy(), 0)
    if placed.any():
        layout.arena = int((layout.offsets + layout.sizes)[placed].max())
    members = np.flatnonzero(scratch)
    lifetimes = sorted({(int(problem.starts[i]), int(problem.ends[i])) for i in members})
    variable = problem.max_sizes > problem.sizes
    for start, end in lifetimes:
        here = members[(problem.starts[members] == start) & (problem.ends[members] == end)]
        by_size = here[np.argsort(-problem.sizes[here], kind="stable")].tolist()
        gaps = layout.gaps(start, end)
        for idx in by_size:
            if not variable[idx]:
                layout.place_fixed(gaps, idx)
        layout.place_variable(gaps, [i for i in by_size if variable[i]])
    return layout.offsets, layout.sizes


def scratch_stats(problem: Problem, sizes: np.ndarray) -> dict[str, int]:
    """How much variable scratch was asked for and how much the plan grants."""
    variable = problem.max_sizes > problem.sizes
    return {"scratch_variable": int(variable.sum()),
            "scratch_minimum": int(problem.sizes[variable].sum()),
            "scratch_maximum": int(problem.max_sizes[variable].sum()),
            "scratch_granted": int(np.asarray(sizes)[variable].sum())}


def plan_scratch(problem: Problem, *, planner: str = "best", time_limit: float | None = None,
                 seed: int = 0, budget: Budget | None = None, **options) -> Plan:
    """Plan the activations with ``planner``, then place the scratch buffers (module doc).

    ``options`` go to the activation planner, with ``budget`` (a caller's) or one of
    ``time_limit``. The plan's ``sizes`` are the granted sizes; ``stats`` says how much
    variable scratch was granted.
    """
    if problem.regions:
        raise ProblemError("the scratch post-pass plans one arena; plan problems with memory "
                           "regions through memplan.deploy.regions", file=problem.source)
    watch = Stopwatch()
    scratch = post_pass_scratch(problem)
    offsets = np.zeros(len(problem), np.int64)
    stats: dict = {"activation_planner": planner}
    if (~scratch).any():
        rest = plan_with(planner, subproblem(problem, ~scratch),
                         budget=Budget.of_limit(time_limit) if budget is None else budget,
                         seed=seed, **options)
        offsets[~scratch] = rest.offsets
        stats.update(activation_arena=rest.arena_size, activation_status=rest.status)
    offsets, sizes = place_scratch(problem, offsets, scratch)
    stats.update(scratch_stats(problem, sizes))
    return Plan.from_offsets(problem, offsets, planner=f"scratch+{planner}",
                             seconds=watch.elapsed(), sizes=sizes, stats=stats)
