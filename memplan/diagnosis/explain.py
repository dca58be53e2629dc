"""Why the arena is as large as it is: the peak, a plan's gap, and a capacity that cannot be met.

Someone whose network does not fit asks *what makes the peak?*
and *why does it not fit?*; `explain` answers both with named operators and
tensors, and measures what would help. ``explain(problem, plan=None)``
returns an `Explanation` (dataclasses of `memplan.diagnosis.explanation`) that prints as text
(``str(explanation)``), converts to JSON (``to_dict()``) and draws itself
(``plot()``). Steps:

- **peak**: the live bytes per step (`memplan.bounds.live_bytes`); the steps
  where they reach their maximum are where the lower bound comes from. For
  the first step of each run of such steps: the operator running there and
  every tensor live there, largest first, with its producer, readers and
  lifetime (from the problem's ``steps`` metadata when the frontend gives
  it): the certificate that no plan can be smaller;
- **gap** (a plan above the bound): per step the highest address the plan
  uses among the buffers live there; the address range ``[bound, arena)``,
  the buffers reaching into it, the first step where the plan goes above
  the bound (where the gap opens) and how many bytes are live there;
- **capacity** (the problem's, or ``capacity=``): `memplan.diagnosis.capacity_reason`
  finds why it cannot be met, as small as it can, and says whether that is
  proven and minimal;
- **what would help**: `memplan.diagnosis.what_if` measures the bound with each of the
  few largest tensors at the peak ending a step earlier, recomputed or
  split, and, for a plan, each optional in-place alias it did not take;
- **computed from constants** (`memplan.diagnosis.constant_folding`): the
  tensors the program computes from constants alone at every run (a
  transposed weight), and the bound without them: what folding them at
  export would save.

Cost: O(n log n + sum of lifetimes) for peak and gap, a few lower bounds for
the remedies (one per change) and the folded tensors, and the CP-SAT checks of
the capacity reason only when the live load fits the capacity but no plan at
hand does.
"""

from __future__ import annotations

import math

import numpy as np

from memplan.bounds import live_bytes, lower_bound
from memplan.budget import Budget, Stopwatch, past, to_deadline
from memplan.diagnosis.capacity_reason import (
    FITS,
    LIVE_LOAD,
    PACKING,
    PINNED,
    UNDECIDED,
    Reason,
    live_load_reason,
    packing_reason,
    pinned_reason,
    subproblem,
)
from memplan.diagnosis.constant_folding import foldable
from memplan.diagnosis.explanation import (
    CapacityExplanation,
    Explanation,
    Folding,
    Gap,
    Operator,
    Peak,
    Tensor,
    render_text,
)
from memplan.diagnosis.what_if import (
    Remedy,
    alias_remedies,
    producers_and_readers,
    remedies,
)
from memplan.errors import renamed_keyword
from memplan.heuristics.best import untimed_evaluations
from memplan.limits import check_capacity, check_time_limit, check_workers
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.registry import plan_with
from memplan.shares import CAPACITY_SHARE
from memplan.viz import human_bytes, plan_usage

MOST_PEAKS = 3  # peak runs described in full
MOST_REMEDIES = 3  # tensors at the peak whose changes are measured


# ------------------------------------------------------------------ building
class _Describer:
    """Buffers and steps as `Tensor` and `Operator` records."""

    def __init__(self, problem: Problem, plan: Plan | None):
        self.problem, self.plan = problem, plan
        self.producer, self.readers = producers_and_readers(problem)
        self._operators: dict[int, Operator] = {}  # one record a step, however many read it

    def operator(self, step: int) -> Operator:
        known = self._operators.get(step)
        if known is None:
            steps = self.problem.steps
            known = Operator(step) if steps is None or not 0 <= step < len(steps) else \
                Operator(step, steps[step].name, steps[step].op)
            self._operators[step] = known
        return known

    def tensor(self, idx: int) -> Tensor:
        return self.tensors([idx])[0]

    def tensors(self, rows: list[int]) -> tuple[Tensor, ...]:
        """`tensor` of each of ``rows``, the columns read once for all (the 350k tensors live at
        the peak of a 10^6-buffer training step: a third of the time one by one)."""
        p, at = self.problem, np.asarray(rows, np.int64)
        ids, kinds = [p.ids[i] for i in rows], [p.kinds[i] for i in rows]
        offsets = [None] * len(rows) if self.plan is None else \
            np.asarray(self.plan.offsets)[at].tolist()
        producer, readers, operator = self.producer.get, self.readers.get, self.operator
        return tuple(
            Tensor(id, size, start, end, kind,
                   None if (made := producer(id)) is None else operator(made),
                   tuple(operator(t) for t in sorted(set(read))) if (read := readers(id))
                   else (), offset)
            for id, size, start, end, kind, offset in zip(
                ids, p.sizes[at].tolist(), p.starts[at].tolist(), p.ends[at].tolist(), kinds,
                offsets, strict=True))

    def live_at(self, step: int) -> list[int]:
        """The buffers live at ``step``, largest first (then by id)."""
        p = self.problem
        live = np.flatnonzero((p.starts <= step) & (p.ends > step))
        keys = zip((-p.sizes[live]).tolist(), [p.ids[i] for i in live.tolist()], live.tolist(),
                   strict=True)
        return [i for _, _, i in sorted(keys)]


