"""CP-SAT's minimisation as a lane beside the canonical descent, in its own thread.

The canonical descent (`memplan.solver.canonical.descend`) finds low peaks
fast, but when every target between its floor and its best peak is given up
it has *stalled*: only longer probes, or a proof of a higher floor, can move
it. CP-SAT's minimisation from the descent's best plan then joins it on one
core (the descent keeps the others) and both run until the descent ends:

- the descent asks `CpLane.news` between its probes: a plan below its best
  becomes its best (its next targets are lower), a proven bound above its
  floor becomes its floor;
- when the descent ends (its best meets its floor, its time is up, or it is
  stopped), `CpLane.close` stops CP-SAT and waits for it; its last plan and
  bound count too.

Deterministic mode has no such lane: the race would depend on the clock.
Cost: one CP-SAT worker beside the descent, from its stall to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from memplan.solver.outcome import Outcome

# search(best offsets, floor, stop event, on_plan) -> the CP-SAT run's Outcome
Search = Callable[[np.ndarray, int, threading.Event, Callable[[np.ndarray], None]], Outcome]


class CpLane:
    """One CP-SAT minimisation run beside the descent (see the module doc)."""

    def __init__(self, search: Search, bound: Callable[[], int]):
        self._search, self._bound = search, bound  # bound(): the bound CP-SAT proved so far
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._plan: np.ndarray | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.outcome: Outcome | None = None

    def join(self, best: np.ndarray, floor: int):
        """Start CP-SAT's minimisation from ``best`` (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(best, floor),
                                            name="memplan-cp-lane", daemon=True)
            self._thread.start()

    def _run(self, best: np.ndarray, floor: int):
        try:
            self.outcome = self._search(best, floor, self._stop, self._on_plan)
            if self.outcome.offsets is not None:
                self._on_plan(self.outcome.offsets)
        except BaseException as error:  # noqa: BLE001  (re-raised by close)
            self._error = error

    def _on_plan(self, offsets: np.ndarray):
        with self._lock:
            self._plan = offsets

    def news(self) -> tuple[np.ndarray | None, int]:
        """CP-SAT's last plan (or None) and the bound it proved (0 before it ran)."""
        with self._lock:
            plan, self._plan = self._plan, None
        bound = self._bound()
        if self.outcome is not None:
            bound = max(bound, self.outcome.bound)
        return plan, bound

    def close(self):
        """Stop CP-SAT and wait for it; raises its thread's error."""
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(0.05)
        if self._error is not None:
            raise self._error
