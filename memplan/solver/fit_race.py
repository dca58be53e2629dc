"""The fit race's pieces: the canonical search's head start, CP-SAT's options, one stop.

`memplan.solver.exact` races the canonical search (`memplan.solver.canonical`)
and CP-SAT to fit a capacity (docs/explanation/exact-lanes.md):

- `head_start_seconds`: the CPU seconds (of each of its threads, `canonical.Race.cpu`)
  the canonical search has alone (a share of the time limit, within
  `HEAD_START_SECONDS`; `canonical.run_head_start` ends it sooner on a settled
  question, many nodes, or slow ones): CPU time, so that a busy machine does
  not stop a search that an idle one lets settle;
- `racing`: CP-SAT's options for the race (its own portfolio, beside the
  canonical search's thread or on every core);
- `Joint`: one stop event for CP-SAT, set by the caller's ``stop`` or by the
  canonical verdict.

Cost: one watcher thread polling every 20 ms while CP-SAT runs.
"""

from __future__ import annotations

import dataclasses
import threading

from memplan.shares import HEAD_START_SECONDS, POLL_SECONDS
from memplan.solver import canonical
from memplan.solver.exact_options import ExactOptions


class Joint:
    """One stop event for CP-SAT: set by the caller's ``stop`` or by the canonical verdict."""

    def __init__(self, race: canonical.Race, stop):
        self.event = threading.Event()
        self._closed = threading.Event()
        self._race, self._stop = race, stop
        threading.Thread(target=self._watch, name="memplan-joint", daemon=True).start()

    def _watch(self):
        while not self._closed.wait(POLL_SECONDS):
            if (self._race.settled.is_set() and self._race.verdict is not None) or \
                    (self._stop is not None and self._stop.is_set()):
                self.event.set()
                return

    def close(self):
        self._closed.set()


def head_start_seconds(seconds: float | None, share: float) -> float:
    """CPU seconds the canonical search may have alone: ``share`` of the race's ``seconds``
    (its CPU budget, or the time limit), within `HEAD_START_SECONDS`
    (`memplan.solver.canonical.run_head_start` may end it sooner; the wall clock ends it at
    the limit)."""
    least, most = HEAD_START_SECONDS
    if seconds is None:
        return most
    return min(max(seconds * share, least), most, seconds)


def racing(options: ExactOptions, threads: int, stop: threading.Event,
            alone: bool) -> ExactOptions:
    """CP-SAT's options beside the canonical search's one thread (of ``threads``).

    Its own portfolio (the canonical search is the lowest-offset one), on
    the other cores (measured on tilings: two threads beside a canonical
    thread lose a third against one), stopped by ``stop``. ``alone``: the
    canonical search stopped (its nodes were slow: packings the sweeps miss,
    which it does not settle), so the portfolio takes every core. Deterministic
    mode: the options as given (CP-SAT runs after the canonical search).
    """
    if options.deterministic:
        return dataclasses.replace(options, stop=stop)
    return dataclasses.replace(options, stop=stop, strategy="none",
                               threads=threads if alone else max(threads - 1, 1))
