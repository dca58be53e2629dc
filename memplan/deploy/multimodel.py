"""Several models in one arena: combine their problems, plan once, split the plan back.

A device that holds several models shares one arena between them. How they
may share it depends on whether they can run at the same time:

- ``exclusive`` (never at the same time): the time axes are concatenated, so
  no buffer of one model is live together with a buffer of another and they
  may reuse each other's bytes::

      address                      model a: steps [0, 4)
        ^  +--a--+   +--b--+       model b: steps [4, 7), shifted by 4
        |  +-----+---+-----+--->   time

- ``concurrent`` (may run together): every buffer of one model conflicts
  with every buffer of the other. Listing those pairs costs n_a * n_b, and
  no arrangement of lifetimes on one time axis can say it (the join of two
  interval graphs holds induced 4-cycles, which interval graphs never do).
  So each model gets its own *region* of the combined problem: buffers of
  different regions never share bytes, each model is planned in its own
  region, and the regions are laid end to end in the arena (``bases``).
  This is exact: when two sets of buffers may not share a byte, squeezing
  out the other model's bytes turns any joint layout into one per model no
  larger than its share, so stacked optimal plans are optimal (with
  alignment 1 and no pinned buffers; otherwise the stacked plan is valid and
  the proven bound is the sum of the live-load bounds).

Buffer ids become ``model/id``; aliases, conflicts, pinned offsets, kinds and
variable scratch sizes carry over. Steps of `combine`: check the names,
shift each model's lifetimes (exclusive) or give it a region (concurrent),
prefix ids, concatenate. O(n) for n buffers in all. Known limit: concurrent
models that use memory regions themselves are refused (the two uses of
regions would clash).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from memplan.deploy.replay import StepEvents, events, max_live_blocks
from memplan.errors import ProblemError
from memplan.plan import Plan, plan_status
from memplan.problem import NO_OFFSET, Alias, Problem, Region

Mode = Literal["exclusive", "concurrent"]
MODES: tuple[str, ...] = ("exclusive", "concurrent")
SEPARATOR = "/"  # between the model name and the buffer id


@dataclass(frozen=True)
class MultiModel:
    """The combined problem and where each model sits in it."""

    problem: Problem  # all buffers of all models, ids "model/id"
    mode: str  # "exclusive" or "concurrent"
    names: tuple[str, ...]  # model names, in order
    parts: tuple[Problem, ...]  # each model's own problem
    first: tuple[int, ...]  # position of each model's first buffer in `problem`
    shifts: tuple[int, ...]  # how far each model's lifetimes moved (exclusive)

    def members(self, k: int) -> slice:
        """The positions of model ``k``'s buffers in the combined problem."""
        return slice(self.first[k], self.first[k] + len(self.parts[k]))

    def bases(self, plan: Plan) -> np.ndarray:
        """Where each model's part of the arena begins: 0 for all when exclusive."""
        if self.mode == "exclusive":
            return np.zeros(len(self.parts), np.int64)
        return np.array(plan.stats["model_bases"], np.int64)

    def arena_offsets(self, plan: Plan) -> np.ndarray:
        """Every buffer's offset in the one shared arena (regions laid end to end)."""
        if self.mode == "exclusive":
            return plan.offsets.copy()
        region = plan.regions if plan.regions is not None else np.zeros(len(self.problem), int)
        return plan.offsets + self.bases(plan)[region]

    def split(self, plan: Plan) -> dict[str, Plan]:
        """Each model's own plan: offsets in the shared arena, ids of its own problem.

        A model's ``arena_size`` is the top of its own buffers; the shared
        arena is ``plan.arena_size`` (also in each plan's ``stats``). For
        concurrent models the offsets include the model's base, so a pinned
        offset reads as relative to that base.
        """
        offsets = self.arena_offsets(plan)
        sizes = self.problem.sizes if plan.sizes is None else plan.sizes
        plans = {}
        for k, (name, part) in enumerate(zip(self.names, self.parts, strict=True)):
            members = self.members(k)
            granted = None if plan.sizes is None else sizes[members]
            plans[name] = Plan.from_offsets(
                part, offsets[members], planner=plan.planner, seconds=plan.seconds,
                sizes=granted, stats={"shared_arena_size": plan.arena_size,
                                      "model_base": int(self.bases(plan)[k])})
        return plans


def _named(problems: Mapping[str, Problem] | Sequence[Problem]) -> dict[str, Problem]:
    if isinstance(problems, Mapping):
        named = dict(problems)
    else:
        named = {}
        for k, problem in enumerate(problems):
            name = problem.name or f"model{k}"
            named[name if name not in named else f"{name}{k}"] = problem
    for name in named:
        if not name or SEPARATOR in name:
            raise ProblemError(f"model name {name!r} must be non-empty and free of "
                               f"{SEPARATOR!r}")
    if not named:
        raise ProblemError("no models to combine")
    return named


def _shared_regions(named: dict[str, Problem]) -> list[Region]:
    regions: dict[str, Region] = {}
    for name, problem in named.items():
        for region in problem.regions:
            if regions.setdefault(region.name, region) != region:
                raise ProblemError(f"model {name!r} defines region {region.name!r} "
                                   f"differently from an earlier model")
    return list(regions.values())


