"""The canonical search: a fast complete search for "does it fit", racing CP-SAT.

CP-SAT's lowest-offset strategy explores every layout; most of them are the
same layout in another order. This search explores only *canonical* layouts
(the pruning published with MiniMalloc, Moffitt 2023; the code is memplan's
own, in the C kernel ``_canonical_kernel.c``):

- buffers are placed one at a time in increasing ``(offset, rank)`` order
  (rank: the buffer's position in a static order), each at the lowest
  aligned offset above the placed buffers it overlaps in time. Every layout
  that fits can be pushed down into such a one, so nothing is lost;
- **dominance**: a buffer is not placed at or above the top of an unplaced
  buffer's lowest slot (that buffer would fit in the gap below);
- **section floors**: per time section, the lowest offset still free and the
  bytes still to place there; a section whose floor (raised to the offset of
  the last placement, and to the lowest offset its unplaced buffers can take)
  plus those bytes exceeds the capacity ends the branch;
- **cover check** (memplan's own): a section with no byte to spare above the
  offset of the last placement needs an unplaced buffer starting exactly
  there; those buffers, disjoint in time, must cover every such section
  (an exact cover of the lowest row on perfect packings such as tilings);
- **nothing overhead**: a buffer that overlaps no unplaced buffer is placed
  and the other choices at that node are not tried;
- **decomposition**: once no unplaced buffer spans a time point, both sides
  are searched apart.

Orders: the static orders (``"lifetime"``, then area, then ``"total"``,
the largest live load the buffer sees; total, area, lifetime; total,
lifetime, area) take turns in
rounds with a node limit that doubles every round, as MiniMalloc does. Two
sweeps in time join them, ``"start"`` (earliest start first) and ``"end"``
(latest end first): each fills every offset's row from one end of time to
the other, so on a perfect packing (every section full: tilings) the cover
check leaves about one buffer to try at each node, and a sweep lays out a
pinwheel tiling of a thousand buffers in as many nodes where the other
orders take millions; they open every round there. Elsewhere they rarely
win and close the first round only. On
several cores the turns run side by side (one thread each: the kernel
releases the GIL), and the first one that settles the question wins. A turn
that ends below its node limit without a layout proves that none fits.

Clocks: every adaptive choice (a probe given up, a head start's end, a pace
judged slow) counts the CPU time of the search's own threads (`Race.cpu`:
each thread's CPU clock, read live), never wall-clock rates, so that a busy
machine gets the same verdicts, later; the wall clock only keeps the caller's
time limit.

Use: problems with fixed lifetimes, sizes and alignments only (no aliases,
pinned offsets or explicit conflicts: `plain`), to fit a capacity. The exact
planner gives it a head start, then races it against CP-SAT (`memplan.solver
.exact`). Cost: exponential in the worst case; each node costs
O(n + d * s) for n buffers, d overlapping buffers and s sections.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field

import numpy as np

from memplan.budget import Stopwatch, ThreadClock, deadline_in, to_deadline
from memplan.problem import NO_OFFSET, Problem
from memplan.shares import (
    HEAD_START_PACE,
    NODES_PER_SECOND,
    PACE_AFTER_SECONDS,
    POLL_SECONDS,
    PROBE_SECONDS,
    WATCH_SECONDS,
)
from memplan.solver.outcome import Outcome

try:
    from memplan.solver._canonical_kernel import search as _kernel_search
except ImportError:  # no C compiler at install time: the exact planner uses CP-SAT alone
    _kernel_search = None

FOUND, NOT_FOUND, ABORTED, STOPPED = 1, 0, -1, -2
KEYS = {  # static orders: the kernel's key letters, most significant first (largest first):
    "lifetime": "WAT",  # W: lifetime, A: area (size x lifetime), T: the largest live load of
    "total": "TAW",  # the buffer's sections (bytes still to place, in a sub-problem);
    "total_lifetime": "TWA",  # Z: size, E: earliest start, U: latest end, C: sections,
    "area": "AWT",  # O: overlapping buffers
    "size": "ZWA",
    "start": "EWA",
    "end": "UWA",
}
ORDERS = ("lifetime", "total", "total_lifetime")  # the turns, in this order, every round
SWEEPS = ("start", "end")  # ... and these: first in every round on a perfect packing, else
# last in the first round (see `_round`)
FIRST_NODES = 2  # the first round's node limit, times the number of buffers
MAX_BUFFERS = 20_000  # beyond this, overlaps and sections cost more than they save
PROBE_NODES = 50_000  # deterministic mode: a first probe's nodes (PROBE_SECONDS' worth)
HEAD_START_NODES = 300_000  # racing CP-SAT: nodes the search has alone (see `run_head_start`)


def available() -> bool:
    """Whether the compiled kernel is installed."""
    return _kernel_search is not None


def plain(problem: Problem) -> bool:
    """Whether the canonical search can plan ``problem`` (see the module doc)."""
    return (available() and 0 < len(problem) <= MAX_BUFFERS and not len(problem.alias_src)
            and not len(problem.conflicts) and not bool((problem.pinned != NO_OFFSET).any()))


@dataclass
class Verdict:
    """What a canonical search ended with."""

    status: str  # "feasible" (offsets fit), "infeasible" (proven), "unknown" (time, stop)
    offsets: np.ndarray | None  # the fitting layout, or None
    stats: dict = field(default_factory=dict)  # nodes, turns, settled_by


def sections(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's time sections: ``(first, end, totals)``.

    A section is a maximal set of buffers live together: the step between a
    point where some buffer starts and the next point, where some buffer ends
    (the live sets in between are subsets of these, so they prune nothing
    more). Buffer ``b`` spans sections ``first[b] .. end[b] - 1``; ``totals``
    are the sections' live bytes. O(n log n).
    """
    n = len(problem)
    points, inverse = np.unique(np.r_[problem.starts, problem.ends], return_inverse=True)
    begin, finish = inverse[:n], inverse[n:]
    starts_here = np.zeros(len(points), bool)
    ends_here = np.zeros(len(points), bool)
    starts_here[begin] = True
    ends_here[finish] = True
    kept = np.flatnonzero(starts_here[:-1] & ends_here[1:])
    first = np.searchsorted(kept, begin).astype(np.int64)
    end = np.searchsorted(kept, finish).astype(np.int64)
    delta = np.zeros(len(kept) + 1, np.int64)
    np.add.at(delta, first, problem.sizes)
    np.add.at(delta, end, -problem.sizes)
    return first, end, np.cumsum(delta)[:-1]


