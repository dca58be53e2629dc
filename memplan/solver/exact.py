"""``exact``: the CP-SAT planner that finds optimal layouts and proves them.

Where the heuristics guess, this planner proves: its plan comes with the best
bound it proved (``plan.best_bound``), so ``plan.gap`` is the proven distance
to the optimum. Steps:

- **warm start**: take the caller's ``hint`` or run the ``best`` heuristic; a
  hint that already fits the capacity (fit mode) or reaches the lower bound
  (minimise mode) is the answer, at once;
- **preprocess** (`memplan.solver.preprocess`): divide by the common divisor
  of the sizes, renumber time, split into independent parts;
- a part of more than ``lns_buffers`` buffers or ``lns_pairs`` pairs of
  overlapping lifetimes is improved from the warm
  start by **large-neighbourhood search** (`memplan.solver.lns`: windows of a
  few hundred buffers re-solved by CP-SAT), never modelled whole;
- for each other part, smallest first, each with an equal share of the time left
  (CPU seconds: what the stages before took is counted in CPU time; the wall
  clock only keeps the limit),
  **model** it (`memplan.solver.model`: units of aliased buffers, boxes, one
  NoOverlap2D, peak or capacity) and **search** it (`memplan.solver.cp_search`):
  - to fit a capacity: one race of the MiniMalloc orders; on a problem
    without aliases, pins or conflicts, the compiled canonical search
    first, alone for a short head start, then racing CP-SAT's own
    portfolio (`_Run._fit_race`; docs/explanation/exact-lanes.md);
  - to minimise: fit at the lower bound first (most real problems end
    there), then bisect the peak between the floor and the best plan with
    fit races (far faster than CP-SAT's minimisation at finding low peaks),
    then CP-SAT's minimisation from the best plan, for the proven bound; a
    part's floor is the global lower bound (only the largest part counts);
- put the parts' offsets back together; the arena is the largest part's;
- never return more than the ceiling: ``greedy_by_size``'s plan (by name, the
  compiled pass), computed first unless the warm start is known to be no
  larger (``best``'s, which runs it), is taken when the search, cut short by
  the limit, found nothing smaller (``stats["ceiling"]``). Without a ceiling (a
  problem greedy_by_size does not place), the warm start is the fallback.

Modes: with a capacity (and ``minimize`` unset) the question is "does it fit"
(like MiniMalloc): status ``feasible``/``optimal`` with a fitting plan,
``infeasible`` when no layout fits (proven: ``best_bound`` > capacity; the
offsets are the warm start's over-capacity layout), ``unknown`` when the time
ran out first. Without a capacity (or ``minimize=True``): the smallest peak,
status ``optimal`` when proven, else ``feasible`` with the proven gap.

Progress goes to ``on_progress(Progress(arena_size, best_bound, seconds))`` at
the start and on every new plan and bound; ``stop`` (a threading.Event) or
Ctrl-C ends the search with the best plan so far (``stats["interrupted"]``).

Cost: NP-hard; bounded by ``time_limit``. Known limits: one memory region
(region 0's capacity); variable-size scratch gets its minimum size; link
components of optional aliases beyond `geometry.MAX_ARRANGEMENTS` are left
to chance (sound, maybe not optimal); the proven bound rarely rises above
the lower bound on large problems (MiniMalloc's D and J: `memplan.solver.floors` probes
relaxations at the floor when the canonical descent stalls, but none settles there).
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from memplan.bounds import lower_bound, time_overlap_count
from memplan.budget import Budget, CpuClock, Stopwatch
from memplan.errors import NoPlanError, ProblemError, UnsoundBoundError
from memplan.plan import Plan, plan_status
from memplan.problem import Problem, check_single_region
from memplan.registry import CEILING, ceiling_planner, plan_with, register
from memplan.shares import PROBE_CPU_SHARE, WARM_START_SECONDS, WARM_START_SHARE
from memplan.solver import canonical, floors
from memplan.solver.cp_import import import_within
from memplan.solver.exact_options import ExactOptions, Progress
from memplan.solver.fit_race import Joint, head_start_seconds, racing
from memplan.solver.outcome import Outcome
from memplan.solver.preprocess import Part, assemble, part_offsets, sink_spanning, split
from memplan.validate import known_valid, validate

PROBE_BUFFERS = 4000  # large parts to minimise: a floor probe's time per this many buffers
PROBE_PAIRS = 20_000_000  # ... and up to this many overlapping pairs (0.9 GB at 16 M)


def _warm_start(problem: Problem, hint: Plan | None, options: ExactOptions,
                stats: dict, budget: Budget) -> Plan | None:
    """The hint (the caller's or the warm-start planner's), if it is a valid plan. ``best``
    gets its share of the run's ``budget`` in CPU seconds (a busy machine: the same passes,
    later) and the wall time left of its limit as its time limit."""
    if hint is None and options.warm_start is not None:
        given = budget.allowance()
        limit = None if given is None else \
            max(given * WARM_START_SHARE, min(given / 2, WARM_START_SECONDS))
        extra, cpu = {}, None
        if options.warm_start == "best":
            extra = {"search_evaluations": 0} if options.deterministic else {}  # its search
            if limit is not None:  # ends by the clock
                wall = budget.limit
                cpu, limit = limit, None if wall is None else max(0.0, wall - budget.elapsed())
        hint = plan_with(options.warm_start, problem, budget=Budget.of_limit(limit, cpu=cpu),
                         seed=options.seed, **extra)
        stats["warm_start"] = options.warm_start
    if hint is None:
        return None
    broken = [] if known_valid(hint, problem) else \
        [v for v in validate(problem, hint) if v.kind != "capacity"]
    stats["hint_arena"] = int(hint.arena_size)
    if broken:
        stats["hint_rejected"] = str(broken[0])
        return None
    return hint


def _ceiling(problem: Problem, hint: Plan | None, time_limit: float | None) -> Plan | None:
    """The ceiling's plan of ``problem`` (`memplan.registry.ceiling_planner` for ``time_limit``,
    uncut by it), or None when the ``hint`` is known to be no larger (that plan, ``best``'s, which
    ran it first, or one that says so in ``stats["ceiling_arena"]``) or the ceiling does not
    place the problem (a `ProblemError`)."""
    if hint is not None and (hint.planner in (CEILING, "best") or
                             hint.arena_size <= hint.stats.get("ceiling_arena", -1)):
        return None  # `best` ran its ceiling first
    try:
        return plan_with(ceiling_planner(problem, time_limit), problem)
    except ProblemError:
        return None


class _Run:
    """One run of the planner: the parts, what is known of each, and the progress report."""

    def __init__(self, problem: Problem, options: ExactOptions, hint: Plan | None,
                 budget: Budget, taken: float = 0.0):
        self.problem, self.options, self.hint, self.budget = problem, options, hint, budget
        self.taken = taken  # CPU seconds of the stages done (`solve_part`)
        self.clock: CpuClock | None = None  # the part being planned: its CPU so far
        self.minimize = problem.capacity is None or bool(options.minimize)
        self.lower = lower_bound(problem)
        self.parts: list[Part] = split(problem)
        self.tops: list[int | None] = [None] * len(self.parts)  # bytes, best plan per part
        self.bounds: list[int] = [0] * len(self.parts)  # bytes, proven per part
        self.outcomes: list[Outcome | None] = [None] * len(self.parts)
        if hint is not None:
            for i, part in enumerate(self.parts):
                self.tops[i] = self._top(part, part_offsets(part, hint.offsets))
        self.reported: tuple | None = None
        self.unsound: tuple[int, int] | None = None  # (bound, arena): a bound above a plan
        self.clock_cuts = 0  # deterministic CP-SAT runs that the wall clock ended
        self.build_seconds: dict[int, float] = {}  # per part: seconds its last model took

    def _top(self, part: Part, offsets: np.ndarray) -> int:
        return int((offsets + part.problem.sizes).max()) * part.scale

    def report(self):
        """Check the bound against the best plan (`check_bound`); tell ``on_progress``."""
        arena = None if None in self.tops else max(self.tops, default=0)
        bound = max([self.lower, *self.bounds])
        if arena is not None and bound > arena and self.unsound is None:
            self.unsound = (bound, arena)  # raised by `_plan`: this may be CP-SAT's thread
        if self.options.on_progress is None:
            return
        if (arena, bound) != self.reported:
            self.reported = (arena, bound)
            self.options.on_progress(Progress(arena, bound, self.budget.elapsed()))

    def seconds_left(self) -> float | None:
        if self.budget.limit is None:
            return None
        return self.budget.limit - self.budget.elapsed()

    def solve_part(self, i: int, parts_left: int) -> Outcome:
        """Plan part ``i`` with its share of the CPU time left (`_share`), within the wall
        time left; what it takes is counted in `taken`, per thread its search keeps busy
        (one for the floor probe and the windows, else `threads`)."""
        neighbourhoods = self.hint is not None and \
            by_neighbourhoods(self.parts[i].problem, self.options)
        self.clock = CpuClock((self.options.threads or 1) if neighbourhoods else self.threads(),
                              process=True).start()
        try:
            return self._plan_part(i, parts_left, neighbourhoods)
        finally:
            self.taken += self.clock.spent()
            self.clock = None

    def _plan_part(self, i: int, parts_left: int, neighbourhoods: bool) -> Outcome:
        part = self.parts[i]
        scaled = part.problem
        floor = max(lower_bound(scaled), math.ceil(self.lower / part.scale))
        hinted = None if self.hint is None else part_offsets(part, self.hint.offsets)
        top = None if hinted is None else int((hinted + scaled.sizes).max())
        goal = self.options.enough(floor, part.scale) if self.minimize else scaled.capacity
        if top is not None and top <= goal and (scaled.capacity is None
                                                or top <= scaled.capacity):
            return Outcome("optimal" if self.minimize and top <= floor else "feasible", hinted,
                           floor)
        cpu, wall = self._share(parts_left), self.seconds_left()
        if neighbourhoods:
            at_floor = self._floor_probe(i, floor, hinted, cpu)
            if at_floor is not None:
                return at_floor
            cpu = self._share(parts_left)  # less what the probe took
            return self._neighbourhoods(i, floor, hinted, cpu)
        if not self.minimize:  # an over-capacity hint misleads the search: none then
            seconds, cpu = self._limits(cpu, wall)
            return self._search(i, floor, scaled.capacity, None, seconds, minimize=False,
                                cpu=cpu)
        if self.options.canonical and scaled.capacity is None and canonical.plain(scaled):
            return self._descend(i, floor, hinted, cpu)
        return self._minimise(i, floor, hinted, cpu)

    def _descend(self, i: int, floor: int, hinted, cpu: float | None) -> Outcome:
        """The smallest peak by canonical probes (`canonical.descend`) for ``cpu`` CPU seconds
        per thread within the wall time left, reporting progress."""
        part, options = self.parts[i], self.options
        seconds, cpu = self._limits(cpu, self.seconds_left())

        def on_better(offsets):
            self.tops[i] = self._top(part, offsets)
            self.report()

        def on_floor(bound):
            self.bounds[i] = max(self.bounds[i], bound * part.scale)
            self.report()

        original = self.problem
        widths = original.ends[part.buffers] - original.starts[part.buffers]
        threads = 1 if options.deterministic else options.threads or os.cpu_count() or 1
        proofs: list = []

        def prove(low: int, seconds: float | None, nodes: int | None, cpu: float | None):
            lifted = floors.raise_floor(part.problem, low, seconds=seconds, nodes=nodes,
                                        cpu=cpu, threads=threads, stop=options.stop,
                                        widths=widths, on_floor=on_floor)
            proofs.extend(lifted.probes)
            return lifted.floor, lifted.nodes, lifted.interrupted, lifted.offsets

        outcome = canonical.descend(
            part.problem, floor, hinted, seconds=seconds, stop=options.stop,
            threads=threads, widths=widths, deterministic=options.deterministic,
            on_better=on_better, on_floor=on_floor, prove=prove if options.floors else None,
            enough=lambda low: options.enough(low, part.scale), cpu=cpu)
        if proofs:
            outcome.stats["floor_probes"] = proofs
        self.clock_cuts += outcome.stats["clock_cuts"]
        return outcome

    def _share(self, parts_left: int) -> float | None:
        """This part's CPU seconds: the ``cpu`` budget, else the time limit, less the CPU the
        run has taken (`taken`, and the part's own so far), shared by the parts still to
        plan. On an idle machine the wall time left, on a busy one more: the wall clock then
        ends the run first."""
        budget = self.budget.allowance()
        if budget is None:
            return None
        taken = self.taken + (0.0 if self.clock is None else self.clock.spent())
        return max(budget - taken, 0.0) / parts_left

    def _floor_probe(self, i: int, floor: int, hinted: np.ndarray,
                     cpu: float | None) -> Outcome | None:
        """A large plain part to minimise: one canonical probe at the floor first.

        Most large traces pack at their live load, and the canonical order
        finds that layout in one pass of n nodes, where windows of the
        neighbourhood search would take minutes (10k-buffer training and
        inference traces: optimal in 0.6-1.6 s, against 1.0007 and 1.003 after
        5 s of windows). Only up to `PROBE_PAIRS` overlapping pairs: the kernel
        lists them all (a 10k-buffer trace with 8.3 M pairs: 0.73 GB for the whole
        `memplan solve`, against 0.25 GB with the windows alone). The probe has
        `canonical.PROBE_SECONDS` of CPU (nodes in deterministic mode) per
        `PROBE_BUFFERS` buffers, at most half of the part's ``cpu`` seconds, none below
        a second, and never past the wall time left. Returns the optimal outcome, the
        hint's when Ctrl-C or ``stop`` came, or None (then the windows).
        """
        part, options = self.parts[i], self.options
        scaled = part.problem
        if not (self.minimize and options.canonical and canonical.plain(scaled)) or \
                time_overlap_count(scaled.starts, scaled.ends) > PROBE_PAIRS:
            return None
        scale = max(1.0, len(part.buffers) / PROBE_BUFFERS)
        most = None if cpu is None else cpu * PROBE_CPU_SHARE
        if most is not None and most < canonical.PROBE_SECONDS:
            return None  # too short to finish one pass over a large part: no use, and memory
        probe = canonical.PROBE_SECONDS * scale if most is None else \
            min(canonical.PROBE_SECONDS * scale, most)
        wall = self.seconds_left()
        if options.deterministic and most is not None:
            wall = most if wall is None else min(most, wall)
        verdict = canonical.fit(  # the probe in CPU time: the same verdict on a busy machine
            part.problem, floor, seconds=wall, cpu=None if options.deterministic else probe,
            threads=1, stop=options.stop,  # one thread: each lists every pair
            node_budget=int(canonical.PROBE_NODES * scale) if options.deterministic else None)
        if verdict.stats["interrupted"]:
            return Outcome("feasible", hinted, floor, True, {"floor_probe": verdict.stats})
        if verdict.status != "feasible":
            return None
        self.tops[i] = self._top(part, verdict.offsets)
        self.report()
        return Outcome("optimal", verdict.offsets, floor, False, {"floor_probe": verdict.stats})

    def _neighbourhoods(self, i: int, floor: int, hinted: np.ndarray,
                        cpu: float | None) -> Outcome:
        """A large part: its warm start improved window by window (`memplan.solver.lns`).

        To minimise, down to the floor; to fit, until the plan fits the capacity; for
        ``cpu`` CPU seconds per worker (CP-SAT's import counts), within the wall time left.
        """
        clock = CpuClock(self.options.threads or 1, process=True).start()
        seconds, cpu = self._limits(cpu, self.seconds_left())
        watch = Stopwatch()
        part = self.parts[i]
        capacity = part.problem.capacity
        goal = self.options.enough(floor, part.scale) if self.minimize else max(floor, capacity)
        lns = import_within("memplan.solver.lns", seconds)  # CP-SAT: only when used
        found_offsets, extra = hinted, {"cut": "no time left to import CP-SAT"}
        interrupted = False
        if lns is not None:

            def on_solution(offsets):
                new = self._top(part, offsets)
                if self.tops[i] is None or new < self.tops[i]:
                    self.tops[i] = new
                    self.report()

            left = None if seconds is None else seconds - watch.elapsed()
            hinted = sink_spanning(part.problem, hinted)  # its windows then meet the peak
            found = lns.improve(part.problem, hinted, floor=goal, seconds=left,
                                options=self.options, on_solution=on_solution,
                                cpu=None if cpu is None else cpu - clock.spent())
            found_offsets, extra, interrupted = found.offsets, {"lns": found.stats}, \
                found.interrupted
        top = int((found_offsets + part.problem.sizes).max())
        if self.minimize:
            status = "optimal" if top <= floor else "feasible"
        else:
            status = "feasible" if top <= capacity else "unknown"
        return Outcome(status, found_offsets, floor, interrupted,
                       {**extra, "units": len(part.buffers)})

    def _minimise(self, i: int, floor: int, hinted, cpu: float | None) -> Outcome:
        """The smallest peak: fit at the floor, then bisect by fit races, then minimise.

        Fitting (a race of orders, `search`) is far faster than CP-SAT's own
        minimisation at finding low peaks, so the targets between the floor
        and the best peak are bisected: a target that fits lowers the best
        peak, one proven infeasible raises the floor, one that times out is
        left. The rest of the time goes to CP-SAT's minimisation, the only one
        that proves bounds between the floor and the best peak.

        Clocks: the bisection's share of the part's ``cpu`` seconds and each fit
        race's step are CPU seconds per thread of the searches (`memplan.budget
        .CpuClock`), so that a busy machine tries the same targets, later; the
        wall clock only ends the part at the time limit. Deterministic mode:
        each fit race's step is CP-SAT's deterministic seconds (and the
        canonical search's nodes).
        """
        wall = self.seconds_left()
        if cpu is not None and (cpu <= 0 or (wall is not None and wall <= 0)):  # no import
            return Outcome("unknown", hinted, floor)
        from memplan.shares import DESCENT_SHARE, DESCENT_STEP_SECONDS

        clock = CpuClock(self.threads(), process=True).start()
        sizes, capacity = self.parts[i].problem.sizes, self.parts[i].problem.capacity
        budget = None if cpu is None else cpu * DESCENT_SHARE  # CPU seconds per thread
        step = DESCENT_STEP_SECONDS if budget is None else min(DESCENT_STEP_SECONDS, budget)
        best, hard, target = hinted, floor - 1, floor  # hard: the highest target given up on
        while True:
            left = None if budget is None else budget - clock.spent()
            top = None if best is None else int((best + sizes).max())
            wall = self.seconds_left()
            if target is None or (left is not None and left <= 0) or \
                    (wall is not None and wall <= 0):
                break
            seconds, race = self._limits(step if left is None else min(step, left), wall)
            outcome = self._search(i, floor, target, None, seconds, minimize=False, cpu=race)
            if outcome.status == "feasible":
                best, top = outcome.offsets, int((outcome.offsets + sizes).max())
            elif outcome.status == "infeasible":
                floor = hard = target + 1
            else:
                hard = target
            if outcome.interrupted or (top is not None and
                                       top <= self.options.enough(floor, self.parts[i].scale)):
                status = "optimal" if top is not None and top <= floor else "feasible"
                return Outcome(status, best, floor, outcome.interrupted, outcome.stats)
            limit = top if capacity is None or top is None else min(top, capacity + 1)
            if limit is not None and hard + 1 >= limit and cpu is not None:
                hard, step = floor - 1, 2 * step  # every target given up: again, longer
            target = None if limit is None or hard + 1 >= limit else (hard + limit) // 2
        top = None if best is None else int((best + sizes).max())
        seconds, rest = self._limits(None if cpu is None else cpu - clock.spent(),
                                     self.seconds_left())
        result = self._search(i, floor, top, best, seconds, minimize=True, cpu=rest)
        if result.offsets is None or (best is not None and
                                      int((result.offsets + sizes).max()) > top):
            result.offsets = best
        result.bound = max(result.bound, floor)
        return result

    def threads(self) -> int:
        """Threads a search of this run keeps busy: the canonical search's, or CP-SAT's
        threads (one per core unless ``threads`` says)."""
        return self.options.threads or os.cpu_count() or 1

    def _limits(self, cpu: float | None,
                wall: float | None) -> tuple[float | None, float | None]:
        """``(seconds, cpu)`` for a search of ``cpu`` CPU seconds per thread within ``wall``
        seconds on the clock (None: no limit); deterministic mode: ``cpu`` as the
        deterministic budget, the clock capping it."""
        if self.options.deterministic:
            limits = [t for t in (cpu, wall) if t is not None]
            return (min(limits) if limits else None), None
        return wall, cpu

    def _search(self, i: int, floor: int, top: int | None, hinted, seconds: float | None, *,
                minimize: bool, cpu: float | None = None) -> Outcome:
        """One search of part ``i``: peak in [floor, top] (minimise) or every top <= top,
        for at most ``seconds`` (wall; deterministic budgets in deterministic mode) and
        ``cpu`` CPU seconds per thread (None: no CPU budget)."""
        part, options = self.parts[i], self.options
        if (seconds is not None and seconds <= 0) or (cpu is not None and cpu <= 0):
            return Outcome("unknown", None, floor)
        if not minimize and options.canonical and canonical.plain(part.problem):
            return self._fit_race(i, floor, top, seconds, cpu)
        return self._cp_search(i, floor, top, hinted, seconds, minimize=minimize, cpu=cpu)

    def _fit_race(self, i: int, floor: int, top: int, seconds: float | None,
                  cpu: float | None = None) -> Outcome:
        """Fit part ``i`` under ``top``: the canonical search and CP-SAT, racing.

        - the canonical search runs alone on every core for a short head
          start (`head_start_seconds`): the problems it settles, it settles fast;
        - then CP-SAT joins with its own portfolio (``strategy="none"``: the
          canonical search already is the lowest-offset search, compiled),
          the canonical search keeps one thread, and the first verdict ends
          both (tilings, which only CP-SAT solves, lose the head start only).

        Deterministic mode: the canonical search has a node budget on one
        thread, then CP-SAT the rest of the time. ``cpu``: CPU seconds per thread
        the race may take (the head start's, then CP-SAT's per worker), within
        ``seconds`` on the wall clock.
        """
        part, options = self.parts[i], self.options
        watch = Stopwatch()
        head = head_start_seconds(seconds if cpu is None else cpu, options.canonical_share)
        budget = None if not options.deterministic else canonical.HEAD_START_NODES if \
            seconds is None else min(canonical.HEAD_START_NODES, int(
                canonical.NODES_PER_SECOND * max(seconds * options.canonical_share, 1.0)))
        original = self.problem
        race = canonical.Race(part.problem, top, node_budget=budget,
                              widths=original.ends[part.buffers] - original.starts[part.buffers])
        threads = 1 if options.deterministic else options.threads or os.cpu_count() or 1
        race.start(threads, seconds, cpu)
        interrupted = canonical.wait(race, None, options.stop) if options.deterministic else \
            canonical.run_head_start(race, head, options.stop)
        outcome = None
        left = None if seconds is None else seconds - watch.elapsed()
        cpu_left = None if cpu is None else cpu - race.cpu()
        if race.verdict is None and not interrupted and (left is None or left > 0) and \
                (cpu_left is None or cpu_left > 0):
            alone = options.deterministic or race.slow()  # CP-SAT then takes every core
            race.narrow(0 if alone else 1)
            joint = Joint(race, options.stop)
            outcome = self._cp_search(i, floor, top, None, left, minimize=False,
                                      options=racing(options, threads, joint.event, alone),
                                      cpu=cpu_left)
            joint.close()
            interrupted = outcome.interrupted and not race.settled.is_set()
        race.cancel()
        return self._verdict(i, floor, top, race.result(), outcome, interrupted)

    def _verdict(self, i: int, floor: int, top: int, verdict: canonical.Verdict,
                 outcome: Outcome | None, interrupted: bool) -> Outcome:
        """The race's outcome: the canonical verdict if it settled, else CP-SAT's."""
        stats = {"canonical": verdict.stats}
        if verdict.status == "feasible":
            outcome = Outcome("feasible", verdict.offsets, floor, stats=stats)
        elif verdict.status == "infeasible":
            outcome = Outcome("infeasible", None, max(floor, top + 1), stats=stats)
        elif outcome is None:
            outcome = Outcome("unknown", None, floor, stats=stats)
        else:
            outcome.stats["canonical"] = verdict.stats
        outcome.interrupted = interrupted
        if outcome.offsets is None and not self.minimize:
            outcome.offsets = self._fallback(i, None)
        return outcome

    def _cp_search(self, i: int, floor: int, top: int | None, hinted, seconds: float | None,
                   *, minimize: bool, options: ExactOptions | None = None,
                   cpu: float | None = None) -> Outcome:
        """One CP-SAT search of part ``i`` (see `_search`)."""
        part, options = self.parts[i], options or self.options
        if seconds is not None and self.build_seconds.get(i, 0.0) >= seconds:
            return Outcome("unknown", None, floor,  # the time left would not even build it
                           stats={"cut": "no time left to build the model again"})
        watch = Stopwatch()  # importing CP-SAT the first time counts too
        cp = import_within("memplan.solver.cp_search", seconds)  # CP-SAT: when first needed
        if cp is None:
            return Outcome("unknown", None, floor, stats={"cut": "no time left to import "
                                                                 "CP-SAT"})
        from memplan.solver.model import build_model

        if minimize and options.absolute_gap:  # CP-SAT's objective is in the part's units
            options = dataclasses.replace(options,
                                          absolute_gap=options.absolute_gap // part.scale)

        model = build_model(part.problem.replace(capacity=top) if not minimize
                            else part.problem, lower_bound=floor, upper_bound=top,
                            minimize=minimize, by_section=options.sections)
        built = watch.elapsed()
        self.build_seconds[i] = built
        if seconds is not None:  # the build counts against the time limit
            seconds = max(0.0, seconds - built)
        overall = self.seconds_left()  # and never past the run's own deadline
        if overall is not None:
            seconds = max(0.0, overall) if seconds is None else min(seconds, max(0.0, overall))
        if hinted is not None:
            model.hint(hinted)

        def on_solution(offsets):
            new = self._top(part, offsets)
            if self.tops[i] is None or new < self.tops[i]:
                self.tops[i] = new
                self.report()

        def on_bound(bound):
            self.bounds[i] = max(self.bounds[i], bound * part.scale)
            self.report()

        outcome = cp.search(model, options, on_solution=on_solution, on_bound=on_bound,
                            seconds=seconds, cpu=cpu)
        self.clock_cuts += outcome.stats.get("clock_cuts", 0)
        outcome.stats.update(boxes=len(model.geometry.boxes), units=len(model.geometry.units),
                             links=len(model.geometry.links),
                             loose_aliases=len(model.geometry.loose))
        if outcome.offsets is None and outcome.status == "infeasible" and not minimize:
            outcome.offsets = self._fallback(i, model)
        return outcome

    def _fallback(self, i: int, model) -> np.ndarray:
        """Some layout of part ``i`` (over its capacity): the hint's, or one sharing nothing."""
        if self.hint is not None:
            return part_offsets(self.parts[i], self.hint.offsets)
        if model is None:
            return canonical.stacked(self.parts[i].problem)
        return model.stacked


@register("exact")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         options: ExactOptions | None = None, **keywords) -> Plan:
    """The exact planner (see the module doc).

    ``options`` is an `ExactOptions` record, which carries the seed too (leave
    ``seed`` unset then); without it, the fields of `ExactOptions` come as
    keywords. The budget (``time_limit=`` and ``cpu=`` at the door, or the
    deprecated fields of the record) bounds the whole run on the wall clock,
    down to CP-SAT's ``max_time_in_seconds`` (`memplan.solver.cp_params
    .cp_solver`); the stages share its allowance in CPU seconds: the warm
    start's share, then each part's share of what is left (`_Run.solve_part`),
    so that a busy machine takes the same steps, later.
    """
    before = CpuClock(process=True).start()
    if options is None:
        settings = ExactOptions.from_kwargs(seed=seed, **keywords)
    elif not isinstance(options, ExactOptions):
        raise TypeError(f"planner 'exact' takes options=ExactOptions(...), "
                        f"not {type(options).__name__}")
    elif keywords or seed != 0:
        raise TypeError("planner 'exact': give options=ExactOptions(...) or keyword options "
                        "(seed, threads, ...), not both")
    else:
        settings = options
    if settings.time_limit is not None or settings.cpu is not None:  # deprecated fields: they
        budget = Budget.of_limit(  # fill in what the caller's budget does not say
            settings.time_limit if budget.limit is None else budget.limit,
            cpu=settings.cpu if budget.cpu is None else budget.cpu)
    check_single_region(problem)
    working = _single_region(problem)
    stats: dict = {}
    if hint is None and canonical_first(working, settings):
        stats["warm_start"] = "skipped: the canonical search starts at once"
    else:
        hint = _warm_start(working, hint, settings, stats, budget)
    ceiling = _ceiling(working, hint, budget.limit)
    run = _Run(working, settings, hint, budget, taken=before.spent())  # one core so far
    stats.update(parts=len(run.parts), scale=run.parts[0].scale if run.parts else 1,
                 mode="minimise" if run.minimize else "fit")
    run.report()  # the warm start's arena and the lower bound, at once
    capacity = working.capacity
    if capacity is not None and run.lower > capacity:
        run.outcomes = [Outcome("infeasible", None, run.lower)] * len(run.parts)
    else:
        try:
            for i in range(len(run.parts)):
                if settings.stop is not None and settings.stop.is_set():
                    stats["interrupted"] = True
                    break
                outcome = run.outcomes[i] = run.solve_part(i, len(run.parts) - i)
                run.bounds[i] = max(run.bounds[i], outcome.bound * run.parts[i].scale)
                if outcome.offsets is not None:
                    run.tops[i] = run._top(run.parts[i], outcome.offsets)
                run.report()
                if outcome.interrupted or outcome.status == "infeasible":
                    stats["interrupted"] = outcome.interrupted
                    break
        except KeyboardInterrupt:  # Ctrl-C between two searches: keep what we have
            stats["interrupted"] = True
    result = _plan(problem, run, stats, budget.elapsed(), ceiling)
    result.stats["cut_short"] = not result.stats["interrupted"] and (  # by the time limit
        result.status == "unknown" or (result.status == "feasible" and run.minimize and not
                                       settings.within_gap(result.arena_size, result.best_bound)))
    return result


def by_neighbourhoods(problem: Problem, options: ExactOptions) -> bool:
    """Whether a part with a warm start is improved window by window (`memplan.solver.lns`):
    over ``lns_buffers`` buffers or ``lns_pairs`` pairs overlapping in time (one model of
    it would not build in time)."""
    return len(problem) > options.lns_buffers or \
        time_overlap_count(problem.starts, problem.ends) > options.lns_pairs


def canonical_first(problem: Problem, options: ExactOptions | None = None) -> bool:
    """Whether ``problem`` starts with the canonical search (no warm start needed).

    In fit mode the warm start only matters if it fits; on the problems the
    canonical search takes, that search settles the question sooner. To
    minimise (no capacity), its first dive is a layout as good to start from
    on problems up to ``lns_buffers``; larger ones go to the neighbourhood
    search from ``best``'s plan: there the dive lays buffers out badly and slowly
    (10k buffers: a network 96 times its bound, a training step twice its bound
    or, in deterministic mode, 10 s for a 5 s limit), where ``best``'s breadth
    pass takes 0.3 s and meets the bound within 0.01 %.
    """
    options = options or ExactOptions()
    fit = problem.capacity is not None and not options.minimize
    return options.canonical and canonical.plain(problem) and \
        (fit or (problem.capacity is None and len(problem) <= options.lns_buffers))


def _single_region(problem: Problem) -> Problem:
    """The problem with region 0's capacity as its own (the exact planner plans one arena)."""
    if not problem.regions or problem.regions[0].capacity is None:
        return problem
    capacity = problem.regions[0].capacity
    if problem.capacity is not None:
        capacity = min(capacity, problem.capacity)
    return problem.replace(capacity=capacity, regions=())


def _plan(problem: Problem, run: _Run, stats: dict, seconds: float,
          ceiling: Plan | None = None) -> Plan:
    """The plan of a finished run, with its status and statistics; the ``ceiling``'s
    offsets when they make a smaller arena."""
    outcomes = run.outcomes
    pieces = []
    for part, outcome in zip(run.parts, outcomes, strict=True):
        offsets = None if outcome is None else outcome.offsets
        if offsets is None and run.hint is not None:
            offsets = part_offsets(part, run.hint.offsets)
        if offsets is None and canonical.plain(part.problem):  # no warm start was needed
            offsets = canonical.stacked(part.problem)
        if offsets is None and ceiling is None:
            raise NoPlanError(f"the exact planner stopped after {seconds:.1f} s without any "
                              f"plan for {len(part.buffers)} buffers (give it a warm start or "
                              f"more time)")
        pieces.append(offsets)
    statuses = [None if o is None else o.status for o in outcomes]
    infeasible = "infeasible" in statuses
    capacity = run.problem.capacity
    bound = max([run.lower, *run.bounds])
    if infeasible:
        scale = run.parts[statuses.index("infeasible")].scale
        bound = max(bound, (capacity // scale + 1) * scale)
    stats.setdefault("interrupted", False)
    stats["clock_cut"] = run.clock_cuts > 0  # deterministic mode: this run may not repeat
    stats["cpu_seconds"] = run.taken  # per thread its searches kept busy (`_Run.solve_part`)
    stats.update(statuses=statuses, parts_stats=[None if o is None else o.stats
                                                 for o in outcomes])
    offsets = None if any(piece is None for piece in pieces) else \
        assemble(problem, run.parts, pieces)  # a part without any plan: the ceiling's, whole
    if ceiling is not None:
        stats["ceiling_arena"] = ceiling.arena_size
        if offsets is None or ceiling.arena_size < int((offsets + problem.sizes).max(initial=0)):
            offsets, stats["ceiling"] = ceiling.offsets, CEILING
    result = Plan.from_offsets(problem, offsets, planner="exact",
                               seconds=seconds, best_bound=bound, stats=stats)
    check_bound(result, run.unsound)
    result.status = plan_status(result.arena_size, result.best_bound,
                                fits=capacity is None or result.arena_size <= capacity,
                                proven_infeasible=infeasible, searched=True)
    return result


def check_bound(result: Plan, seen: tuple[int, int] | None = None) -> None:
    """Raise `UnsoundBoundError` when a proven bound lies above a valid plan's arena.

    A true lower bound is at most every valid plan's arena: one above the
    returned plan, or above any complete plan ``seen`` during the run (bound,
    arena), means a wrong bound, never a status. O(1).
    """
    for bound, arena in [seen or (0, 0), (result.best_bound, result.arena_size)]:
        if bound > arena:
            raise UnsoundBoundError(
                f"the exact planner proved a lower bound of {bound} bytes, above a valid plan "
                f"of {arena} bytes: a solver defect, please report it with the problem")
