"""``anneal``: simulated annealing over placement orders, in C, until the time limit.

One best-fit or first-fit pass gives a plan in a fraction of a second; the
rest of a time limit is worth spending when that plan is above the lower
bound. This planner searches the orders the way omnimalloc's tabu search and
TelaMalloc do, but decodes each one in compiled code
(``_search_kernel.c``, against the interval structure of
``_interval_place.h``: no pair lists, so training steps with 10M+
overlapping pairs are searched too).

Steps:
- starts: the greedy orders (size, spatial, breadth, start, temporal), each
  decoded by best fit and by first fit; per placement the best one starts a
  *chain* (the caller may hand its own, `search`);
- the chains take turns in slices (``SLICE_SECONDS``, or ``SLICE_EVALUATIONS``
  with an evaluation budget): each slice moves a unit that sets the peak to
  an earlier position (swap or insertion), re-places the suffix, keeps the
  move when the arena is no larger or by the annealing rule (the temperature
  falling to 0 at the limit), and returns to its best order after
  ``restart`` evaluations without a new best;
- stop at the time limit, the evaluation budget, or at once when a chain
  reaches the lower bound (proven optimal); Ctrl-C ends the search with the
  best order so far (``stats["interrupted"]``). The best chain's plan wins.

With a CPU allowance (its budget's ``cpu``, a caller's share of its own limit, e.g.
`memplan.api.compare`'s) the schedule counts CPU seconds of the thread
(`memplan.budget`): the temperature falls with the CPU spent, a chain
starts when its first decode's CPU seconds fit, and each slice ends at the
call's pace (wall seconds per CPU second), so that a busy machine runs the
same schedule, later; the time limit (wall) still ends the search.

Cost: one evaluation is about half a pass (the suffix after the moved unit),
O(E log n) for E overlapping pairs; MiniMalloc's problems (150-450 buffers)
take tens of thousands of evaluations a second. Seeded: the same seed and
``evaluations`` give the same plan, as long as the budget, not the time
limit, ends the search. Known limits: problems with optional aliases, or
without the compiled kernel, get `memplan.heuristics.hill_climb` instead
(in Python, with pair lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from memplan.bounds import lower_bound
from memplan.budget import Budget, Stopwatch
from memplan.heuristics import compiled_place, hill_climb
from memplan.heuristics.compiled_place import compiled_offsets, kernel_columns
from memplan.heuristics.order import order_units
from memplan.heuristics.order_search import START_ORDERS
from memplan.heuristics.units import Units
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register
from memplan.shares import SLICE_SECONDS

try:
    import memplan.heuristics._search_kernel as _search_kernel
except ImportError:  # no C compiler at install time: `hill_climb` in Python
    _search_kernel = None

PLACEMENTS = ("best_fit", "first_fit")
SLICE_EVALUATIONS = 400  # the same with an evaluation budget (deterministic)
UNTIMED_EVALUATIONS = 20_000  # no time limit and no budget: at most this many orders ...
UNTIMED_WORK = 2_000_000  # ... and about this many units placed


@dataclass(frozen=True)
class AnnealOptions:
    """Options of ``anneal``."""

    evaluations: int | None = option(None, "orders tried in all (same seed, same plan); "
                                           "None: until the time limit")
    temperature: float = option(0.002, "accept a worse arena with chance exp(-increase / "
                                       "(t * arena)), t falling to 0")
    explore: float = option(0.1, "chance to move any unit rather than one at the peak")
    restart: int = option(3000, "evaluations without a new best: back to the best order")


DEFAULTS = AnnealOptions()


def compiled() -> bool:
    """Whether the search kernel is loaded (else `best` falls back to the hill climb)."""
    return _search_kernel is not None


def available(problem: Problem) -> bool:
    """Whether the compiled search takes ``problem`` (no optional aliases, kernel built)."""
    return _search_kernel is not None and compiled_place.fits(problem, "best_fit")


class Start(NamedTuple):
    """A chain's start: a greedy order, its placement and what one pass of it gave."""

    arena: float  # inf when the pass was cut by the deadline
    order: np.ndarray
    placement: str
    offsets: np.ndarray | None = None  # the pass's plan (a cut pass stacks the rest: valid)
    cpu: float = 0.0  # CPU seconds the pass took: about what a chain's first decode takes


def start_orders(units: Units, deadline: float | None) -> list[Start]:
    """Per placement, the best greedy order (a pass cut by ``deadline`` scores inf)."""
    found = []
    sizes = units.problem.sizes
    for placement in PLACEMENTS:
        scored = []
        for name in START_ORDERS:
            order = order_units(units, name)
            watch = Stopwatch()
            offsets, cut = compiled_offsets(units, order, placement, deadline)
            scored.append(Start(int((offsets + sizes).max(initial=0)) if not cut else np.inf,
                                order, placement, offsets, watch.cpu_elapsed()))
            if cut:
                break
        found.append(min(scored, key=lambda s: s.arena))
    return found