def combine(problems: Mapping[str, Problem] | Sequence[Problem], mode: Mode = "exclusive", *,
            capacity: int | None = None, name: str = "") -> MultiModel:
    """One problem for several models; see the module doc for the two modes.

    ``problems`` maps model names to problems (a sequence is named by each
    problem's ``name``, else ``model0``, ``model1`` ...).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    named = _named(problems)
    if mode == "concurrent":
        if any(p.regions for p in named.values()):
            raise ProblemError("concurrent models are planned in one region each; models "
                               "that use memory regions themselves cannot be combined so")
        regions = [Region(model) for model in named]
    else:
        regions = _shared_regions(named)
    buffers, aliases, conflicts, widths = [], [], [], []
    first, shifts = [], []
    time = 0
    for model, problem in named.items():
        shift = time if mode == "exclusive" else 0
        first.append(len(buffers))
        shifts.append(shift)
        for b in problem.buffers:
            buffers.append(replace(b, id=f"{model}{SEPARATOR}{b.id}", start=b.start + shift,
                                   end=b.end + shift,
                                   regions=(model,) if mode == "concurrent" else b.regions))
        aliases += [Alias(f"{model}{SEPARATOR}{a.src}", f"{model}{SEPARATOR}{a.dst}", a.delta,
                          a.optional) for a in problem.aliases]
        conflicts += [(f"{model}{SEPARATOR}{problem.ids[a]}",
                       f"{model}{SEPARATOR}{problem.ids[b]}")
                      for a, b in problem.conflicts.tolist()]
        span = max(problem.horizon, 0 if problem.widths is None else len(problem.widths))
        if problem.widths is not None:
            widths.append(np.pad(problem.widths, (0, span - len(problem.widths))))
        time += span
    all_widths = len(widths) == len(named) and mode == "exclusive"
    combined = Problem(buffers, aliases=aliases, conflicts=conflicts, capacity=capacity,
                       widths=np.concatenate(widths) if all_widths else None, regions=regions,
                       name=name or "+".join(named), source=None)
    return MultiModel(combined, mode, tuple(named), tuple(named.values()), tuple(first),
                      tuple(shifts))


def stack(multi: MultiModel, plans: Sequence[Plan]) -> Plan:
    """Concurrent models: each planned alone (``plans``, in model order), their parts of
    the arena laid end to end; a plan of ``multi.problem`` (one region per model)."""
    bases, top = [], 0
    for part, plan in zip(multi.parts, plans, strict=True):
        step = int(np.lcm.reduce(part.alignments)) if len(part) else 1
        base = -(-top // step) * step
        bases.append(base)
        top = base + plan.arena_size
    exact_sum = all((p.alignments == 1).all() and (p.pinned == NO_OFFSET).all()
                    for p in multi.parts)
    bound = sum(p.best_bound if exact_sum else p.lower_bound for p in plans)
    sizes = None
    if any(p.sizes is not None for p in plans):
        sizes = np.concatenate([part.sizes if p.sizes is None else p.sizes
                                for part, p in zip(multi.parts, plans, strict=True)])
    offsets = np.concatenate([p.offsets for p in plans]) if plans else np.zeros(0, np.int64)
    regions = np.repeat(np.arange(len(plans)), [len(p) for p in multi.parts])
    capacity = multi.problem.capacity
    status = plan_status(top, bound, fits=capacity is None or top <= capacity)
    stats = {"model_bases": bases, "model_status": [p.status for p in plans]}
    return Plan(offsets, top, sum(p.lower_bound for p in plans), status, bound,
                plans[0].planner, sum(p.seconds for p in plans), stats, regions, sizes)


def flatten(multi: MultiModel, plan: Plan) -> tuple[Problem, Plan]:
    """The combined problem and plan as one arena without regions, for the exporters.

    Concurrent models' offsets move by their base; the flat problem keeps
    every lifetime but no longer says that the models exclude each other.
    """
    if multi.mode == "exclusive":
        return multi.problem, plan
    flat = multi.problem.replace(regions=(), buffers=[
        replace(b, regions=None, offset=None) for b in multi.problem.buffers])
    offsets = multi.arena_offsets(plan)
    return flat, Plan(offsets, plan.arena_size, plan.lower_bound, plan.status, plan.best_bound,
                      plan.planner, plan.seconds, dict(plan.stats), None, plan.sizes)



@dataclass(frozen=True)
class ModelReport:
    """One model's share of the arena, and what its runtime allocator needs."""

    name: str
    base: int  # where the model's part of the arena begins (0 when exclusive)
    arena_size: int  # the top of the model's own buffers, in the shared arena
    max_live_blocks: int  # the most blocks live at once (a block-pool allocator's pool)
    events: list[StepEvents]  # allocation and release events per step, offsets in the arena


def report(multi: MultiModel, plan: Plan) -> dict[str, ModelReport]:
    """Per model: its base, arena top, most live blocks and replay events."""
    reports = {}
    for k, (name, model_plan) in enumerate(multi.split(plan).items()):
        part = multi.parts[k]
        reports[name] = ModelReport(name, int(model_plan.stats["model_base"]),
                                    model_plan.arena_size, max_live_blocks(part, model_plan),
                                    events(part, model_plan))
    return reports
