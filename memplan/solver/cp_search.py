"""How one part's CP-SAT model is searched: parameters, strategy, restarts, stopping.

Steps of `search`:

- set CP-SAT's parameters from the options (`memplan.solver.cp_params`: threads,
  seed, time limit or deterministic time, NoOverlap2D reasoning, subsolvers);
- with the ``lowest_offset`` strategy, add a decision strategy that takes the
  unit with the lowest possible offset (ties: the order's first) and puts it
  there: the canonical search MiniMalloc is built on. Orders follow MiniMalloc's
  preorderings (``total``: the heaviest section a unit crosses, then area,
  then lifetime; ``lifetime``; ``area``; ``size``);
- to fit a capacity with several orders, the orders *race*: each runs at
  once in its own *lane* (one CP-SAT worker), and the first plan that fits
  (or a proof that none does) ends the race. One order tends to win by far
  on a given problem, and a lane that is never restarted keeps what it
  learnt, so racing beats MiniMalloc's round robin of orders with doubling
  slices (figures: BENCHMARKS.md), which stays as the fallback when the
  orders must take turns (one worker, or deterministic mode). A turn ends
  after its slice in CPU seconds of its worker (`cpu_budget.CpuCap`;
  deterministic mode: CP-SAT's deterministic seconds), so that a busy
  machine hands the lane over at the same point of the search;
- to minimise, one run with every worker and the first order: CP-SAT's own
  portfolio finds plans and proves bounds, from the hint;
- run CP-SAT in helper threads, so that ``stop`` (a threading.Event) or
  Ctrl-C in the calling thread ends the search at once with the best plan.

Clocks: the wall clock only keeps the caller's limit (CP-SAT's own time
limit is the time left of it); slices and the caller's ``cpu`` budget count
CPU seconds per worker. Cost: what CP-SAT spends, bounded by the time limit;
O(u log u) to order u units; one watcher thread per run polling its CPU clock.
Deterministic mode uses one lane, interleaved threads and deterministic time,
so a search repeats itself.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable

import numpy as np
from ortools.sat.python import cp_model

from memplan.bounds import live_bytes
from memplan.budget import Stopwatch
from memplan.shares import DETERMINISTIC_SLICE, WATCH_SECONDS
from memplan.solver.cp_params import bound_of, cut_by_clock, exact_solver, proven_bound
from memplan.solver.cpu_budget import CpuCap
from memplan.solver.exact_options import ExactOptions
from memplan.solver.model import Model
from memplan.solver.outcome import Outcome


def unit_order(model: Model, order: str) -> list[int]:
    """Units in the order the lowest-offset strategy breaks ties (see module doc)."""
    problem, units = model.problem, model.geometry.units
    load = live_bytes(problem)
    keys = []
    for unit in units:
        members = list(unit.members)
        start, end = int(problem.starts[members].min()), int(problem.ends[members].max())
        lifetime = end - start
        area = int((problem.sizes[members] * (problem.ends[members] -
                                              problem.starts[members])).sum())
        total = int(load[start:end].max())
        keys.append({"total": (total, area, lifetime), "lifetime": (lifetime, area, total),
                     "area": (area, lifetime, total), "size": (unit.extent, lifetime, area)}[order])
    return sorted(range(len(units)), key=lambda u: tuple(-k for k in keys[u]))


class _Reporter(cp_model.CpSolverSolutionCallback):
    """Keeps the last solution and passes it on."""

    def __init__(self, model: Model, on_solution: Callable[[np.ndarray], None]):
        super().__init__()
        self.model = model
        self.on_solution = on_solution
        self.best: np.ndarray | None = None

    def on_solution_callback(self):
        self.best = self.model.offsets(self)
        self.on_solution(self.best)


class _Lane:
    """One CP-SAT run in a helper thread (so that the calling thread can take Ctrl-C),
    ended by ``cap`` once it has taken its CPU seconds (its ``spent``: the CPU it took)."""

    def __init__(self, model: Model, cp: cp_model.CpModel, solver: cp_model.CpSolver,
                 on_solution: Callable[[np.ndarray], None], task: tuple, cap: CpuCap):
        self.task = task  # (order, slice seconds)
        self.cp, self.solver, self.cap = cp, solver, cap
        self.reporter = _Reporter(model, on_solution)
        self.done = threading.Event()  # not Thread.join: an interrupted join is unreliable
        self.status: int | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._run, args=(cp,), name="memplan-cp-sat",
                         daemon=True).start()

    def _run(self, cp: cp_model.CpModel):
        try:
            with self.cap:  # counts this thread's CPU (or the process's, per worker)
                self.status = self.solver.solve(cp, self.reporter)
        except BaseException as error:  # noqa: BLE001  (re-raised in the calling thread)
            self.error = error
        finally:
            self.done.set()


def _wait(lanes: list[_Lane], stop: threading.Event | None) -> bool:
    """Wait until a lane ends; True when ``stop`` or Ctrl-C asked to end them all."""
    try:
        while not any(lane.done.is_set() for lane in lanes):
            lanes[0].done.wait(WATCH_SECONDS)
            if stop is not None and stop.is_set():
                return True
    except KeyboardInterrupt:
        return True
    return False


def search(model: Model, options: ExactOptions, *, seconds: float | None,
           on_solution: Callable[[np.ndarray], None],
           on_bound: Callable[[int], None], cpu: float | None = None) -> Outcome:
    """Search ``model`` for at most ``seconds`` (wall; deterministic mode: CP-SAT's
    deterministic seconds, the clock capping them) and ``cpu`` CPU seconds per worker
    (None: no CPU budget; turns share it, racing lanes share ``threads`` x ``cpu``, so
    that the race takes about ``cpu`` wall seconds on an idle machine); see the module doc."""
    watch = Stopwatch()
    minimize = model.peak is not None
    threads = options.threads or os.cpu_count() or 1
    orders = options.orders if options.strategy == "lowest_offset" else (None,)
    if minimize:  # one run, all the threads: CP-SAT's portfolio proves the bound
        orders = orders[:1]
    race = len(orders) > 1 and threads > 1 and not options.deterministic
    width = len(orders) if race else 1  # lanes, each with one worker when racing
    first = DETERMINISTIC_SLICE if options.deterministic else options.slice_seconds
    sliced = width < len(orders)  # orders take turns in a lane: round robin, slices doubling
    per_lane = min(1.0, threads / width) if race else 1.0  # of the cpu budget, more lanes
    tasks = ((order, first * 2 ** turn if sliced else None)
             for turn in itertools.count() for order in orders)
    state = _State(model, minimize, options.deterministic)
    running: list[_Lane] = []
    interrupted = False
    try:
        while state.outcome is None:
            while len(running) < width and not state.timed_out(watch, seconds) and \
                    (cpu is None or state.cpu < cpu):
                running.append(_start(model, state, options, next(tasks),
                                      1 if race else threads, state.left(watch, seconds),
                                      on_solution, on_bound,
                                      None if seconds is None else
                                      seconds - watch.elapsed(),
                                      None if cpu is None else
                                      per_lane * cpu - (state.cpu if sliced else 0.0)))
            if not running:
                break
            interrupted = _wait(running, options.stop)
            for lane in [lane for lane in running if lane.done.is_set()]:
                running.remove(lane)
                state.absorb(lane, final=not sliced)
            if interrupted:
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for lane in running:
            lane.solver.stop_search()
        for lane in running:
            while not lane.done.wait(WATCH_SECONDS):
                pass
            state.absorb(lane, final=False)
    outcome = state.outcome or Outcome("unknown" if state.best is None else "feasible",
                                       state.best, state.bound)
    outcome.interrupted = interrupted
    outcome.stats = state.stats
    return outcome


def _start(model: Model, state: _State, options: ExactOptions, task, threads: int,
           left: float | None, on_solution, on_bound, wall_left: float | None,
           cpu: float | None) -> _Lane:
    """A lane searching with ``task`` = (order or None, slice seconds or None) for at most
    ``cpu`` CPU seconds per worker: CP-SAT's time limit is the wall time ``left``, the
    slice a CPU cap; in deterministic mode ``left`` and the slice are deterministic time
    and ``wall_left`` caps the clock."""
    order, slice_seconds = task
    cp = model.cp.clone()
    if state.best is not None:
        model.hint(state.best, into=cp)
        if state.minimize:
            peak = cp.get_int_var_from_proto_index(model.peak.index)
            cp.add(peak <= _peak(model, state.best) - 1)
    if order is not None:
        cp.add_decision_strategy(
            [cp.get_int_var_from_proto_index(model.base[u].index)
             for u in unit_order(model, order)],
            cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    deterministic = [slice_seconds] if options.deterministic else []
    cpu_caps = [] if options.deterministic else [slice_seconds]
    limits = [t for t in (left, *deterministic) if t is not None]
    caps = [t for t in (cpu, *cpu_caps) if t is not None]
    solver = exact_solver(options, threads=max(threads, 1),
                          seconds=min(limits) if limits else None, wall_seconds=wall_left)
    if state.minimize:
        solver.best_bound_callback = lambda value: on_bound(bound_of(value))
    cap = CpuCap(solver, max(threads, 1), min(caps) if caps else None)
    return _Lane(model, cp, solver, on_solution, task, cap)


class _State:
    """What the runs of one search have found so far."""

    def __init__(self, model: Model, minimize: bool, deterministic: bool):
        self.model, self.minimize, self.deterministic = model, minimize, deterministic
        self.spent = 0.0  # deterministic seconds of the finished runs
        self.cpu = 0.0  # CPU seconds per worker of the finished runs
        self.best: np.ndarray | None = None
        self.bound = model.lower_bound
        self.outcome: Outcome | None = None
        self.stats = {"runs": 0, "branches": 0, "conflicts": 0, "clock_cuts": 0, "cpu": 0.0}

    def left(self, watch: Stopwatch, seconds: float | None) -> float | None:
        """Seconds left of ``seconds`` since ``watch`` began: wall seconds, or
        deterministic ones in deterministic mode."""
        if seconds is None:
            return None
        return seconds - self.spent if self.deterministic else seconds - watch.elapsed()

    def timed_out(self, watch: Stopwatch, seconds: float | None) -> bool:
        """No time left: deterministic or wall seconds (the clock caps deterministic mode)."""
        left = self.left(watch, seconds)
        return left is not None and (left <= 0 or seconds - watch.elapsed() <= 0)

    def absorb(self, lane: _Lane, *, final: bool):
        """Take a finished run's plan, bound and verdict."""
        if lane.error is not None:
            raise lane.error
        solver, status = lane.solver, lane.status
        self.stats["runs"] += 1
        self.spent += solver.deterministic_time
        self.cpu += lane.cap.spent
        self.stats["cpu"] = self.cpu
        self.stats["branches"] += solver.num_branches
        self.stats["conflicts"] += solver.num_conflicts
        self.stats["clock_cuts"] += cut_by_clock(solver)  # deterministic runs the clock ended
        found = None
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            found = self.model.offsets(solver)
        elif lane.reporter.best is not None:
            found = lane.reporter.best
        if found is not None and (self.best is None or _peak(self.model, found)
                                  < _peak(self.model, self.best)):
            self.best = found
        if self.minimize and status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
            self.bound = max(self.bound, proven_bound(solver, lane.cp))
        if self.outcome is None:
            self.outcome = _ended(self.model, status, self.best, self.bound, self.stats,
                                  final=final)
            if self.outcome is not None:
                self.stats["settled_by"] = lane.task


def _ended(model: Model, status: int, best, bound: int, stats: dict, *,
           final: bool) -> Outcome | None:
    """The outcome if this run settles the part (or is the last); None to go on."""
    minimize = model.peak is not None
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {model.cp.validate()}")
    if status == cp_model.INFEASIBLE:
        if minimize and best is not None:  # the tightened bound was infeasible: best is optimal
            return Outcome("optimal", best, _peak(model, best), stats=stats)
        return Outcome("infeasible", None, bound, stats=stats)
    if status == cp_model.OPTIMAL and minimize:  # within a gap limit, or proven
        peak = _peak(model, best)
        return Outcome("optimal" if peak <= bound else "feasible", best, min(bound, peak),
                       stats=stats)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and not minimize:
        return Outcome("feasible", best, bound, stats=stats)
    if final:
        return Outcome("unknown" if best is None else "feasible", best, bound, stats=stats)
    return None


def _peak(model: Model, offsets: np.ndarray) -> int:
    return int((offsets + model.problem.sizes).max())
