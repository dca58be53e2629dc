"""Time: the one value that knows what is left of a caller's limit.

A limit given at an edge of the package (``--time-limit``, ``memplan.solve``,
``plan_with``, the compiler passes) becomes a `Budget` there: a wall deadline
(a `time.perf_counter` value) that enforces the caller's limit, and a CPU
allowance (CPU seconds of the threads doing the work) that a planner's
stages share, so that a stage slowed by load neither uses up the budget of
the next ones nor is cut before it has taken its CPU seconds: the same
problem gets the same decisions on a busy machine, later. The shares and
margins planners cut a budget by are in one table, `memplan.shares`.

- `Stopwatch`: wall and CPU seconds since it was made; how the rest of the
  package times a piece of work (a report's seconds, a validation whose length
  sets a reserve, the seconds a stage has used of its limit).
- `Budget` (a stopwatch too): the deadline, the allowance, the call's pace (wall
  seconds per CPU second so far: about 1 on an idle machine, 2-4 beside busy
  processes) and the deterministic flag; `left`, `expired`, `end` (the deadline of a
  stage starting now), `split`, `share` and `stage` (a child budget for one planner or
  stage), and what CP-SAT needs (`cp_limits`).
- `ThreadClock`, `CpuClock`: CPU seconds of one thread, or of the process per
  CP-SAT thread, readable from another thread.
- `wall_left`, `to_deadline`, `past`, `ends_after`: the questions a stage holding a
  deadline (a `time.perf_counter` value, as the compiled passes take) asks;
  `command_began`, `command_pace`, `command_left`: a command's limit counted from when
  memplan began to load (`memplan.startup`).

Every clock read that decides lives here: elsewhere, the package reads time only
through these (`tests/test_architecture.py` holds it). Every registered planner takes
``budget=`` (the registry's door makes it from ``time_limit=`` and ``cpu=`` as the
planner starts; `compare` gives each a child, `split`). Cost: two clock reads per
question."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from memplan import startup
from memplan.shares import COMMAND_LEAST_SHARE, MIN_STAGE_SECONDS, PACE_CPU


class Stopwatch:
    """Wall and CPU seconds (of the thread that made it) since it was made: how a module
    outside this one times a piece of work, for a report or to keep a reserve as long
    as the work was, without reading a clock itself. ``ago``: wall seconds it counts as
    already gone (a run timed elsewhere)."""

    def __init__(self, ago: float = 0.0):
        self.began, self.cpu_began = time.perf_counter() - ago, time.thread_time()

    def elapsed(self) -> float:
        """Wall seconds since it was made."""
        return time.perf_counter() - self.began

    def cpu_elapsed(self) -> float:
        """CPU seconds of the thread that made it since then (read in that thread)."""
        return time.thread_time() - self.cpu_began


@dataclass
class Budget(Stopwatch):
    """``cpu``: CPU seconds the call may take (None: no allowance, the wall deadline alone);
    ``deadline``: a `time.perf_counter` value (None: none); ``deterministic``: the caller
    asked for runs that repeat themselves (work counts and CP-SAT's deterministic time
    decide); ``limit``: the wall seconds it was given (None: from ``deadline``, counted
    from now; a planner's work counts are of it). ``cpu`` and ``deadline`` may be lowered
    later (a reserve for a validation)."""

    cpu: float | None
    deadline: float | None
    deterministic: bool = False
    limit: float | None = None

    @classmethod
    def of_limit(cls, time_limit: float | None, *, cpu: float | None = None,
                 began: float | None = None, deterministic: bool = False) -> Budget:
        """The budget of a ``time_limit`` in wall seconds (None: none) counted from ``began``
        (a `time.perf_counter` value; default now), with an allowance of ``cpu`` seconds."""
        start = time.perf_counter() if began is None else began
        return cls(cpu, None if time_limit is None else start + time_limit, deterministic,
                   time_limit)

    def __post_init__(self):
        Stopwatch.__init__(self)
        self.elsewhere = 0.0  # CPU seconds taken in other threads, added by the caller
        if self.limit is None and self.deadline is not None:
            self.limit = self.deadline - self.began
        # ``seconds``: what a planner that spends no CPU allowance runs for, from ``began``
        self.seconds = self.limit if self.cpu is None else self.cpu

    def allowance(self) -> float | None:
        """CPU seconds (per thread) a planner's stages share: ``cpu``, else the wall
        ``limit`` (None: neither)."""
        return self.limit if self.cpu is None else self.cpu

    def wall_end(self) -> float | None:
        """The `time.perf_counter` value a planner that spends no CPU allowance stops by:
        ``seconds`` after ``began`` (None: no limit)."""
        return None if self.seconds is None else self.began + self.seconds

    def split(self, cpu: float | None, deadline: float | None = None) -> Budget:
        """A child budget for one step starting now: ``cpu`` CPU seconds of this one's
        (None: no allowance) by ``deadline`` (a `time.perf_counter` value; default this
        one's). A step that spends no CPU allowance runs for its ``seconds``: the allowance
        as wall seconds at this budget's pace so far, by the deadline."""
        wall = self.deadline if deadline is None else deadline
        now = time.perf_counter()
        child = Budget.of_limit(None if wall is None else max(0.0, wall - now), cpu=cpu,
                                began=now)
        child.deadline = None if wall is None else max(wall, now)  # not rounded off
        if cpu is not None:
            end = self.until(wall, self.spent() + cpu)
            child.seconds = max(0.0, end - now)
        return child

    def share(self, fraction: float = 1.0, *, by: float = 1.0, keep: float = 0.0,
              cpu: float | None = None) -> Budget:
        """A child budget for one stage starting now: ``fraction`` of the wall seconds left
        until ``by`` of the limit has passed (`HEURISTIC_MOST`: the heuristics' part; 1: to
        the deadline), less ``keep`` seconds for what follows, never below 0 (no limit
        without a deadline), and an allowance of ``cpu`` CPU seconds."""
        if self.deadline is None:
            return Budget.of_limit(None, cpu=cpu)
        point = self.deadline - (1.0 - by) * self.limit  # ``by`` of the limit passed
        return Budget.of_limit(max(0.0, point - time.perf_counter() - keep) * fraction,
                               cpu=cpu)

    def stage(self, cpu: float | None = None) -> Budget:
        """A child budget for one stage's planner starting now: the wall time left to the
        deadline, at least `MIN_STAGE_SECONDS` (`wall_left`; None: no limit), and an
        allowance of ``cpu`` seconds."""
        return Budget.of_limit(wall_left(self.deadline), cpu=cpu)

    def spent(self) -> float:
        """CPU seconds of the call so far: its thread's and those added (``elsewhere``)."""
        return self.cpu_elapsed() + self.elsewhere

    def left(self) -> float | None:
        """CPU seconds left of the allowance; without one, wall seconds to the deadline
        (None: neither)."""
        if self.cpu is not None:
            return self.cpu - self.spent()
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def pace(self) -> float:
        """Wall seconds per CPU second of the call so far, at least 1."""
        cpu = self.spent()
        return 1.0 if cpu < PACE_CPU else max(1.0, self.elapsed() / cpu)

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

    def end_in(self) -> float | None:
        """Wall seconds from now to `end` (None: no end; negative once past it)."""
        end = self.end()
        return None if end is None else end - time.perf_counter()

    def fits(self, cpu_seconds: float) -> bool:
        """Whether a step of ``cpu_seconds`` (at the pace so far) ends by `end`."""
        end = self.end()
        return end is None or time.perf_counter() + cpu_seconds * self.pace() <= end

    def expired(self) -> bool:
        """Past the deadline, or the CPU allowance spent."""
        return (self.cpu is not None and self.spent() >= self.cpu) or \
            (self.deadline is not None and time.perf_counter() >= self.deadline)

    def cp_limits(self) -> tuple[float | None, float | None]:
        """What one CP-SAT run gets: ``max_time_in_seconds`` (the wall left, `wall_left`) and
        its CPU cap (the allowance left; `memplan.solver.cpu_budget.CpuCap`)."""
        return wall_left(self.deadline), \
            None if self.cpu is None else max(0.0, self.cpu - self.spent())


def wall_left(deadline: float | None) -> float | None:
    """Wall seconds to ``deadline`` (a `time.perf_counter` value; None: no limit), at least
    `MIN_STAGE_SECONDS`: the limit a stage's CP-SAT run gets."""
    return None if deadline is None else max(MIN_STAGE_SECONDS, deadline - time.perf_counter())


def deadline_in(seconds: float | None) -> float | None:
    """The `time.perf_counter` deadline ``seconds`` from now (None: none)."""
    return None if seconds is None else time.perf_counter() + seconds


def to_deadline(deadline: float) -> float:
    """Wall seconds from now to ``deadline`` (negative once past it)."""
    return deadline - time.perf_counter()


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (None: none) has passed: how a pass checks its deadline."""
    return deadline is not None and time.perf_counter() > deadline


def ends_after(seconds: float, deadline: float | None, cpu_deadline: float | None = None
               ) -> bool:
    """Whether a step of ``seconds`` starting now would end past ``deadline`` (wall) or past
    ``cpu_deadline`` (a `time.thread_time` value of this thread)."""
    return (deadline is not None and time.perf_counter() + seconds > deadline) or \
        (cpu_deadline is not None and time.thread_time() + seconds > cpu_deadline)


def thread_cpu() -> float:
    """This thread's CPU seconds (`time.thread_time`): where a CPU deadline counts from."""
    return time.thread_time()


def command_began() -> float:
    """Note and return when the command began: when memplan began to load for the
    ``memplan`` command, when ``memplan.cli.main`` is called from Python otherwise (a
    test, an embedding program: the import was long before)."""
    startup.COMMAND_STARTED, startup.COMMAND_CPU = \
        (startup.STARTED, startup.STARTED_CPU) if startup.launched_as_command() else \
        (time.perf_counter(), time.process_time())
    return startup.COMMAND_STARTED


def command_pace() -> float:
    """Wall seconds per CPU second of this process since the command began, at least 1:
    about 1 on a quiet machine, 3-4 beside busy processes. Measured before the planners
    run (imports and reading take one thread), it tells what the command's last steps
    (writing the outputs) will take on the clock."""
    cpu = time.process_time() - startup.COMMAND_CPU
    return 1.0 if cpu <= 0.01 else max(1.0, (time.perf_counter() - startup.COMMAND_STARTED) / cpu)


def command_spent() -> float:
    """Wall seconds since the command began (`memplan.startup.command_began`)."""
    return time.perf_counter() - startup.COMMAND_STARTED


def command_left(limit: float, after: float = 0.0) -> float:
    """What a command's ``limit`` (wall seconds from when memplan began to load) leaves for
    its work from now, ``after`` seconds kept for its last steps: at least
    `COMMAND_LEAST_SHARE` of it, however long loading took."""
    return max(limit - command_spent() - after, COMMAND_LEAST_SHARE * limit)


def command_start(limit: float) -> float:
    """The `time.perf_counter` value a command's ``limit`` counts from: when memplan began
    to load, or later, so that `command_left` of it is left."""
    return time.perf_counter() + command_left(limit) - limit


class ThreadClock:
    """The CPU time of one search thread, readable from another thread while it runs
    (its POSIX thread CPU clock; where there is none, the wall time since it began)."""

    def __init__(self):
        self._clock: int | None = None
        self._began: float | None = None  # wall, for the fallback
        self._final: float | None = None  # CPU seconds, once the thread is done

    def begin(self):
        """Called by the thread itself as it starts."""
        self._began = time.perf_counter()
        try:
            self._clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # no per-thread CPU clock here
            self._clock = None

    def end(self):
        """Called by the thread itself as it ends: its CPU time is final."""
        self._final = time.thread_time() if self._clock is not None else \
            time.perf_counter() - self._began

    def seconds(self) -> float:
        if self._final is not None:
            return self._final
        if self._began is None:
            return 0.0
        if self._clock is not None:
            try:
                return time.clock_gettime(self._clock)
            except OSError:  # the thread ended between the two reads
                return self._final if self._final is not None else 0.0
        return time.perf_counter() - self._began


class CpuClock:
    """CPU seconds since `start` of the calling thread (``threads`` = 1) or of the process
    per CP-SAT thread (CP-SAT with more threads searches in threads of its own;
    ``process``: also with one, whose work runs in other threads). With one thread, the
    calling one, the clock is the thread's POSIX CPU clock, so another thread can read it."""

    def __init__(self, threads: int = 1, *, process: bool = False):
        self.threads = max(1, threads)
        self.thread = ThreadClock() if self.threads == 1 and not process else None
        self.began = 0.0

    def _now(self) -> float:
        return self.thread.seconds() if self.thread is not None else \
            time.process_time() / self.threads

    def start(self) -> CpuClock:
        """Called in the thread whose CPU is counted."""
        if self.thread is not None:
            self.thread.begin()
        self.began = self._now()
        return self

    def spent(self) -> float:
        return self._now() - self.began
