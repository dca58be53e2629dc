"""The CPU cap of one CP-SAT run, so that a planner decides the same on a busy machine.

A stage of a planner (a lane's turn, a window, stage 1 of two) is given CPU
seconds of the threads doing the work (`memplan.budget`); the wall clock
only enforces the user's limit (CP-SAT gets that as its own limit).
`CpuCap` ends one CP-SAT run (`CpSolver.stop_search`), or a planner that
watches a stop event (by setting it), once it has taken its CPU seconds
(`memplan.budget.CpuClock`), or when a stop event is set. Cost: one thread
polling every `POLL_SECONDS`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from memplan.budget import CpuClock
from memplan.shares import POLL_SECONDS

if TYPE_CHECKING:  # CP-SAT is imported only when a search needs it (`memplan.solver.cp_import`)
    from ortools.sat.python import cp_model



class CpuCap:
    """Stops one CP-SAT run once it has taken ``seconds`` CPU seconds per worker (None: no
    cap), or when ``stop`` is set (the run then ends within `POLL_SECONDS`). Used as a
    context manager around ``solver.solve``, in the solving thread; ``spent`` is the CPU
    it took, per worker. ``solver`` may be a stop event instead, which the cap sets: a
    planner that watches one (the exact planner's ``stop``) ends as at Ctrl-C; its CPU is
    then the process's, per worker (its searches run in threads of their own)."""

    def __init__(self, solver: cp_model.CpSolver | threading.Event, threads: int,
                 seconds: float | None, stop: threading.Event | None = None):
        self.solver, self.seconds, self.stop = solver, seconds, stop
        self.clock = CpuClock(threads, process=isinstance(solver, threading.Event))
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
