"""``canonical``: MiniMalloc's canonical search as a planner, without CP-SAT.

The exact planner proves; this planner only searches, the way omnimalloc's
SuperMalloc does with its branch and bound: the canonical descent
(`memplan.solver.canonical.descend`: probes of the compiled canonical
search at falling peaks, from the floor up by bisection) from a start plan,
until the time limit. On MiniMalloc's challenging problems it reaches the
live-load bound on nine of the eleven within two seconds, where a search
over placement orders stays 5-20 % above it; ``best`` runs it for a share of
its search time.

Steps:
- problems the canonical search does not take (aliases, pinned offsets,
  explicit conflicts, over `canonical.MAX_BUFFERS` buffers, no compiled
  kernel) or over ``max_pairs`` overlapping pairs (`MAX_PAIRS` by default;
  each probe lists them, about 30 bytes and 70 ns a pair: a 15k-buffer
  training trace's 20 M took 1.5 s and 0.5 GB a probe, and such probes
  rarely settle; `memplan.heuristics.long_first` gives its small problems,
  4000 units with few steps each, up to two million): the ``hint`` as it
  is, or ``best``'s plan without a hint;
- the start: the ``hint``, else ``best``'s passes (no search) within
  `CANONICAL_START_SHARE` of the limit in CPU seconds (the canonical search's own
  first dive is a poor start on large problems: 96 times the bound on a
  network of 10k buffers, 2 times on a training step);
- the descent until the limit, or until its probes have taken ``cpu``
  seconds of CPU (a caller's share of its own limit: ``best`` gives one) or
  the limit less the CPU seconds the start took, the status ``optimal``
  when the peak meets the live-load bound, the only floor it proves here;
  Ctrl-C ends it with the best layout found.

Clocks: the limit is kept on the wall clock; the start's and the descent's
shares of it are counted in CPU seconds (``best``'s ``cpu`` budget, within
the wall time left; the probes', `canonical.Race.cpu`), so that a busy
machine does not change the start or shorten the descent's budget.

Cost: each probe is exponential in the worst case and capped by the time
limit (deterministic mode: by `canonical.NODES_PER_SECOND` nodes a second
of the limit, one thread).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memplan.bounds import lower_bound, time_overlap_count
from memplan.budget import Budget, CpuClock
from memplan.options import option, parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import plan_with, register
from memplan.shares import CANONICAL_START_SHARE, CANONICAL_UNTIMED_SECONDS
from memplan.solver import canonical

MAX_PAIRS = 1_000_000  # more time-overlapping pairs, by default: the hint (see the module doc)


@dataclass(frozen=True)
class CanonicalOptions:
    """Options of ``canonical``."""

    threads: int = option(1, "threads for the probes' turns (0: one per core)")
    deterministic: bool = option(False, "probes limited by nodes, one thread: the same plan "
                                        "every run (as long as the clock does not cut it)")
    max_pairs: int = option(MAX_PAIRS, "more pairs of buffers overlapping in time: no "
                                       "descent (the hint, or best's plan)")


DEFAULTS = CanonicalOptions()


def takes(problem: Problem, max_pairs: int = MAX_PAIRS) -> bool:
    """Whether the descent runs on ``problem`` (else the hint or ``best``'s plan)."""
    return canonical.plain(problem) and \
        time_overlap_count(problem.starts, problem.ends) <= max_pairs


@register("canonical")
def plan(problem: Problem, *, budget: Budget, seed: int = 0, hint: Plan | None = None,
         **options) -> Plan:
    """The canonical descent from ``hint`` (see the module doc); ``seed`` goes to ``best``.
    The budget's ``cpu``: CPU seconds (per thread) the descent's probes may take within
    its limit (None: no more than the limit)."""
    time_limit = budget.limit
    chosen = parse_options("canonical", DEFAULTS, options)
    check_single_region(problem)
    seconds = CANONICAL_UNTIMED_SECONDS if time_limit is None else time_limit
    if not takes(problem, chosen.max_pairs):
        start = hint if hint is not None else plan_with("best", problem, seed=seed,
                                                        budget=Budget.of_limit(time_limit))
        return Plan.from_offsets(problem, start.offsets, planner="canonical",
                                 seconds=budget.elapsed(),
                                 stats={"fallback": "hint" if hint is not None else "best"})
    descent, cpu = seconds, budget.cpu  # deterministic: a node budget from the limit
    if hint is None:
        start = CpuClock(process=True).start()  # ``best``'s passes, on one core
        hint = plan_with("best", problem, seed=seed, search_evaluations=0,
                         budget=Budget.of_limit(max(0.0, seconds - budget.elapsed()),
                                                cpu=seconds * CANONICAL_START_SHARE))
        descent = seconds * (1 - CANONICAL_START_SHARE)
        cpu = min(seconds - start.spent(), seconds if cpu is None else cpu)
    threads = 1 if chosen.deterministic else chosen.threads or os.cpu_count() or 1
    outcome = canonical.descend(problem, lower_bound(problem), hint.offsets.copy(),
                                seconds=descent if chosen.deterministic else
                                seconds - budget.elapsed(),
                                threads=threads, deterministic=chosen.deterministic,
                                cpu=None if chosen.deterministic else cpu)
    return Plan.from_offsets(problem, outcome.offsets, planner="canonical",
                             seconds=budget.elapsed(),
                             stats={**outcome.stats, "interrupted": outcome.interrupted})


plan.options = DEFAULTS
