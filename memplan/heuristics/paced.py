"""A CPU budget within a wall deadline, converted at the call's pace.

A planner given its share of a caller's limit as CPU seconds (the option
``cpu`` of ``best``, ``anneal``, ``genetic`` and ``hill_climb``;
`memplan.api.compare` for each planner) still runs kernels that keep wall
deadlines (`time.perf_counter` values), and the caller's limit stays a wall
deadline. `PacedBudget` turns the CPU seconds left into the deadline of a stage
starting now: now + CPU seconds left x pace, the pace being the call's wall
seconds per CPU second so far (at least 1; 1 until `PACE_CPU` seconds tell):
about 1 on an idle machine, 2-4 beside busy processes. Read as each stage
starts, so that a stage slowed by load neither uses up the budget of the next
ones nor is cut before it has taken its CPU seconds; only the wall deadline is
lost to the load. The CPU counted is the calling thread's (`time.thread_time`),
plus what the caller adds from threads of its own (``elsewhere``). Cost: two
clock reads per question.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from memplan.options import option

PACE_CPU = 0.005  # CPU seconds of a call before its pace is measured


def cpu_option(what: str = "the search") -> float | None:
    """The ``cpu`` field of a planner's options (one help text for every planner)."""
    return option(None, f"CPU seconds of its thread {what} may take (a caller's share of "
                        f"its own limit), within the time limit; None: the time limit "
                        f"decides alone")


@dataclass
class PacedBudget:
    """``cpu``: CPU seconds the call may take (None: no budget, the wall deadline alone);
    ``deadline``: a `time.perf_counter` value (None: none). Both may be lowered later (a
    reserve for the validation, `memplan.heuristics.best`)."""

    cpu: float | None
    deadline: float | None

    @classmethod
    def of_planner(cls, cpu: float | None, time_limit: float | None,
                   began: float) -> PacedBudget:
        """A planner's budget: its option ``cpu``, and its ``time_limit`` counted from
        ``began`` (a `time.perf_counter` value: when the planner was called)."""
        return cls(cpu, None if time_limit is None else began + time_limit)

    def __post_init__(self):
        self.began, self.cpu_began = time.perf_counter(), time.thread_time()
        self.elsewhere = 0.0  # CPU seconds taken in other threads, added by the caller

    def spent(self) -> float:
        """CPU seconds of the call so far: its thread's and those added (``elsewhere``)."""
        return time.thread_time() - self.cpu_began + self.elsewhere

    def left(self) -> float | None:
        """CPU seconds left of the budget (None without one)."""
        return None if self.cpu is None else self.cpu - self.spent()

    def pace(self) -> float:
        """Wall seconds per CPU second of the call so far, at least 1."""
        cpu = self.spent()
        return 1.0 if cpu < PACE_CPU else max(1.0, (time.perf_counter() - self.began) / cpu)

    def until(self, wall: float | None, cpu: float | None) -> float | None:
        """The `time.perf_counter` deadline of a stage starting now that must end by ``wall``
        and, with ``cpu`` (a value of `spent`), once the call has taken that many CPU
        seconds, as wall seconds at the pace so far."""
        if cpu is None:
            return wall
        ahead = time.perf_counter() + max(0.0, cpu - self.spent()) * self.pace()
        return ahead if wall is None else min(wall, ahead)

    def end(self) -> float | None:
        """`until` the budget's own ``deadline`` and ``cpu``."""
        return self.until(self.deadline, self.cpu)

    def fits(self, cpu_seconds: float) -> bool:
        """Whether a step of ``cpu_seconds`` (at the pace so far) ends by `end`."""
        end = self.end()
        return end is None or time.perf_counter() + cpu_seconds * self.pace() <= end

    def over(self) -> bool:
        """Past the deadline, or the CPU budget spent."""
        return (self.cpu is not None and self.spent() >= self.cpu) or \
            (self.deadline is not None and time.perf_counter() >= self.deadline)
