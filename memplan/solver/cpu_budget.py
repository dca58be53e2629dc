"""Budgets counted in CPU time, so that a planner decides the same on a busy machine.

A stage of a planner (a lane's turn, a warm start, a window, stage 1 of two)
that is given "a share of the time limit" on the wall clock gets less work
done when other processes share the cores, and the next stage starts from a
different state: the plan depends on the machine's load. Budgets here are
counted in CPU seconds of the threads doing the work; the wall clock only
enforces the user's limit (the caller passes CP-SAT that as its own limit).

- `CpuClock`: the CPU seconds one thread (or, with several CP-SAT workers,
  or work in helper threads, the process per worker) has taken since a
  start, readable from any thread.
- `CpuCap`: ends one CP-SAT run (`CpSolver.stop_search`), or a planner that
  watches a stop event (by setting it), once it has taken its CPU budget, or
  when a stop event is set. Cost: one thread polling every `POLL_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from memplan.solver.canonical import ThreadClock

if TYPE_CHECKING:  # CP-SAT is imported only when a search needs it (`memplan.solver.cp_import`)
    from ortools.sat.python import cp_model

POLL_SECONDS = 0.02  # how often a run's CPU clock and the stop event are read


class CpuClock:
    """CPU seconds since `start` of the calling thread (``workers`` = 1) or of the process
    per worker (CP-SAT with more workers searches in threads of its own; ``process``: also
    with one worker, whose work runs in helper threads). With one worker in the calling
    thread the clock is the thread's POSIX CPU clock, so another thread can read it."""

    def __init__(self, workers: int = 1, *, process: bool = False):
        self.workers = max(1, workers)
        self.thread = ThreadClock() if self.workers == 1 and not process else None
        self.began = 0.0

    def _now(self) -> float:
        return self.thread.seconds() if self.thread is not None else \
            time.process_time() / self.workers

    def start(self) -> CpuClock:
        """Called in the thread whose CPU is counted."""
        if self.thread is not None:
            self.thread.begin()
        self.began = self._now()
        return self

    def spent(self) -> float:
        return self._now() - self.began


class CpuCap:
    """Stops one CP-SAT run once it has taken ``seconds`` CPU seconds per worker (None: no
    cap), or when ``stop`` is set (the run then ends within `POLL_SECONDS`). Used as a
    context manager around ``solver.solve``, in the solving thread; ``spent`` is the CPU
    it took, per worker. ``solver`` may be a stop event instead, which the cap sets: a
    planner that watches one (the exact planner's ``stop``) ends as at Ctrl-C; its CPU is
    then the process's, per worker (its searches run in threads of their own)."""

    def __init__(self, solver: cp_model.CpSolver | threading.Event, workers: int,
                 seconds: float | None, stop: threading.Event | None = None):
        self.solver, self.seconds, self.stop = solver, seconds, stop
        self.clock = CpuClock(workers, process=isinstance(solver, threading.Event))
        self.done = threading.Event()
        self.spent = 0.0

    def _watch(self):
        while not self.done.wait(POLL_SECONDS):
            if (self.seconds is not None and self.clock.spent() >= self.seconds) or \
                    (self.stop is not None and self.stop.is_set()):
                if isinstance(self.solver, threading.Event):
                    self.solver.set()
                else:
                    self.solver.stop_search()
                return

    def __enter__(self) -> CpuCap:
        self.clock.start()
        self.watcher = threading.Thread(target=self._watch, name="memplan-cpu-cap",
                                        daemon=True)
        self.watcher.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.watcher.join()
        self.spent = self.clock.spent()
