"""How one part's CP-SAT model is searched: parameters, strategy, restarts, stopping.

Steps of `search`:

- set CP-SAT's parameters from the options (workers, seed, time limit or
  deterministic time, NoOverlap2D reasoning, chosen subsolvers);
- with the ``lowest_offset`` strategy, add a decision strategy that takes the
  unit with the lowest possible offset (ties: the order's first) and puts it
  there: the canonical search MiniMalloc is built on. Orders follow MiniMalloc's
  preorderings (``total``: the heaviest section a unit crosses, then area,
  then lifetime; ``lifetime``; ``area``; ``size``);
- with several orders, round robin: each order gets a slice of deterministic
  time, the slices double every round (restarts), and every run starts from
  the best plan found so far (hint; in minimise mode also a tighter bound);
- run CP-SAT in a helper thread, so that ``stop`` (a threading.Event) or
  Ctrl-C in the main thread ends the search at once with the best plan so far.

Cost: what CP-SAT spends, bounded by the time limit; O(u log u) to order u units.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from memplan.bounds import live_bytes
from memplan.solver.model import Model
from memplan.solver.options import ExactOptions


@dataclass
class Outcome:
    """What the search of one part ended with (sizes in the part's scaled units)."""

    status: str  # optimal, feasible, infeasible (proven) or unknown
    offsets: np.ndarray | None  # the best plan found, or None
    bound: int  # proven lower bound on the part's peak
    interrupted: bool = False  # stopped by ``stop`` or Ctrl-C
    stats: dict = field(default_factory=dict)


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


def _parameters(solver: cp_model.CpSolver, options: ExactOptions, seconds: float | None,
                slice_seconds: float | None):
    params = solver.parameters
    params.num_workers = options.workers or os.cpu_count() or 1
    params.random_seed = options.seed
    params.catch_sigint_signal = False  # Ctrl-C is ours: see `_solve`
    params.log_search_progress = options.log
    params.use_timetabling_in_no_overlap_2d = options.timetabling
    params.use_energetic_reasoning_in_no_overlap_2d = options.energetic
    params.use_area_energetic_reasoning_in_no_overlap_2d = options.energetic
    params.use_try_edge_reasoning_in_no_overlap_2d = options.try_edge
    params.max_pairs_pairwise_reasoning_in_no_overlap_2d = options.pairwise_pairs
    for name in options.subsolvers:
        params.subsolvers.append(name)
    if options.deterministic:
        params.interleave_search = True
    deterministic = [t for t in (slice_seconds, seconds if options.deterministic else None)
                     if t is not None]
    if deterministic:
        params.max_deterministic_time = min(deterministic)
    if seconds is not None and not options.deterministic:
        params.max_time_in_seconds = max(seconds, 0.0)


def _solve(cp: cp_model.CpModel, solver: cp_model.CpSolver, reporter: _Reporter,
           stop: threading.Event | None) -> tuple[int, bool]:
    """``solver.solve`` in a helper thread; returns (status, interrupted)."""
    result = {}
    done = threading.Event()  # not Thread.join: an interrupted join can leave it unusable

    def run():
        try:
            result["status"] = solver.solve(cp, reporter)
        except BaseException as error:  # noqa: BLE001  (re-raised in the calling thread)
            result["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="memplan-cp-sat", daemon=True).start()
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.05)
            if stop is not None and stop.is_set() and not interrupted:
                solver.stop_search()
                interrupted = True
        except KeyboardInterrupt:
            solver.stop_search()
            interrupted = True
    if "error" in result:
        raise result["error"]
    return result["status"], interrupted


def search(model: Model, options: ExactOptions, *, seconds: float | None,
           on_solution: Callable[[np.ndarray], None],
           on_bound: Callable[[int], None]) -> Outcome:
    """Search ``model`` for at most ``seconds``; see the module docstring."""
    began = time.perf_counter()
    orders = options.orders if options.strategy == "lowest_offset" else (None,)
    round_robin = len(orders) > 1
    minimize = model.peak is not None
    bound = model.lower_bound
    best: np.ndarray | None = None
    stats = {"runs": 0, "branches": 0, "conflicts": 0}
    slice_seconds = options.slice_seconds
    while True:
        for order in orders:
            left = None if seconds is None else seconds - (time.perf_counter() - began)
            if left is not None and left <= 0:
                return Outcome("unknown" if best is None else "feasible", best, bound,
                               stats=stats)
            cp = model.cp.clone()
            if best is not None:
                model.hint(best, into=cp)
                if minimize:
                    peak = cp.get_int_var_from_proto_index(model.peak.index)
                    cp.add(peak <= _peak(model, best) - 1)
            if order is not None:
                cp.add_decision_strategy(
                    [cp.get_int_var_from_proto_index(model.base[u].index)
                     for u in unit_order(model, order)],
                    cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
            solver = cp_model.CpSolver()
            _parameters(solver, options, left, slice_seconds if round_robin else None)
            if minimize:
                solver.best_bound_callback = lambda value: on_bound(math.ceil(value - 1e-6))
            reporter = _Reporter(model, on_solution)
            status, interrupted = _solve(cp, solver, reporter, options.stop)
            stats["runs"] += 1
            stats["branches"] += solver.num_branches
            stats["conflicts"] += solver.num_conflicts
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                best = model.offsets(solver)
            elif reporter.best is not None:
                best = reporter.best
            if minimize and status in (cp_model.FEASIBLE, cp_model.UNKNOWN):
                bound = max(bound, math.ceil(solver.best_objective_bound - 1e-6))
            outcome = _ended(model, status, best, bound, stats,
                             final=interrupted or not round_robin)
            if outcome is not None:
                outcome.interrupted = interrupted
                return outcome
        slice_seconds *= 2


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
    if status == cp_model.OPTIMAL and minimize:
        return Outcome("optimal", best, _peak(model, best), stats=stats)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and not minimize:
        return Outcome("feasible", best, bound, stats=stats)
    if final:
        return Outcome("unknown" if best is None else "feasible", best, bound, stats=stats)
    return None


def _peak(model: Model, offsets: np.ndarray) -> int:
    return int((offsets + model.problem.sizes).max())