def _peaks(d: _Describer, live: np.ndarray) -> tuple[tuple[int, ...], list[Peak]]:
    if len(live) == 0:
        return (), []
    steps = np.flatnonzero(live == live.max())
    runs = np.split(steps, np.flatnonzero(np.diff(steps) > 1) + 1)
    peaks = [Peak(int(run[0]), (int(run[0]), int(run[-1]) + 1), int(live[run[0]]),
                  d.operator(int(run[0])), d.tensors(d.live_at(int(run[0]))))
             for run in runs[:MOST_PEAKS]]
    return tuple(steps.tolist()), peaks


def _gap(d: _Describer, plan: Plan, bound: int, live: np.ndarray) -> Gap | None:
    problem = d.problem
    if plan.arena_size <= bound or plan.regions is not None or plan.sizes is not None:
        return None
    top = plan_usage(problem, plan)
    above = np.flatnonzero(top > bound)
    if len(above) == 0:
        return None
    step = int(above[0])
    ends = plan.offsets + problem.sizes
    reaching = np.flatnonzero(ends > bound)
    reaching = reaching[np.lexsort((problem.starts[reaching], -ends[reaching]))]
    holes, reach = [], 0  # free address ranges below the top at the step
    for idx in sorted(d.live_at(step), key=lambda i: int(plan.offsets[i])):
        if plan.offsets[idx] > reach:
            holes.append((reach, int(plan.offsets[idx])))
        reach = max(reach, int(ends[idx]))
    return Gap(plan.planner, plan.arena_size, bound, step, int(top[step]), int(live[step]),
               d.operator(step), tuple(holes), d.tensors(reaching.tolist()))


def _capacity(d: _Describer, capacity: int, plan: Plan | None, deadline: float,
              threads: int) -> CapacityExplanation:
    """Why ``capacity`` is (not) met, each step within what is left until ``deadline``."""
    problem = d.problem
    reason = pinned_reason(problem, capacity) or live_load_reason(
        problem, capacity, budget=Budget.of_limit(_left(deadline)), threads=threads)
    if reason is None and (plan is None or plan.arena_size > capacity or plan.regions is not None):
        plan = plan_in_time("best", subproblem(problem, range(len(problem)), None),
                            _left(deadline) / 2)
    if reason is None and plan.arena_size <= capacity and plan.regions is None:
        reason = Reason(FITS, capacity)
    if reason is None:
        reason = packing_reason(problem, capacity, budget=Budget.of_limit(_left(deadline)),
                                threads=threads)
    tensors = tuple(sorted((d.tensor(i) for i in reason.buffers), key=lambda t: (-t.size, t.id)))
    return CapacityExplanation(reason.kind, capacity, _reason_text(d, reason), reason.step,
                               reason.window, reason.live_bytes, reason.proven, reason.minimal,
                               tensors, reason.checks, reason.seconds)


def plan_in_time(planner: str, problem: Problem, seconds: float,
                 wall: float | None = None, seed: int = 0) -> Plan:
    """The plan of ``planner`` that explain describes, within ``seconds``: its budget's CPU
    allowance (the same plan on a busy machine, later) within ``wall`` seconds on the clock
    (default: ``seconds``), or, for a planner that spends no allowance, its wall seconds;
    ``best`` with the budget of its untimed search too (the same plan as without a limit,
    when time allows)."""
    extra = {"search_evaluations": untimed_evaluations(problem)} if planner == "best" else {}
    budget = Budget.of_limit(seconds if wall is None else wall, cpu=seconds)
    return plan_with(planner, problem, seed=seed, budget=budget, **extra)


def _left(deadline: float) -> float:
    return max(0.0, to_deadline(deadline))


def _exact(value: int) -> str:
    return human_bytes(value) + (f" ({value} B)" if value >= 1024 else "")


def _constraints(problem: Problem, members) -> str:
    """What ties the buffers ``members`` together: lifetimes, and aliases or conflicts."""
    inside = set(members)
    more = [what for what, pairs in (("aliases", zip(problem.alias_src, problem.alias_dst,
                                                     strict=True)),
                                     ("explicit conflicts", problem.conflicts))
            if any(int(a) in inside and int(b) in inside for a, b in pairs)]
    return ", ".join(["lifetimes", *more[:-1]]) + (f" and {more[-1]}" if more else "")


