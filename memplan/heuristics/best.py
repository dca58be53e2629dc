"""``best``: run the fast heuristics, search orders until the limit, keep the smallest valid plan.

XLA's ChooseBestHeap, then a search. Steps:
- first the time sweep (`memplan.heuristics.time_sweep`, both placements):
  O(n log n), so a plan exists early whatever the size; on problems over
  ``breadth_first_buffers`` that the compiled pass places
  (`memplan.heuristics.compiled_place`), the ceiling's pass (below) comes
  right after the first sweep, uncut, then the breadth pass (all in C; the
  sweep first, so that a plan exists early; the ceiling second, so that the
  one pass every call runs, up to a CPU second at 30k buffers, is within
  the limit, busy machine or not); then the band of long-lived units
  (`memplan.heuristics.long_lived`, also O(n log n)): on decoders with KV
  caches, the plan; after the sweeps (on problems over
  ``breadth_first_buffers``, right after the first sweep and the ceiling:
  cheaper than a pass that meets every pair), the stack at the peak
  (`memplan.heuristics.peak_stack`: the units live at a high step stacked,
  each side swept away from it; O(n log n) a try, up to 16): on networks
  whose long-lived buffers carry the peak, the plan from 300k buffers on;
  just before the stack, on those problems when they have long-lived units
  (at most 1 % of them) and at least `LONG_FIRST_SWEEPS` first sweeps' CPU
  time left, the long-lived units planned first
  (`memplan.heuristics.long_first`: a small problem with the short units as
  one room per stretch, planned by ``best``'s passes and the canonical
  descent for most of the CPU time left, the descent's probes counted in
  this call's; skipped where the small problem has over
  `long_first.SMALL_PAIRS` pairs overlapping in time);
- every composition of the fast orders (size, spatial, breadth, start,
  temporal) with both placements (best fit, first fit): ten one-pass plans,
  the registered presets among them, most useful first (on problems over
  ``breadth_first_buffers``, the breadth order first). The compiled pass
  lists no pairs (an interval structure over time), so it runs at any size:
  training steps with 10M+ overlapping pairs get it too; without it (no C
  compiler, optional aliases) the passes list pairs in Python, and skip
  problems over ``max_pairs`` overlapping pairs;
- when no plan meets the lower bound and time is left, in a timed search
  (no ``search_evaluations``), the canonical descent (the planner
  ``canonical``, found by name in the registry: probes of the exact
  planner's compiled canonical search at falling peaks) for the ``descent``
  share of the time left, counted in CPU seconds of the thread doing the work
  (the limit less this thread's CPU time so far: on a busy machine the descent
  runs as far as on a quiet one, and the clock cuts the search after it), on
  the problems it takes (no aliases, pins or conflicts): MiniMalloc's problems
  reach their bound there, where orders stay 5-20 % above it; then the order
  search
  (`memplan.heuristics.anneal`: simulated annealing in C, from the best
  greedy order of each placement) until the limit, or for
  ``search_evaluations`` orders (deterministic); without the compiled
  search, ``search_evaluations`` (default 100) hill-climbing steps in Python
  (`memplan.heuristics.hill_climb`) on problems up to ``search_max_buffers``;
- once a plan meets the lower bound (optimal), no further pass runs
  (after the first two where the second runs beside the first's
  validation);
- the ceiling: ``greedy_by_size``'s pass (TensorFlow Lite's planner,
  compiled) run again, uncut, if the limit cut or skipped it, so that no
  limit (0 s, a busy machine) leaves a plan larger than the cheapest
  greedy's (milliseconds on networks; on problems over
  ``breadth_first_buffers`` it ran second, within the limit, unless a limit
  of about 0 s left it out); without the compiled pass and over
  ``max_pairs`` pairs, or where its work (every overlapping pair met once:
  560 M pairs, a minute, on eight training steps end to end) would not fit
  half the limit (`memplan.registry.ceiling_fits`), the time sweep's plan is
  the ceiling, and no order x placement pass runs (each costs as much);
- a pass under way when the time runs out is cut (its remaining units
  stacked, still a valid plan) and named in ``stats["cut"]``; passes not
  started are named in ``stats["skipped"]``; Ctrl-C ends the passes or the
  search with the plans so far (``stats["interrupted"]``);
- keep the plans from the smallest arena up, and return the first that the
  independent validator accepts (a planner bug costs a candidate, never an
  invalid plan); its name goes to ``stats["winner"]``, every candidate's
  arena to ``stats["arenas"]``; ``stats["cut_short"]`` says whether the
  limit cut or skipped a pass.

The time limit covers the validation too (a second at 100k buffers on a busy
machine): with a limit, the first plan (the time sweep's, within
``1 - VALIDATE_SHARE`` of the limit) is validated at once, which measures
what one validation of this problem costs here; the later passes and the
search end that long (times ``VALIDATE_MARGIN``) before the limit, so that
the winner, if another, is validated in time (``stats["validate_reserve"]``).
When the compiled ceiling pass comes next, that first validation runs in a
thread beside it (the pass releases the GIL).

With a CPU allowance (its budget's ``cpu``, a caller's share of its own limit: the exact
planner's warm start, the canonical planner's start plan), the decisions
count CPU seconds of this thread (and of the descent's probes): a pass is
skipped once the budget less the validation's reserve (timed in CPU seconds
too) is spent, and each pass, the descent and the order search end by
``now + min(time left, CPU seconds left x pace)``, set as each starts (the
kernels keep wall deadlines; the pace: wall seconds per CPU second of the
call so far, at least 1), so that a pass slowed by load neither uses up the
budget of the next ones nor is cut before it has taken its CPU seconds; the
time limit (the caller's, on the wall clock) still ends the call. On a busy
machine the passes and the descent then run as on a quiet one, unless the
load changes during a pass near the end of the budget (it is then cut
sooner or later) or the time limit comes first.

The exact solver takes this plan as its warm start. Cost: the sum of the
candidates (a few times one greedy pass, O(n log n + E log n) each), the
search (the rest of the limit) and one or two validations; the time limit
is kept up to one check of the clock (every few dozen units) or one
search evaluation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from memplan.bounds import lower_bound, time_overlap_count
from memplan.budget import Budget, Stopwatch, past, to_deadline
from memplan.errors import NoPlanError, PairLimitError
from memplan.heuristics import anneal, compiled_place, long_first
from memplan.heuristics.greedy import PRESETS, GreedyOptions, greedy_offsets
from memplan.heuristics.hill_climb import HillClimbOptions, climb
from memplan.heuristics.long_lived import band_offsets
from memplan.heuristics.order import order_units
from memplan.heuristics.order_search import OrderSearch
from memplan.heuristics.peak_stack import stack_offsets
from memplan.heuristics.presets import pair_free_plan
from memplan.heuristics.time_sweep import sweep_offsets
from memplan.heuristics.units import Units
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import CEILING, ceiling_fits, planners, register, rejected_hint
from memplan.shares import LONG_FIRST_SWEEPS, VALIDATE_MARGIN, VALIDATE_SHARE
from memplan.validate import mark_valid, validate

ORDERS = ("size", "breadth", "spatial", "start", "temporal")
# `VALIDATE_SHARE` of a limit is kept for validating until one validation is timed; the ceiling
# pass runs uncut whatever it leaves (never a plan larger than greedy_by_size's)
UNTIMED_SEARCH = 2000  # orders searched without a time limit or a budget, at most ...
UNTIMED_WORK = 500_000  # ... and about this many units placed
CLIMB_STEPS = 100  # hill-climbing steps of the search in Python, without a budget


@dataclass(frozen=True)
class BestOptions:
    """Options of ``best``."""

    orders: tuple[str, ...] = option(ORDERS, "orders to try, each with every placement")
    placements: tuple[str, ...] = option(("best_fit", "first_fit"), "placements to try")
    search_evaluations: int | None = option(None, "orders the search tries when no plan meets "
                                                  "the bound (same seed, same plan); None: "
                                                  "until the time limit")
    search_max_buffers: int = option(5000, "the search in Python (no compiled kernel): only "
                                           "on problems up to this many buffers")
    sweep: bool = option(True, "first the O(n log n) time sweep")
    long_lived: bool = option(True, "then (with the sweep) the O(n log n) band of long-lived "
                                    "units (memplan.heuristics.long_lived)")
    peak_stack: bool = option(True, "then (with the sweep) the O(n log n) sweeps outward from "
                                    "a stack at the peak (memplan.heuristics.peak_stack)")
    long_first: bool = option(True, "then (with the sweep, on problems over "
                                    "breadth_first_buffers with few long-lived units) the "
                                    "long-lived units planned first "
                                    "(memplan.heuristics.long_first)")
    breadth_first_buffers: int = option(5000, "larger problems try the breadth order first "
                                              "(it gave the smallest plans there)")
    descent: float = option(0.5, "share of a timed search for the canonical descent (the "
                                 "planner `canonical`, on the problems it takes) before "
                                 "the order search; 0: none")
    max_pairs: int = option(8_000_000, "without the compiled pass, more overlapping pairs: "
                                       "no order x placement pass (pair lists too big)")


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


class Run:
    """One call of ``best``: its deadline, the plans tried and what became of each pass."""

    def __init__(self, problem: Problem, chosen: BestOptions, budget: Budget):
        self.began, time_limit, self.cpu = budget.began, budget.limit, budget.cpu
        self.problem, self.chosen, self.time_limit = problem, chosen, time_limit
        # until one validation is timed, the passes leave VALIDATE_SHARE of the limit for it,
        # and of the CPU budget (`cpu_left`); the CPU the descent's probes took in threads of
        # their own is added to this thread's (``clock.elsewhere``)
        self.clock = Budget(
            None if self.cpu is None else self.cpu * (1 - VALIDATE_SHARE),
            None if time_limit is None else self.began + time_limit * (1 - VALIDATE_SHARE))
        self.tried: list = []  # (arena, name, offsets, stats)
        self.cut: dict[str, int] = {}  # passes cut by the deadline: units they stacked
        self.skipped: list[str] = []  # passes the deadline (or their pair lists) left out
        self.checked: dict[str, float] = {}  # name -> seconds: plans the validator passed
        self.check_cpu = 0.0  # CPU seconds of the first validation
        self.too_many: list[PairLimitError] = []  # passes whose pair lists did not fit
        self.beside: list[threading.Thread] = []  # the first validation, beside a pass in C
        self.overlap = False  # the second pass is compiled (it releases the GIL)
        self.interrupted = False
        self.late = False  # a pass skipped for want of time
        self.attempts = 0
        self.pairs = time_overlap_count(problem.starts, problem.ends) + len(problem.conflicts)
        self.compiled = compiled_place.fits(problem, "best_fit")
        # the order x placement passes cost what the ceiling's does (every overlapping pair
        # met once): where it would not fit the caller's limit (the wall one; a budget is a
        # share of it: the ceiling runs whatever the budget), only the sweeps run
        self.pairwise = not chosen.sweep or ceiling_fits(
            problem, self.cpu if time_limit is None else time_limit)
        self.built: dict[bool, Units] = {}

    def units(self, with_pairs: bool, uncut: bool = False) -> Units:
        """The units, with or without pair lists (`PairLimitError`: they do not fit, in
        memory or, unless ``uncut``, before the deadline)."""
        if with_pairs not in self.built:
            self.built[with_pairs] = Units.build(
                self.problem, pairs=with_pairs,
                deadline=None if uncut else self.budgeted(self.clock.deadline))
        return self.built[with_pairs]

    def compositions(self) -> list[tuple[str, GreedyOptions]]:
        """The order x placement passes to run, breadth first on large problems."""
        found = candidates(self.chosen)
        if len(self.problem) > self.chosen.breadth_first_buffers:  # breadth wins there
            found.sort(key=lambda named: named[1].order != "breadth")
        if not self.pairwise or \
                (not self.compiled and self.chosen.sweep and self.pairs > self.chosen.max_pairs):
            self.skipped.extend(name for name, _ in found)  # pair lists in Python: too big
            return []
        return found

    def passes(self) -> list[tuple[str, Callable[[], tuple[np.ndarray, dict]]]]:
        """(name, pass) in the order they run (see the module doc). Each pass ends by the
        first share of the limit (and of the CPU budget: `budgeted` at its start)."""
        chosen, wall, cpu_end = self.chosen, self.clock.deadline, self.clock.cpu

        def ends() -> float | None:  # read as the pass starts
            return self.budgeted(wall, cpu_end)

        sweeps = [(f"time_sweep(placement={placement!r})", partial(
            lambda p, ceiling: sweep_offsets(self.units(False, uncut=ceiling), p,
                                             None if ceiling else ends()), placement, k == 0 and
            not self.pairwise))  # the first sweep is the ceiling where `CEILING` is not
            for k, placement in enumerate(chosen.placements if chosen.sweep else ())]
        if chosen.sweep and chosen.long_lived:  # right after the first sweep: on a large
            sweeps.insert(1, ("long_lived", lambda: band_offsets(  # decoder the second
                self.units(False), "best_fit", ends())))  # sweep may find no time left
        stacked = [("peak_stack", lambda: stack_offsets(self.units(False), deadline=ends()))
                   ] if chosen.sweep and chosen.peak_stack else []
        # before the stack, which takes the time its pass is given; where that is short the
        # stack's first try is the better, and `long_first_pass` leaves it the time
        if chosen.sweep and chosen.long_first and \
                len(self.problem) > chosen.breadth_first_buffers and \
                long_first.takes(self.units(False)):
            stacked.insert(0, ("long_first", lambda: self.long_first_pass(ends())))
        greedy = [(name, partial(lambda c: greedy_offsets(
            self.units(not self.compiled), c, ends(), compiled=self.compiled), composition))
            for name, composition in self.compositions()]
        if self.compiled and greedy and len(self.problem) > chosen.breadth_first_buffers:
            self.overlap = chosen.sweep  # the first sweep validated beside the ceiling's pass
            ceiling = [(CEILING, self.ceiling_pass)] if any(n == CEILING for n, _ in greedy) else []
            greedy = [(name, step) for name, step in greedy if name != CEILING]
            return sweeps[:1] + ceiling + stacked + greedy[:1] + sweeps[1:] + greedy[1:]
        if len(self.problem) > chosen.breadth_first_buffers:
            return sweeps[:1] + stacked + sweeps[1:] + greedy
        return sweeps + stacked + greedy

    def long_first_pass(self, deadline: float | None) -> tuple[np.ndarray, dict] | None:
        """`long_first`'s pass, or None (not run) when the CPU time left, or the time to
        ``deadline`` at this call's pace, is under `LONG_FIRST_SWEEPS` times the first
        sweep's CPU time: its O(n log n) part, which no limit cuts, costs about four."""
        if self.clock.cpu is None and self.clock.deadline is None:
            cpu = None
        else:
            cpu, need = self.cpu_left(), LONG_FIRST_SWEEPS * self.tried[0][3].get("pass_cpu", 0.0)
            # on the clock too, at this call's pace so far (wall seconds per CPU second)
            if cpu < need or (deadline is not None and
                              to_deadline(deadline) < need * self.clock.pace()):
                return None
        done = long_first.first_offsets(self.units(False), deadline=deadline, cpu=cpu,
                                        max_pairs=long_first.SMALL_PAIRS)
        self.clock.elsewhere += done[1].get("descent_cpu", 0.0)  # its probes' threads
        return done

    def attempt(self, name: str, step: Callable[[], tuple[np.ndarray, dict]]) -> None:
        """Run one pass unless the time is out or a plan meets the bound; keep its plan."""
        self.attempts += 1
        if self.attempts == 3:
            self.settle()
        if (self.attempts > 2 or not self.overlap) and self.at_bound():  # the first two
            return  # when one runs beside the other's validation
        if self.out_of_time():
            self.skipped.append(name)
            self.late = True
            return
        try:
            watch = Stopwatch()
            done = step()
            if done is None:  # too little time for it
                self.skipped.append(name)
                self.late = True
                return
            offsets, stats = done
            stats = {**stats, "pass_cpu": watch.cpu_elapsed()}
        except PairLimitError as why:
            self.skipped.append(name)
            self.too_many.append(why)
            return
        self.keep(name, offsets, stats)

    def ceiling(self) -> None:
        """`CEILING`'s pass, uncut, unless it ran to its end already (or its pair lists in
        Python would be too many, or do not fit in memory, or its work does not fit the
        limit, `ceiling_fits`: then the time sweep is the ceiling)."""
        if any(name == CEILING and not stats["cut"] for _, name, _, stats in self.tried) or \
                not self.pairwise or (not self.compiled and self.pairs > self.chosen.max_pairs):
            return
        try:
            offsets, stats = self.ceiling_pass()
        except PairLimitError:  # too many for memory: the time sweep is the ceiling
            return
        self.tried = [tried for tried in self.tried if tried[1] != CEILING]  # a cut one
        self.keep(CEILING, offsets, stats)

    def ceiling_pass(self) -> tuple[np.ndarray, dict]:
        """`CEILING`'s pass, with no deadline."""
        return greedy_offsets(self.units(not self.compiled, uncut=True), PRESETS[CEILING],
                              compiled=self.compiled)

    def keep(self, name: str, offsets: np.ndarray, stats: dict) -> None:
        """A plan tried; the first one, with a limit, validated at once (or beside)."""
        problem = self.problem
        self.tried.append((int((offsets + problem.sizes).max(initial=0)), name, offsets, stats))
        if stats["cut"]:
            self.cut[name] = stats["cut"]
        if (self.time_limit is None and self.clock.cpu is None) or self.checked or self.beside:
            return
        if self.overlap:
            self.beside.append(threading.Thread(target=lambda: self.check(name, offsets),
                                                daemon=True))
            self.beside[0].start()
        else:
            self.check(name, offsets)
            self.timed(self.checked[name])

    def check(self, name: str, offsets: np.ndarray) -> None:
        """The first validation, in the thread that runs it: its seconds and CPU seconds."""
        self.checked[name], self.check_cpu = _validation_seconds(self.problem, offsets, name)

    def timed(self, seconds: float) -> None:
        """One validation took ``seconds`` (`check_cpu` of CPU): the later passes keep that,
        times the margin, of the limit and of the CPU budget."""
        valid = seconds >= 0
        if self.time_limit is not None:
            self.clock.deadline = self.began + self.time_limit - \
                (VALIDATE_MARGIN * seconds if valid else 0.0)
        if self.clock.cpu is not None:
            self.clock.cpu = self.cpu - (VALIDATE_MARGIN * self.check_cpu if valid else 0.0)

    def settle(self) -> None:
        """Wait for the validation beside the compiled pass; its time sets the reserve."""
        for thread in self.beside:
            thread.join()
        if self.beside and self.checked:
            self.timed(next(iter(self.checked.values())))

    def budgeted(self, wall: float | None, cpu_end: float | None = None) -> float | None:
        """The `time.perf_counter` deadline of a pass or a search starting now: ``wall``, and
        with a CPU budget no later than the CPU seconds left to ``cpu_end`` (default: the
        budget's), at this call's pace so far (`Budget.until`). Read as each starts, so
        that a pass slowed by load neither uses up the budget of the next ones nor is cut
        before it has taken its CPU seconds (the kernels keep wall deadlines); only ``wall``
        (the caller's limit) is lost to the load."""
        return self.clock.until(wall, self.clock.cpu if cpu_end is None else cpu_end)

    def out_of_time(self) -> bool:
        """Past the deadline or, with a CPU budget, out of it; or a pass cut once (the next
        ones would be cut too: with a budget on a busy machine, a pass that nearly ran out
        of it on a quiet one)."""
        if not self.tried:
            return False
        if self.clock.cpu is not None and (self.cpu_left() <= 0 or bool(self.cut)):
            return True
        deadline = self.clock.deadline
        return deadline is not None and (past(deadline) or bool(self.cut))

    def at_bound(self) -> bool:
        """Whether a plan tried meets the lower bound (optimal: nothing left to gain)."""
        return bool(self.tried) and \
            min(arena for arena, _, _, _ in self.tried) <= lower_bound(self.problem)

    def search(self, seed: int) -> None:
        """The order search from the best greedy orders, unless a plan meets the bound."""
        if not self.tried or self.out_of_time() or self.chosen.search_evaluations == 0 \
                or self.at_bound():
            return
        self.descend()
        if self.at_bound() or self.out_of_time():
            return
        if anneal.available(self.problem):
            self.anneal(seed)
        elif 0 < len(self.problem) <= self.chosen.search_max_buffers:
            self.climb(seed)

    def descend(self) -> None:
        """The canonical descent from the best plan so far, for the ``descent`` share of the
        CPU time left (`cpu_left`), within the time left on the clock (the planner
        ``canonical``, by name: solver/ is not imported from here). Only in a timed search:
        a budget keeps the search repeatable, and the exact planner, which gives one, runs
        the descent itself."""
        planner = planners().get("canonical")
        if planner is None or self.budgeted(self.clock.deadline) is None or \
                self.chosen.search_evaluations is not None or self.chosen.descent <= 0:
            return
        _, name, offsets, _ = min(self.tried, key=lambda tried: tried[0])
        hint = Plan.from_offsets(self.problem, offsets, planner=name)
        if rejected_hint(self.problem, hint, "canonical"):  # checked before its budget starts
            return
        found = planner(self.problem, hint=hint, budget=Budget.of_limit(
            None if self.clock.deadline is None else to_deadline(self.clock.deadline),
            cpu=self.cpu_left() * self.chosen.descent))
        if "fallback" in found.stats:  # a problem the canonical search does not take
            return
        self.clock.elsewhere += found.stats.get("cpu_seconds", 0.0)  # its probes' threads
        self.keep("canonical", found.offsets, {**found.stats, "cut": 0})
        if found.stats["interrupted"]:
            raise KeyboardInterrupt

    def cpu_left(self) -> float:
        """The seconds to the deadline as this thread's CPU counts them (and the descent's
        probes, ``clock.elsewhere``): the limit, or with one the ``cpu`` budget (less the
        validation's reserve), less the CPU taken. Without a budget, on an idle machine the
        wall time left; on a busy one more (the clock then ends the search first)."""
        if self.clock.cpu is not None:
            return self.clock.cpu - self.clock.spent()
        return self.clock.deadline - self.began - self.clock.spent()

    def decoded(self, placement: str) -> list[tuple[int, np.ndarray, str, float]]:
        """``(arena, offsets, order, CPU seconds)`` of the greedy passes run to the end with
        ``placement``."""
        return [(arena, offsets, stats["order"], stats.get("pass_cpu", 0.0))
                for arena, _, offsets, stats in self.tried
                if stats.get("placement") == placement and stats.get("order") in ORDERS
                and not stats["cut"]]

    def anneal(self, seed: int) -> None:
        """Simulated annealing in C from each placement's best order (`anneal.search`)."""
        units = self.units(False)
        starts = [anneal.Start(arena, order_units(units, order), placement, offsets, cpu)
                  for placement in anneal.PLACEMENTS if self.decoded(placement)
                  for arena, offsets, order, cpu in [min(self.decoded(placement),
                                                         key=lambda d: d[0])]]
        budget = self.chosen.search_evaluations
        if budget is None and self.time_limit is None and self.clock.cpu is None:
            budget = untimed_evaluations(self.problem)
        if starts:  # its schedule runs to this call's deadline and CPU budget
            offsets, stats = anneal.search(units, starts, seed=seed, budget=self.clock,
                                           options=anneal.AnnealOptions(evaluations=budget))
            if offsets is None:  # no time to start a chain
                self.skipped.append("anneal")
                return
            self.keep("anneal", offsets, stats)
            if stats["interrupted"]:
                raise KeyboardInterrupt

    def climb(self, seed: int) -> None:
        """Hill climbing in Python from the best best-fit order (`hill_climb.climb`)."""
        decoded = self.decoded("best_fit")
        if not decoded:
            return
        try:
            units = self.units(True)
        except PairLimitError:
            return
        search = OrderSearch(self.problem, self.clock, units)
        arena, offsets, order, _ = min(decoded, key=lambda d: d[0])
        search.best_arena, search.best_offsets = arena, offsets
        steps = self.chosen.search_evaluations or CLIMB_STEPS
        climb(search, HillClimbOptions(iterations=steps), seed,
              (arena, offsets, order_units(units, order)))
        self.keep("hill_climb", search.best_offsets, {"evaluations": search.evaluations,
                                                      "cut": search.cut})

    def extra(self) -> dict:
        """The stats every plan of this call carries."""
        extra = {"cut": self.cut, "skipped": self.skipped, "interrupted": self.interrupted,
                 "pairs": self.pairs, "cut_short": (bool(self.cut) or self.late) and
                 not self.at_bound()}
        ceilings = [arena for arena, name, _, stats in self.tried
                    if name == CEILING and not stats["cut"]]
        if ceilings:  # this plan is no larger (`memplan.solver.exact` need not run it again)
            extra["ceiling_arena"] = ceilings[0]
        if self.time_limit is not None:
            extra["validate_reserve"] = max(0.0, self.began + self.time_limit -
                                            self.clock.deadline)
        return extra