class Race:
    """A canonical search of one problem under ``capacity``, run in helper threads.

    ``start(threads)`` begins (or widens) it; ``wait`` blocks until it settles,
    ``cancel`` ends it. Turns are handed out in a fixed sequence (rounds of
    node limits doubling, every order in each round); with one thread the
    outcome depends on nothing but the problem and the node budget.
    """

    def __init__(self, problem: Problem, capacity: int, *, orders=ORDERS,
                 sweeps=SWEEPS, node_budget: int | None = None, widths=None):
        self.problem, self.capacity = problem, int(capacity)
        self.node_budget = node_budget  # total nodes over all turns (deterministic mode)
        # widths: lifetimes in the caller's time units, for the orders (a part's times are ranks)
        widths = problem.ends - problem.starts if widths is None else widths
        unknown = sorted((set(orders) | set(sweeps)) - set(KEYS))
        if unknown or not orders:
            raise ValueError(f"unknown order(s) {unknown}; valid: {', '.join(KEYS)}")
        first, end, totals = sections(problem)
        perfect = bool((totals == self.capacity).all())
        n = len(problem)
        self._arrays = [np.ascontiguousarray(a, np.int64).tobytes() for a in
                        (problem.sizes, first, end, problem.alignments,
                         widths)]
        self._turns = ((order, n * FIRST_NODES << turn) for turn in itertools.count()
                       for order in _round(tuple(orders), tuple(sweeps), perfect, turn))
        self._lock = threading.Lock()
        self._flags: list[bytearray] = []  # per thread: the kernel's stop flag
        self.settled = threading.Event()  # set once the verdict is in (or the race ended)
        self.verdict: Verdict | None = None
        self.nodes = self.turns = 0
        self._threads: list[threading.Thread] = []
        self._clocks: list[ThreadClock] = []  # per thread: its CPU time
        self._active = 0  # threads still taking turns
        self._deadline: float | None = None
        self.cpu_limit: float | None = None  # `wait` ends the race at this `cpu`
        self._error: BaseException | None = None

    def cpu(self) -> float:
        """CPU seconds of its threads, per thread (their mean): on an idle machine the wall
        time they have run, on a busy one less; what its pace and its limits count."""
        with self._lock:
            clocks = list(self._clocks)
        return sum(clock.seconds() for clock in clocks) / max(len(clocks), 1)

    def slow(self) -> bool:
        """Whether its nodes come slower than `HEAD_START_PACE` a CPU second, counted from
        `PACE_AFTER_SECONDS` of CPU on (costly nodes, as on tilings the sweeps miss: CP-SAT's
        ground). CPU time: a busy machine slows the clock, not the pace."""
        spent = self.cpu()
        return spent >= PACE_AFTER_SECONDS and self.nodes < HEAD_START_PACE * spent

    def start(self, threads: int, seconds: float | None, cpu: float | None = None):
        """Run turns on ``threads`` more threads until settled, cancelled or ``seconds`` pass
        (wall: the caller's limit); `wait` also ends it once its `cpu` reaches ``cpu``."""
        self._deadline = deadline_in(seconds)
        self.cpu_limit = cpu
        for _ in range(max(threads, 0)):
            clock = ThreadClock()
            with self._lock:
                self._active += 1
                self._flags.append(bytearray(1))
                self._clocks.append(clock)
            thread = threading.Thread(target=self._work, args=(self._flags[-1], clock),
                                      name="memplan-canonical", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _next(self, flag: bytearray):
        with self._lock:
            if self.settled.is_set() or flag[0]:
                return None
            if self.node_budget is not None and self.nodes >= self.node_budget:
                return None
            order, limit = next(self._turns)
            if self.node_budget is not None:
                limit = min(limit, self.node_budget - self.nodes)
            return order, limit

    def _work(self, flag: bytearray, clock: ThreadClock):
        clock.begin()
        try:
            while (turn := self._next(flag)) is not None:
                order, limit = turn
                left = -1.0 if self._deadline is None else to_deadline(self._deadline)
                if self._deadline is not None and left <= 0:
                    break
                code, raw, nodes = _kernel_search(*self._arrays, KEYS[order], self.capacity,
                                                  limit, left, flag)
                with self._lock:
                    self.nodes += nodes
                    self.turns += 1
                    if self.settled.is_set() or code in (ABORTED, STOPPED):
                        if code == STOPPED:
                            break
                        continue
                    offsets = np.frombuffer(raw, np.int64).copy() if code == FOUND else None
                    self.verdict = Verdict("feasible" if code == FOUND else "infeasible",
                                           offsets, {"settled_by": (order, limit)})
                    for other in self._flags:
                        other[0] = 1
                    self.settled.set()
        except BaseException as error:  # noqa: BLE001  (re-raised by wait)
            self._error = error
        finally:
            clock.end()
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self.settled.set()  # the last thread out: no verdict if none came

    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def narrow(self, threads: int):
        """Keep only the first ``threads`` threads running (the others stop at once)."""
        with self._lock:
            for flag in self._flags[threads:]:
                flag[0] = 1

    def cancel(self):
        """Stop every turn (the kernel polls the flags) and wait for the threads."""
        with self._lock:
            for flag in self._flags:
                flag[0] = 1
        for thread in self._threads:
            thread.join()
        self.settled.set()

    def result(self) -> Verdict:
        """The verdict (``unknown`` when none came); raises a helper thread's error."""
        if self._error is not None:
            raise self._error
        verdict = self.verdict or Verdict("unknown", None)
        verdict.stats.update(nodes=self.nodes, turns=self.turns)
        return verdict


def _round(orders: tuple, sweeps: tuple, perfect: bool, turn: int) -> tuple:
    """The orders of round ``turn``: the sweeps first in every round of a perfect packing,
    last in the first round of any other problem (measured: on MiniMalloc's problems they
    cost the other orders up to half again their time when they come first)."""
    if perfect:
        return sweeps + orders
    return orders + sweeps if turn == 0 else orders


def run_head_start(race: Race, most: float, stop: threading.Event | None) -> bool:
    """Wait while ``race`` runs alone for its head start; True if ``stop`` or Ctrl-C interrupted.

    The head start ends when the race settles (or its wall-clock limit ends it),
    after `HEAD_START_NODES` nodes (the problems it wins, it wins within them),
    after ``most`` CPU seconds of its threads (`Race.cpu`), or after
    `PACE_AFTER_SECONDS` of CPU when its pace is under `HEAD_START_PACE` (costly
    nodes: tilings the sweeps miss, where CP-SAT wins). Nodes count when a turn
    ends, so the pace measured is a floor. CPU time, not wall: on a busy machine
    the head start lasts longer, and settles the same problems.
    """
    while not race.settled.is_set():
        if race.cpu() >= most or race.nodes >= HEAD_START_NODES or race.slow():
            return False
        if wait(race, WATCH_SECONDS, stop):
            return True
    return False


def stacked(problem: Problem) -> np.ndarray:
    """A layout that shares nothing: every buffer above the previous one, aligned."""
    offsets = np.empty(len(problem), np.int64)
    top = 0
    for b, (size, alignment) in enumerate(zip(problem.sizes.tolist(),
                                              problem.alignments.tolist(), strict=True)):
        offsets[b] = top + (-top % alignment)
        top = int(offsets[b]) + size
    return offsets


def wait(race: Race, seconds: float | None, stop: threading.Event | None) -> bool:
    """Wait up to ``seconds`` for ``race`` to settle; True if ``stop`` or Ctrl-C interrupted.
    A race past its `Race.cpu_limit` is stopped (its verdict stays unknown)."""
    end = deadline_in(seconds)
    try:
        while not race.settled.is_set():
            if race.cpu_limit is not None and race.cpu() >= race.cpu_limit:
                race.narrow(0)  # its threads stop at once; the last one out settles it
                race.settled.wait(POLL_SECONDS)
                continue
            step = POLL_SECONDS if end is None else min(POLL_SECONDS, to_deadline(end))
            if step <= 0:
                return False
            race.settled.wait(step)
            if stop is not None and stop.is_set():
                return True
    except KeyboardInterrupt:
        return True
    return False


def fit(problem: Problem, capacity: int | None = None, *, seconds: float | None = None,
        threads: int = 0, stop: threading.Event | None = None,
        node_budget: int | None = None, orders=ORDERS, sweeps=SWEEPS,
        cpu: float | None = None) -> Verdict:
    """Search ``problem`` for a layout under ``capacity`` (default: the problem's).

    ``threads`` (0: one per core) run the turns side by side, for ``seconds`` (wall) or
    ``cpu`` seconds of each thread's CPU time (`Race.cpu`), whichever ends first;
    ``node_budget`` caps the nodes of all turns (a deterministic limit); ``orders`` and
    ``sweeps`` as `Race` takes them. Interrupted by ``stop`` or Ctrl-C:
    status ``unknown`` with ``stats["interrupted"]``.
    """
    if not plain(problem):
        raise ValueError("the canonical search takes problems without aliases, pinned offsets "
                         "or explicit conflicts (and needs its compiled kernel)")
    capacity = problem.capacity if capacity is None else capacity
    if capacity is None:
        raise ValueError("the canonical search fits a capacity: give one")
    race = Race(problem, capacity, orders=orders, sweeps=sweeps, node_budget=node_budget)
    race.start(threads or os.cpu_count() or 1, seconds, cpu)
    interrupted = wait(race, None, stop)
    race.cancel()
    verdict = race.result()
    verdict.stats["interrupted"] = interrupted
    return verdict


def descend(problem: Problem, floor: int, best: np.ndarray | None, *, seconds: float | None,
            threads: int, stop: threading.Event | None = None, widths=None,
            deterministic: bool = False, on_better=None, on_floor=None,
            prove=None, enough=None, cpu: float | None = None) -> Outcome:
    """The smallest peak of ``problem`` (no capacity) by bisection with canonical probes.

    Steps:
    - without a layout, one dive at the top of the aligned stack, which
      anything fits (the first leaf is the canonical order's greedy layout;
      the stack itself if the dive finds none in time);
    - probe the floor itself (most real problems pack at their live load),
      then ``(given up + best) // 2``, where "given up" is the highest
      target not yet fitted: a layout lowers the best peak to its own, a
      proof raises the floor (every target below it is infeasible), a probe
      that runs out of time gives the target up;
    - when every target between the floor and the best peak is given up
      (the descent has stalled), ``prove(floor, seconds, nodes)`` (if given)
      may prove a higher floor with as long as a probe had (`memplan.solver
      .floors`; it returns the floor, the nodes it spent, whether ``stop``
      or Ctrl-C interrupted it, and a layout or None); then start
      again from the floor with probes twice as long (from `PROBE_SECONDS`).

    A probe's length is CPU time of its threads (`Race.cpu`), so that a busy
    machine gives up the same targets; ``seconds`` (wall) caps the whole descent, and
    ``cpu`` (if given) the CPU seconds of all its probes (a caller's share of its limit,
    counted as the probes are).

    Deterministic mode: one thread, probes limited by nodes
    (`PROBE_NODES`, doubling), the whole descent by ``seconds`` x
    `NODES_PER_SECOND` nodes. ``on_better(offsets)`` and ``on_floor(floor)``
    report progress. ``enough(floor)``: the highest peak close enough to the floor to stop at
    (a gap tolerance; default: the floor). Returns ``optimal`` when the best peak meets the
    floor.
    """
    descent = _Descent(problem, floor, seconds=seconds, threads=threads, stop=stop,
                       widths=widths, deterministic=deterministic, on_better=on_better,
                       on_floor=on_floor, enough=enough, cpu=cpu)
    descent.dive(best)
    while descent.top > descent.enough(descent.floor) and not descent.interrupted:
        rest = descent.left()
        if rest is not None and rest <= 0:
            break
        if descent.hard + 1 >= descent.top:  # stalled: every target up to the best given up
            if descent.restart(prove, rest):
                break
            continue
        descent.bisect()
    return descent.outcome()


class _Descent:
    """One descent's state (see `descend`): the best layout, the floor, what was spent."""

    def __init__(self, problem: Problem, floor: int, *, seconds: float | None, threads: int,
                 stop: threading.Event | None, widths, deterministic: bool, on_better,
                 on_floor, enough=None, cpu: float | None = None):
        self.problem, self.floor, self.seconds, self.threads = problem, floor, seconds, threads
        self.enough = enough or (lambda low: low)  # the highest peak worth stopping at
        self.stop, self.widths, self.deterministic = stop, widths, deterministic
        self.on_better, self.on_floor = on_better, on_floor
        self.watch = Stopwatch()
        self.budget = None if seconds is None or not deterministic else \
            int(seconds * NODES_PER_SECOND)
        self.spent = self.probes = self.given = 0  # nodes; probes made; those before the descent
        self.cpu, self.cpu_spent = cpu, 0.0  # CPU seconds the probes may take; have taken
        self.interrupted = False
        self.clock_cut = False  # deterministic mode: the clock, not the node budget, ended it
        self.best: np.ndarray | None = None
        self.top = 0  # the best layout's peak
        self.hard, self.step = floor - 1, PROBE_SECONDS  # the highest target given up; seconds

    def peak(self, offsets: np.ndarray) -> int:
        return int((offsets + self.problem.sizes).max())

    def wall_left(self) -> float | None:
        return None if self.seconds is None else self.seconds - self.watch.elapsed()

    def left(self) -> float | None:
        """Nodes (deterministic mode) or seconds left; None without a limit. The clock caps
        deterministic mode too: nodes can be slower than `NODES_PER_SECOND` on large parts."""
        if self.deterministic:
            if self.budget is not None and self.wall_left() <= 0:
                self.clock_cut = True  # this descent may not repeat itself
                return 0
            return None if self.budget is None else self.budget - self.spent
        if self.cpu is not None and self.cpu_spent >= self.cpu:
            return 0.0
        return self.wall_left()

    def limits(self, step: float, rest: float | None,
               clock: bool = True) -> tuple[float | None, int | None, float | None]:
        """A probe's ``(seconds, nodes, cpu)``: ``step`` CPU seconds (`Race.cpu`) within the
        wall-clock time left, or ``step``'s nodes when deterministic (with the time left as
        the clock's cap unless ``clock`` is False)."""
        if not self.deterministic:
            return rest, None, step if self.cpu is None else min(step, self.cpu - self.cpu_spent)
        nodes = int(step / PROBE_SECONDS * PROBE_NODES)
        return self.wall_left() if clock else None, nodes if rest is None else min(
            nodes, int(rest)), None

    def probe(self, target: int, step: float, clock: bool = True) -> Verdict:
        """One canonical search under ``target`` for ``step`` seconds' worth."""
        seconds, nodes, cpu = self.limits(step, self.left(), clock)
        race = Race(self.problem, target, widths=self.widths, node_budget=nodes)
        race.start(1 if self.deterministic else self.threads, seconds, cpu)
        self.interrupted = wait(race, None, self.stop)
        race.cancel()
        verdict = race.result()
        self.spent += verdict.stats["nodes"]
        self.cpu_spent += race.cpu()
        self.probes += 1
        return verdict

    def better(self, offsets: np.ndarray):
        self.best, self.top = offsets, self.peak(offsets)
        if self.on_better is not None:
            self.on_better(offsets)

    def lift(self, floor: int):
        self.floor = floor
        if self.on_floor is not None:
            self.on_floor(floor)

    def dive(self, best: np.ndarray | None):
        """Start from ``best``, or from a dive at the top of the aligned stack (which fits;
        in deterministic mode its node budget alone ends it: a dive cut by the clock would
        leave the stack, twice the arena on large parts)."""
        if best is None:
            stack = stacked(self.problem)
            verdict = self.probe(self.peak(stack), PROBE_SECONDS, clock=False)
            best = verdict.offsets if verdict.offsets is not None else stack
        self.best, self.top = best, self.peak(best)
        self.given = self.probes

    def bisect(self):
        """Probe the floor first, then halfway between the target given up and the best."""
        target = self.floor if self.probes == self.given else (self.hard + self.top) // 2
        verdict = self.probe(target, self.step)
        if verdict.status == "feasible":
            self.better(verdict.offsets)
        elif verdict.status == "infeasible":
            self.hard = target + 1
            self.lift(target + 1)
        elif not self.interrupted:
            self.hard = target

    def restart(self, prove, rest: float | None) -> bool:
        """Stalled: ``prove`` a higher floor if it can, then probes twice as long.

        True when the descent is over (the floor meets the best, or interrupted).
        """
        if prove is not None:
            seconds, nodes, cpu = self.limits(self.step, rest)
            lifted, used, self.interrupted, found = prove(self.floor, seconds, nodes, cpu)
            self.spent += used
            if found is not None and self.peak(found) < self.top:
                self.better(found)
            if lifted > self.floor:
                self.lift(lifted)
            if self.top <= self.enough(self.floor) or self.interrupted:
                return True
        self.hard, self.step = self.floor - 1, 2 * self.step
        return False

    def outcome(self) -> Outcome:
        stats = {"probes": self.probes, "nodes": self.spent, "probe_seconds": self.step,
                 "clock_cuts": int(self.clock_cut), "cpu_seconds": self.cpu_spent}
        return Outcome("optimal" if self.top <= self.floor else "feasible", self.best,
                       self.floor, self.interrupted, stats)
