"""What a runtime needs to replay a plan: allocation and release events, and live blocks.

A runtime that does not read offsets from a header replays the plan: at
each step it releases the buffers whose lifetime ended and places the ones
that begin, at the planned offsets. A block-pool allocator instead needs to
know how many blocks it must hold at once::

    step     0        1        2        3
    release  -        -        a        b
    place    a@0      b@64     c@0      d@64     max live blocks: 2

Buffers joined by aliases the plan honours (in-place outputs, views, Concat
slices) share one block: a block is live while any of its buffers is.

Steps:
- `events`: group the buffers' starts and ends by step, releases first
  (lifetimes are half-open, so what ends at t is free for what starts at t);
- `live_blocks`: merge each alias group's member lifetimes, then sweep the
  merged intervals' starts and ends.

Both are O(n log n) for n buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memplan.plan import Plan
from memplan.problem import Problem, alias_components


@dataclass(frozen=True)
class Placement:
    """One buffer placed at a step: where, how large, and in which region (index)."""

    id: str
    offset: int
    size: int
    region: int = 0


@dataclass(frozen=True)
class StepEvents:
    """What happens at one step: releases first, then placements."""

    step: int
    releases: tuple[str, ...]
    placements: tuple[Placement, ...]


def events(problem: Problem, plan: Plan) -> list[StepEvents]:
    """The plan's events, one entry per step where something starts or ends, in step order."""
    sizes = problem.sizes if plan.sizes is None else plan.sizes
    regions = np.zeros(len(problem), np.int64) if plan.regions is None else plan.regions
    releases: dict[int, list[str]] = {}
    placements: dict[int, list[Placement]] = {}
    for idx in np.lexsort((plan.offsets, problem.starts)).tolist():
        placements.setdefault(int(problem.starts[idx]), []).append(Placement(
            problem.ids[idx], int(plan.offsets[idx]), int(sizes[idx]), int(regions[idx])))
    for idx in np.argsort(problem.ends, kind="stable").tolist():
        releases.setdefault(int(problem.ends[idx]), []).append(problem.ids[idx])
    return [StepEvents(step, tuple(releases.get(step, ())), tuple(placements.get(step, ())))
            for step in sorted(releases.keys() | placements.keys())]


def blocks(problem: Problem, plan: Plan | None = None) -> np.ndarray:
    """A block label per buffer: buffers joined by honoured aliases share one.

    Without a plan, mandatory aliases only; with one, also the optional
    aliases the plan took (``offset[dst] == offset[src] + delta``).
    """
    taken = ~problem.alias_optional
    if plan is not None and len(problem.aliases):
        offsets = plan.offsets
        taken |= offsets[problem.alias_dst] == offsets[problem.alias_src] + problem.alias_delta
    root, _, _ = alias_components(problem, np.flatnonzero(taken))
    return root


def live_blocks(problem: Problem, plan: Plan | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The number of live blocks as a step function ``(times, counts)``, like `load_profile`."""
    if len(problem) == 0:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    label = blocks(problem, plan)
    order = np.lexsort((problem.starts, label))
    starts, ends, label = problem.starts[order], problem.ends[order], label[order]
    merged_starts, merged_ends = [], []
    for k in range(len(order)):  # merge the lifetimes of one block that touch or overlap
        if k and label[k] == label[k - 1] and starts[k] <= merged_ends[-1]:
            merged_ends[-1] = max(merged_ends[-1], int(ends[k]))
        else:
            merged_starts.append(int(starts[k]))
            merged_ends.append(int(ends[k]))
    times, inverse = np.unique(np.r_[merged_starts, merged_ends], return_inverse=True)
    change = np.zeros(len(times), np.int64)
    np.add.at(change, inverse, np.r_[np.ones(len(merged_starts)), -np.ones(len(merged_ends))]
              .astype(np.int64))
    return times, np.cumsum(change)


def max_live_blocks(problem: Problem, plan: Plan | None = None) -> int:
    """The most blocks live at once: what a block-pool allocator must hold."""
    return int(live_blocks(problem, plan)[1].max())