@register("best")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The smallest valid plan of the fast heuristics and the search (see the module doc)."""
    chosen = parse_options("best", DEFAULTS, options)
    check_single_region(problem)
    run = Run(problem, chosen, budget)
    try:
        for name, step in run.passes():
            run.attempt(name, step)
        run.settle()
        run.search(seed)
        run.ceiling()
    except KeyboardInterrupt:  # Ctrl-C: the plans so far, the best of them validated
        if not run.tried:
            raise
        run.interrupted = True
    finally:
        run.settle()  # no thread outlives the call
    if not run.tried and run.too_many:  # every pass needed pair lists (sweep=False)
        return pair_free_plan("best", problem, budget, budget.deadline, run.too_many[0])
    return _smallest_valid(problem, run.tried, budget, run.checked, run.extra())


def untimed_evaluations(problem: Problem) -> int:
    """The orders the search tries with neither a time limit nor a budget (the annealing
    in C, else the hill climb in Python): what a caller that wants `best`'s untimed plan,
    within a time limit too, gives as its budget."""
    if not anneal.available(problem):
        return CLIMB_STEPS
    return max(1, min(UNTIMED_SEARCH, UNTIMED_WORK // max(1, len(problem))))


def _validation_seconds(problem: Problem, offsets: np.ndarray,
                        name: str) -> tuple[float, float]:
    """Seconds and CPU seconds (of the calling thread) the validator took to pass these
    offsets; -1 seconds when it refused them."""
    watch = Stopwatch()
    draft = Plan(offsets, int((offsets + problem.sizes).max(initial=0)), 0, "unknown", 0, name)
    refused = [v for v in validate(problem, draft) if v.kind != "capacity"]
    return -1.0 if refused else watch.elapsed(), watch.cpu_elapsed()


def _smallest_valid(problem: Problem, tried: list, watch: Stopwatch, checked: dict[str, float],
                    extra: dict) -> Plan:
    """The smallest of the ``(arena, name, offsets, stats)`` tried that the validator passes
    (``checked``: the seconds of those it passed already, -1 for those it refused)."""
    arenas = {name: arena for arena, name, _, _ in tried}
    for _, name, offsets, stats in sorted(tried, key=lambda t: t[0]):
        seconds = checked[name] if name in checked else \
            _validation_seconds(problem, offsets, name)[0]
        if seconds >= 0:
            return mark_valid(Plan.from_offsets(
                problem, offsets, planner="best", seconds=watch.elapsed(),
                stats={"winner": name, "arenas": arenas, **stats, **extra,
                       "validate_seconds": seconds}), problem)
    raise NoPlanError(f"no heuristic found a valid plan for {problem.name or 'the problem'}; "
                      f"arenas tried: {arenas}")


plan.options = DEFAULTS
