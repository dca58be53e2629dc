"""``best``: run the fast heuristics and keep the smallest valid plan (XLA's ChooseBestHeap).

Steps:
- first the time sweep (`memplan.heuristics.time_sweep`, both placements):
  O(n log n), so a plan
  exists early whatever the size; on training graphs, where lifetimes overlap
  so much that the pair lists below would take gigabytes, it is the plan;
  on problems over ``breadth_first_buffers`` that the compiled pass places
  (`memplan.heuristics.compiled_place`), its breadth pass comes right after
  the first sweep (both in C: hundredths of a second for the sweep, tenths
  for the breadth pass, the best plan there; the sweep first, so that a
  breadth pass cut by a short limit leaves a good plan); then the band of
  long-lived units
  (`memplan.heuristics.long_lived`, also O(n log n)): on decoders with KV
  caches, the plan;
- unless the problem has more than ``max_pairs`` overlapping pairs, build the
  units once and run every composition of the fast orders (size,
  spatial, breadth, start, temporal) with both placements (best fit, first
  fit): ten one-pass plans, the registered presets among them, most useful
  first (on problems over ``breadth_first_buffers``, the breadth order
  first: measured best on large decoders and network-like schedules, see
  BENCHMARKS.md), within ``time_limit`` if one is given: a pass under way when the
  time runs out is cut (its remaining units stacked, still a valid plan) and
  named in ``stats["cut"]``; passes not started are named in
  ``stats["skipped"]``; Ctrl-C ends the passes with the plans so far
  (``stats["interrupted"]``). No
  one composition wins everywhere: first fit beats best fit on half of the
  MiniMalloc problems, start order wins some, breadth wins on large networks;
- keep the plans from the smallest arena up, and return the first that the
  independent validator accepts (a planner bug costs a candidate, never an
  invalid plan); its name goes to ``stats["winner"]``, every candidate's arena
  to ``stats["arenas"]``.

The time limit covers the validation too (a second at 100k buffers on a busy
machine): with a limit, the first plan (the time sweep's, within
``1 - VALIDATE_SHARE`` of the limit) is validated at once, which measures
what one validation of this problem costs here; the later passes end that
long (times ``VALIDATE_MARGIN``) before the limit, so that the winner, if
another, is validated in time (``stats["validate_reserve"]``). When the
compiled breadth pass comes next, that first validation runs in a thread
beside it (the pass releases the GIL), so that a short limit leaves the
pass its time (measured in BENCHMARKS.md).

The exact solver takes this plan as its warm start. Cost: the sum of the
candidates (a few times one greedy pass, O(n log n + E log L) each) plus one
or two validations; the time limit is kept up to one check of the clock in
`memplan.heuristics.placement` (every few dozen units).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from memplan.bounds import time_overlap_count
from memplan.errors import NoPlanError, PairLimitError
from memplan.heuristics import compiled_place
from memplan.heuristics.greedy import PRESETS, GreedyOptions, greedy_offsets
from memplan.heuristics.hill_climb import HillClimbOptions, climb
from memplan.heuristics.long_lived import band_offsets
from memplan.heuristics.order import order_units
from memplan.heuristics.order_search import OrderSearch
from memplan.heuristics.presets import pair_free_plan
from memplan.heuristics.time_sweep import sweep_offsets
from memplan.heuristics.units import Units
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register
from memplan.validate import mark_valid, validate

ORDERS = ("size", "breadth", "spatial", "start", "temporal")
VALIDATE_SHARE = 0.2  # of a time limit: kept for validating, until one validation is timed
VALIDATE_MARGIN = 1.5  # the later passes keep this many times the timed validation


@dataclass(frozen=True)
class BestOptions:
    """Options of ``best``."""

    orders: tuple[str, ...] = option(ORDERS, "orders to try, each with every placement")
    placements: tuple[str, ...] = option(("best_fit", "first_fit"), "placements to try")
    search_iterations: int = option(100, "then hill climbing, unless a plan already meets the "
                                         "bound")
    search_max_buffers: int = option(5000, "... and only on problems up to this many buffers")
    sweep: bool = option(True, "first the O(n log n) time sweep")
    long_lived: bool = option(True, "then (with the sweep) the O(n log n) band of long-lived "
                                    "units (memplan.heuristics.long_lived)")
    breadth_first_buffers: int = option(5000, "larger problems try the breadth order first "
                                              "(it gave the smallest plans there)")
    max_pairs: int = option(8_000_000, "more overlapping pairs: only the sweep (pair lists "
                                       "too big)")


DEFAULTS = BestOptions()


def candidates(options: BestOptions) -> list[tuple[str, GreedyOptions]]:
    """(name, options) of each composition to try, named after its preset when it has one."""
    names = {preset: name for name, preset in PRESETS.items()}
    found = []
    for order in options.orders:
        for placement in options.placements:
            composition = GreedyOptions(order, placement)
            found.append((names.get(composition, f"best_fit(order={order!r}, "
                                                 f"placement={placement!r})"), composition))
    return found


@register("best")
def plan(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
         hint: Plan | None = None, **options) -> Plan:
    """The smallest valid plan of the fast heuristics (see the module doc)."""
    began = time.perf_counter()
    chosen = parse_options("best", DEFAULTS, options)
    check_single_region(problem)
    # until one validation is timed, the passes leave VALIDATE_SHARE of the limit for it
    deadline = None if time_limit is None else began + time_limit * (1 - VALIDATE_SHARE)
    tried = []  # (arena, name, offsets, stats)
    cut: dict[str, int] = {}  # passes cut by the deadline: units they stacked
    skipped: list[str] = []  # passes the deadline left no time for
    checked: dict[str, float] = {}  # name -> seconds: plans the validator already passed
    too_many: list[PairLimitError] = []  # passes skipped: their pair lists did not fit
    beside: list[threading.Thread] = []  # the first validation, beside the compiled pass
    overlap = False  # set by passes(): the second pass is compiled (it releases the GIL)

    def timed(seconds: float) -> None:  # one validation timed: the reserve
        nonlocal deadline
        reserve = VALIDATE_MARGIN * seconds if seconds >= 0 else 0.0
        deadline = began + time_limit - reserve  # earlier than the first guess if slow

    def keep(name: str, offsets: np.ndarray, stats: dict, stacked: int) -> None:
        tried.append((int((offsets + problem.sizes).max(initial=0)), name, offsets, stats))
        if stacked:
            cut[name] = stacked
        if time_limit is None or checked or beside:
            return
        if overlap:
            beside.append(threading.Thread(target=lambda: checked.update(
                {name: _validation_seconds(problem, offsets, name)}), daemon=True))
            beside[0].start()
        else:
            checked[name] = _validation_seconds(problem, offsets, name)
            timed(checked[name])

    def settle() -> None:  # the validation beside the compiled pass: wait, then the reserve
        for thread in beside:
            thread.join()
        if beside and checked:
            timed(next(iter(checked.values())))

    def out_of_time() -> bool:  # a pass cut once: the next ones would be cut too
        return bool(tried) and deadline is not None and (time.perf_counter() > deadline
                                                         or bool(cut))

    pairs = time_overlap_count(problem.starts, problem.ends) + len(problem.conflicts)

    def passes() -> None:
        nonlocal overlap
        compositions = candidates(chosen)
        large = len(problem) > chosen.breadth_first_buffers
        if large:  # breadth wins there: first
            compositions.sort(key=lambda named: named[1].order != "breadth")
        listable = not (chosen.sweep and pairs > chosen.max_pairs)
        if not listable:
            skipped.extend(name for name, _ in compositions)
            compositions = []
        compiled = bool(compositions) and compiled_place.fits(
            problem, "best_fit", pairs=pairs - len(problem.conflicts))
        built: dict[bool, Units] = {}

        def units_with(with_pairs: bool) -> Units:
            if with_pairs not in built:  # PairLimitError: the pass is skipped
                built[with_pairs] = Units.build(problem, pairs=with_pairs, deadline=deadline)
            return built[with_pairs]

        steps = [(f"time_sweep(placement={placement!r})",
                  lambda placement=placement: sweep_offsets(units_with(False), placement,
                                                            deadline))
                 for placement in (chosen.placements if chosen.sweep else ())]
        if chosen.sweep and chosen.long_lived:  # right after the first sweep: on a large
            steps.insert(1, ("long_lived", lambda: band_offsets(  # decoder the second
                units_with(False), "best_fit", deadline)))  # sweep may find no time left
        greedy = [(name, lambda composition=composition: greedy_offsets(
            units_with(not compiled), composition, deadline, compiled=compiled))
            for name, composition in compositions]
        if compiled and large:  # the compiled breadth pass, the best there, after the
            steps = steps[:1] + greedy[:1] + steps[1:] + greedy[1:]  # first sweep (in C)
            overlap = chosen.sweep  # the first sweep validated beside the breadth pass
        else:
            steps += greedy
        for index, (name, run) in enumerate(steps):
            if index == 2:
                settle()
            if out_of_time():
                skipped.append(name)
                continue
            try:
                offsets, stats = run()
            except PairLimitError as why:
                skipped.append(name)
                too_many.append(why)
                continue
            keep(name, offsets, stats, stats["cut"])
        settle()
        try:
            units = units_with(True) if compositions and \
                0 < len(problem) <= chosen.search_max_buffers else None
        except PairLimitError:
            units = None
        left = None if deadline is None else deadline - time.perf_counter()
        if (0 < len(problem) <= chosen.search_max_buffers and chosen.search_iterations > 0
                and units is not None and (left is None or left > 0)):
            search = OrderSearch(problem, left, time.perf_counter(), units)
            decoded = [(arena, offsets, stats["order"]) for arena, _, offsets, stats in tried
                       if stats.get("placement") == "best_fit" and stats.get("order") in ORDERS
                       and not stats.get("cut") and "optional_aliases_taken" in stats]
            if decoded and min(arena for arena, _, _, _ in tried) > search.bound:
                arena, offsets, order = min(decoded, key=lambda d: d[0])
                search.best_arena, search.best_offsets = arena, offsets
                climb(search, HillClimbOptions(iterations=chosen.search_iterations), seed,
                      (arena, offsets, order_units(units, order)))
                keep("hill_climb", search.best_offsets, {"evaluations": search.evaluations},
                     search.cut)

    interrupted = False
    try:
        passes()
    except KeyboardInterrupt:  # Ctrl-C: the plans so far, the best of them validated
        if not tried:
            raise
        interrupted = True
    finally:
        for thread in beside:  # no thread outlives the call
            thread.join()
    if not tried and too_many:  # every pass needed pair lists (sweep=False)
        return pair_free_plan("best", problem, began, time_limit, too_many[0])
    extra = {"cut": cut, "skipped": skipped, "interrupted": interrupted, "pairs": pairs}
    if time_limit is not None:
        extra["validate_reserve"] = max(0.0, began + time_limit - deadline)
    return _smallest_valid(problem, tried, began, checked, extra)


def _validation_seconds(problem: Problem, offsets: np.ndarray, name: str) -> float:
    """Seconds the validator took to pass these offsets; -1 when it refused them."""
    checking = time.perf_counter()
    draft = Plan(offsets, int((offsets + problem.sizes).max(initial=0)), 0, "unknown", 0, name)
    if [v for v in validate(problem, draft) if v.kind != "capacity"]:
        return -1.0
    return time.perf_counter() - checking


def _smallest_valid(problem: Problem, tried: list, began: float, checked: dict[str, float],
                    extra: dict) -> Plan:
    """The smallest of the ``(arena, name, offsets, stats)`` tried that the validator passes
    (``checked``: the seconds of those it passed already, -1 for those it refused)."""
    arenas = {name: arena for arena, name, _, _ in tried}
    for _, name, offsets, stats in sorted(tried, key=lambda t: t[0]):
        seconds = checked[name] if name in checked else \
            _validation_seconds(problem, offsets, name)
        if seconds >= 0:
            return mark_valid(Plan.from_offsets(
                problem, offsets, planner="best", seconds=time.perf_counter() - began,
                stats={"winner": name, "arenas": arenas, **stats, **extra,
                       "validate_seconds": seconds}), problem)
    raise NoPlanError(f"no heuristic found a valid plan for {problem.name or 'the problem'}; "
                      f"arenas tried: {arenas}")


plan.options = DEFAULTS