def _chains(units: Units, starts: list, bound: int, seed: int, clock: Budget) -> list:
    """``(chain, placement)`` per start, while the budget leaves time for the chain's first
    decode (a whole pass: seconds on a training step of 30k buffers). A start's ``cpu``
    (`Start`), else the last chain's, tells what a decode takes in CPU seconds."""
    columns = kernel_columns(units)
    chains, pass_cpu = [], 0.0
    for k, start in enumerate(starts):
        pass_cpu = getattr(start, "cpu", 0.0) or pass_cpu
        if not clock.fits(pass_cpu):
            break
        watch = Stopwatch()
        chains.append((_search_kernel.new(*columns, np.ascontiguousarray(start[1], np.int64),
                                          int(start[2] == "best_fit"), bound, seed + k),
                       start[2]))
        pass_cpu = watch.cpu_elapsed()
    return chains


def _schedule(clock: Budget, began: tuple[Stopwatch, float]) -> tuple[float, tuple[float, float]]:
    """A slice starting now: its wall seconds (`SLICE_SECONDS`, or to the budget's end)
    and the search's progress at its start and end, 0 to 1: in CPU seconds of the budget
    left when the search began (``(its stopwatch, spent)``), else in wall seconds to the
    deadline."""
    seconds = min(SLICE_SECONDS, clock.end_in())
    if clock.cpu is None:
        span, gone = max(clock.deadline - began[0].began, 1e-9), began[0].elapsed()
        return seconds, (gone / span, (gone + seconds) / span)
    span = max(clock.cpu - began[1], 1e-9)
    done = (clock.spent() - began[1]) / span
    return seconds, (done, min(1.0, done + seconds / clock.pace() / span))


def search(units: Units, starts: list, *, seed: int = 0, deadline: float | None = None,
           budget: Budget | None = None,
           options: AnnealOptions = DEFAULTS) -> tuple[np.ndarray | None, dict]:
    """Buffer offsets of the best order the chains from ``starts`` (`Start`, or ``(arena,
    order, placement)``) find, and stats (see the module doc); ``deadline``: a
    `time.perf_counter` value, or ``budget``: the caller's CPU budget within its deadline
    (the temperature then falls with the CPU seconds spent, the slices end at its pace).
    None for the offsets when the deadline left no time to start a chain. The caller
    checks `available` first."""
    problem = units.problem
    bound = lower_bound(problem)
    clock = Budget(None, deadline) if budget is None else budget
    chains = _chains(units, starts, bound, seed, clock)
    stats = {"evaluations": 0, "start_arenas": [start[0] for start in starts], "cut": 0}
    if not chains:
        return None, {**stats, "interrupted": False, "skipped": "no time to start a chain"}
    evaluation_budget = options.evaluations
    if evaluation_budget is None and clock.end() is None:
        evaluation_budget = max(1, min(UNTIMED_EVALUATIONS, UNTIMED_WORK // max(1, len(problem))))
    began = Stopwatch(), clock.spent()
    best = [_search_kernel.step(chain, 0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1)[0]
            for chain, _ in chains]  # per chain: its best arena (its start's, so far)
    evaluations = [0] * len(chains)
    interrupted = False
    movable = min(len(start[1]) for start in starts)
    try:
        for turn in range(10**12):
            k = turn % len(chains)
            done = sum(evaluations)
            if (evaluation_budget is not None and done >= evaluation_budget) or clock.expired() \
                    or movable < 2:
                break  # (one free unit or none: no order to change)
            if evaluation_budget is not None:
                slice_evaluations = min(SLICE_EVALUATIONS, evaluation_budget - done)
                progress = done / evaluation_budget, (done + slice_evaluations) / evaluation_budget
                seconds = 0.0
            else:
                slice_evaluations = -1
                seconds, progress = _schedule(clock, began)
            end = clock.end_in()
            left = -1.0 if end is None else max(0.0, end)
            best[k], _, evaluations[k] = _search_kernel.step(
                chains[k][0], slice_evaluations, seconds, left, *progress,
                options.temperature, options.explore, options.restart)
            if min(best) <= bound:
                break
    except KeyboardInterrupt:  # Ctrl-C: the best order so far
        interrupted = True
    winner = min(range(len(chains)), key=lambda k: (best[k], k))
    bases, _ = _search_kernel.best(chains[winner][0])
    offsets = units.offsets(np.frombuffer(bases, np.int64))
    return offsets, {**stats, "placement": chains[winner][1], "evaluations": sum(evaluations),
                     "chains": {placement: arena for (_, placement), arena
                                in zip(chains, best, strict=True)},
                     "interrupted": interrupted}


@register("anneal")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """Simulated annealing over orders in C (see the module doc); ``hint`` is unused."""
    chosen = parse_options("anneal", DEFAULTS, options)
    check_single_region(problem)
    if not available(problem):
        fallback = hill_climb.plan(problem, budget=Budget.of_limit(budget.limit), seed=seed)
        fallback.planner, fallback.stats["fallback"] = "anneal", "hill_climb"
        return fallback
    clock = budget
    units = Units.build(problem, pairs=False)
    starts = start_orders(units, clock.end())
    offsets, stats = search(units, starts, seed=seed, budget=clock, options=chosen)
    if offsets is None:  # out of time before a chain: the best start pass (cut ones stack)
        first = min(starts, key=lambda s: s.arena)
        offsets, stats["placement"] = first.offsets, first.placement
    return Plan.from_offsets(problem, offsets, planner="anneal",
                             seconds=budget.elapsed(), stats=stats)


plan.options = DEFAULTS