def _reason_text(d: _Describer, reason: Reason) -> str:
    cap = _exact(reason.capacity)
    n = len(reason.buffers)
    if reason.kind == FITS:
        return f"fits: a layout within {cap} exists"
    if reason.kind == LIVE_LOAD:
        return (f"at {d.operator(reason.step)} {_exact(reason.live_bytes)} are live, more "
                f"than the capacity {cap}; {n} of the {reason.live_count} tensors live there "
                + ("needs more than that alone" if n == 1 else "need more than that together")
                + (" (a minimal set: without any one of them the rest fits)" if reason.minimal
                   else " (not proven minimal)"))
    if reason.kind == PINNED:
        return f"buffer {d.problem.ids[reason.buffers[0]]!r} is pinned above the capacity {cap}"
    if reason.kind == PACKING:
        start, end = reason.window
        return (f"every step's live load fits {cap}, but no layout of these {n} buffers does "
                f"(steps [{start}, {end}), at most {human_bytes(reason.live_bytes)} live at "
                f"once): their {_constraints(d.problem, reason.buffers)} force holes; proven by "
                f"CP-SAT, " + ("a minimal set (without any one of them the rest fits)"
                               if reason.minimal else "not proven minimal"))
    return f"undecided: CP-SAT found neither a layout within {cap} nor a proof in the time limit"


def explain(problem: Problem, plan: Plan | None = None, *, capacity: int | None = None,
            time_limit: float | None = 10.0, threads: int = 1,
            workers: int | None = None) -> Explanation:
    """Where the peak comes from, where ``plan``'s extra bytes are, why ``capacity`` (default:
    the problem's) cannot be met, and what would help; see the module docstring.

    ``time_limit`` (seconds) bounds the whole explanation: the capacity reason
    (its CP-SAT checks) may take `CAPACITY_SHARE` of it, the remedies what is
    left; what the limit cuts short is named in ``unmeasured``. The limit is
    kept up to one lower bound or one greedy plan of the problem; None (or
    infinity) sets none, as in `memplan.solve`. ``workers``: the old name of ``threads``
    (deprecated).
    """
    watch = Stopwatch()
    if workers is not None:  # `threads` has a default: the old name replaces it
        threads = renamed_keyword("workers", workers, "threads", None, where="explain")
    capacity = problem.capacity if capacity is None else check_capacity(capacity)
    limit = check_time_limit(time_limit, "time_limit")
    time_limit = math.inf if limit is None else limit  # None or inf: no limit
    threads = check_workers(threads, "threads", default_allowed=False)
    if plan is not None and len(plan.offsets) != len(problem):
        raise ValueError(f"the plan has {len(plan.offsets)} offsets for {len(problem)} buffers")
    deadline = watch.began + time_limit
    d = _Describer(problem, plan)
    live = live_bytes(problem)
    bound = lower_bound(problem)
    peak_steps, peaks = _peaks(d, live)
    reason = None if capacity is None else \
        _capacity(d, capacity, plan, watch.began + CAPACITY_SHARE * time_limit, threads)
    cut = ["capacity reason"] if reason is not None and reason.kind == UNDECIDED else []
    first = peaks[0].tensors[:MOST_REMEDIES] if peaks else ()
    helped = remedies(problem, [t.id for t in first], bound=bound, deadline=deadline, cut=cut,
                      links=(d.producer, d.readers))
    floor, aliases = (None, []) if plan is None or plan.regions is not None else \
        alias_remedies(problem, plan, deadline=deadline, cut=cut)
    late = past(deadline)  # the folding is not cut once begun: one walk, a few bounds
    folding, folded_bound = ((), None) if late else foldable(problem, bound=bound)
    if late:
        cut.append("constant folding")
    return Explanation(
        problem.name, len(problem), bound, int(live.max()) if len(live) else 0, peak_steps,
        tuple(peaks), None if plan is None else _gap(d, plan, bound, live), reason,
        tuple(helped), floor, tuple(sorted(aliases, key=lambda r: -r.saves)), tuple(cut),
        folding, folded_bound, _plot=(problem, plan))


def capacity_line(problem: Problem, plan: Plan) -> str | None:
    """One line on why ``plan`` does not fit the problem's capacity (no CP-SAT), or None."""
    capacity = problem.capacity
    if capacity is None or plan.arena_size <= capacity:
        return None
    live = live_bytes(problem)
    if len(live) and int(live.max()) > capacity:
        step = int(np.argmax(live))
        return (f"at {_Describer(problem, None).operator(step)} {human_bytes(int(live[step]))} "
                f"are live, more than the capacity {human_bytes(capacity)}")
    if plan.best_bound > capacity:
        return (f"every step's live load fits (at most {human_bytes(int(live.max()))}), but "
                f"no layout does: lifetimes force holes (proven bound "
                f"{human_bytes(plan.best_bound)})")
    return (f"every step's live load fits (at most {human_bytes(int(live.max()))}); no layout "
            f"within {human_bytes(capacity)} was found in the time limit, and none was ruled out")


__all__ = ["CapacityExplanation", "Explanation", "Folding", "Gap", "Operator", "Peak", "Remedy",
           "Tensor", "capacity_line", "explain", "render_text"]
