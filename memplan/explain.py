"""Why the arena is as large as it is: the peak, a plan's gap, and a capacity that cannot be met.

A model engineer whose network does not fit asks *what makes the peak?*
and *why does it not fit?*; `explain` answers both with named operators and
tensors, and measures what would help. ``explain(problem, plan=None)``
returns an `Explanation` (dataclasses) that prints as text
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
- **capacity** (the problem's, or ``capacity=``): `memplan.capacity_reason`
  finds why it cannot be met, as small as it can, and says whether that is
  proven and minimal;
- **what would help**: `memplan.what_if` measures the bound with each of the
  few largest tensors at the peak ending a step earlier, recomputed or
  split, and, for a plan, each optional in-place alias it did not take.

Cost: O(n log n + sum of lifetimes) for peak and gap, a few lower bounds for
the remedies (one per change), and the CP-SAT checks of the capacity reason
only when the live load fits the capacity but no plan at hand does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memplan.bounds import live_bytes, lower_bound
from memplan.capacity_reason import (
    FITS,
    LIVE_LOAD,
    PACKING,
    PINNED,
    Reason,
    live_load_reason,
    packing_reason,
    pinned_reason,
)
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.viz import human_bytes, plan_usage
from memplan.what_if import Remedy, alias_remedies, producers_and_readers, remedies

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MOST_PEAKS = 3  # peak runs described in full
MOST_REMEDIES = 3  # tensors at the peak whose changes are measured
MOST_LISTED = 12  # tensors listed per section in the text


@dataclass(frozen=True)
class Operator:
    """The operator running at one step (empty name and op when the frontend does not say)."""

    step: int
    name: str = ""
    op: str = ""

    def __str__(self) -> str:
        what = " ".join(x for x in (repr(self.name) if self.name else "", self.op and
                                    f"({self.op})") if x)
        return f"step {self.step}" + (f" {what}" if what else "")


@dataclass(frozen=True)
class Tensor:
    """One buffer as an explanation shows it: size, lifetime, who writes and reads it."""

    id: str
    size: int
    start: int
    end: int  # exclusive
    kind: str
    producer: Operator | None = None
    readers: tuple[Operator, ...] = ()
    offset: int | None = None  # in the plan, when a plan is explained


@dataclass(frozen=True)
class Peak:
    """A step where the live bytes reach the maximum: the lower bound's certificate."""

    step: int
    steps: tuple[int, int]  # the run [first, last + 1) of peak steps it starts
    live_bytes: int
    operator: Operator
    tensors: tuple[Tensor, ...]  # live at ``step``, largest first


@dataclass(frozen=True)
class Gap:
    """Where a plan's bytes above the bound are."""

    planner: str
    arena_size: int
    lower_bound: int
    step: int  # the first step at which the plan uses an address above the bound
    top_at_step: int  # the highest address used at ``step``
    live_at_step: int  # the bytes live at ``step``: the rest below the top are holes
    operator: Operator
    tensors: tuple[Tensor, ...]  # buffers reaching above the bound, highest first


@dataclass(frozen=True)
class CapacityExplanation:
    """Why a capacity cannot be met (``kind``), or that it can (``fits``)."""

    kind: str  # fits, live_load, pinned, packing, undecided
    capacity: int
    message: str
    step: int | None
    window: tuple[int, int] | None
    live_bytes: int
    proven: bool
    minimal: bool
    tensors: tuple[Tensor, ...]
    checks: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Explanation:
    """Everything `explain` found; ``str()`` is the text, ``to_dict()`` the JSON."""

    problem: str
    buffers: int
    lower_bound: int
    max_live: int  # the largest live load (the bound, unless explicit conflicts raise it)
    peak_steps: tuple[int, ...]  # every step where the live load is max_live
    peaks: tuple[Peak, ...]  # the first step of each run of peak steps (a few)
    gap: Gap | None = None
    capacity: CapacityExplanation | None = None
    remedies: tuple[Remedy, ...] = ()
    alias_floor: int | None = None  # the bound with the plan's alias choices
    alias_remedies: tuple[Remedy, ...] = ()
    _plot: tuple = field(default=(), repr=False, compare=False)  # (problem, plan) to draw

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document.pop("_plot")
        return document

    def __str__(self) -> str:
        return render_text(self)

    def plot(self, ax: Axes | None = None) -> Axes:
        """Live bytes per step, the peak steps marked, and the plan's top and capacity."""
        return plot_explanation(self, ax)


# ------------------------------------------------------------------ building
class _Describer:
    """Buffers and steps as `Tensor` and `Operator` records."""

    def __init__(self, problem: Problem, plan: Plan | None):
        self.problem, self.plan = problem, plan
        self.producer, self.readers = producers_and_readers(problem)

    def operator(self, step: int) -> Operator:
        steps = self.problem.steps
        if steps is None or not 0 <= step < len(steps):
            return Operator(step)
        return Operator(step, steps[step].name, steps[step].op)

    def tensor(self, idx: int) -> Tensor:
        p, id = self.problem, self.problem.ids[idx]
        made = self.producer.get(id)
        return Tensor(id, int(p.sizes[idx]), int(p.starts[idx]), int(p.ends[idx]), p.kinds[idx],
                      None if made is None else self.operator(made),
                      tuple(self.operator(t) for t in sorted(set(self.readers.get(id, ())))),
                      None if self.plan is None else int(self.plan.offsets[idx]))

    def live_at(self, step: int) -> list[int]:
        p = self.problem
        live = np.flatnonzero((p.starts <= step) & (p.ends > step))
        return sorted(live.tolist(), key=lambda i: (-int(p.sizes[i]), p.ids[i]))


def _peaks(d: _Describer, live: np.ndarray) -> tuple[tuple[int, ...], list[Peak]]:
    if len(live) == 0:
        return (), []
    steps = np.flatnonzero(live == live.max())
    runs = np.split(steps, np.flatnonzero(np.diff(steps) > 1) + 1)
    peaks = [Peak(int(run[0]), (int(run[0]), int(run[-1]) + 1), int(live[run[0]]),
                  d.operator(int(run[0])), tuple(d.tensor(i) for i in d.live_at(int(run[0]))))
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
    return Gap(plan.planner, plan.arena_size, bound, step, int(top[step]), int(live[step]),
               d.operator(step), tuple(d.tensor(int(i)) for i in reaching))


def _capacity(d: _Describer, capacity: int, plan: Plan | None, time_limit: float,
              workers: int) -> CapacityExplanation:
    problem = d.problem
    reason = pinned_reason(problem, capacity) or live_load_reason(problem, capacity)
    if reason is None and plan is not None and plan.arena_size <= capacity \
            and plan.regions is None:
        reason = Reason(FITS, capacity)
    if reason is None:
        reason = packing_reason(problem, capacity, time_limit=time_limit, workers=workers)
    tensors = tuple(sorted((d.tensor(i) for i in reason.buffers), key=lambda t: (-t.size, t.id)))
    return CapacityExplanation(reason.kind, capacity, _reason_text(d, reason), reason.step,
                               reason.window, reason.live_bytes, reason.proven, reason.minimal,
                               tensors, reason.checks, reason.seconds)


def _exact(value: int) -> str:
    return human_bytes(value) + (f" ({value} B)" if value >= 1024 else "")


def _reason_text(d: _Describer, reason: Reason) -> str:
    cap = _exact(reason.capacity)
    n = len(reason.buffers)
    if reason.kind == FITS:
        return f"fits: a layout within {cap} exists"
    if reason.kind == LIVE_LOAD:
        return (f"at {d.operator(reason.step)} {_exact(reason.live_bytes)} are live, more "
                f"than the capacity {cap}; {n} of the {reason.live_count} tensors live there "
                f"need more than that {'alone' if n == 1 else 'together'} (a minimal set)")
    if reason.kind == PINNED:
        return f"buffer {d.problem.ids[reason.buffers[0]]!r} is pinned above the capacity {cap}"
    if reason.kind == PACKING:
        start, end = reason.window
        return (f"every step's live load fits {cap}, but no layout of these {n} buffers does "
                f"(steps [{start}, {end}), at most {human_bytes(reason.live_bytes)} live at "
                f"once): their lifetimes force holes; proven by CP-SAT, "
                + ("a minimal set" if reason.minimal else "not proven minimal"))
    return f"undecided: CP-SAT found neither a layout within {cap} nor a proof in the time limit"


def explain(problem: Problem, plan: Plan | None = None, *, capacity: int | None = None,
            time_limit: float = 10.0, workers: int = 1) -> Explanation:
    """Where the peak comes from, where ``plan``'s extra bytes are, why ``capacity`` (default:
    the problem's) cannot be met, and what would help; see the module docstring.

    ``time_limit`` bounds the CP-SAT checks of a capacity reason (seconds).
    """
    capacity = problem.capacity if capacity is None else capacity
    if plan is not None and len(plan.offsets) != len(problem):
        raise ValueError(f"the plan has {len(plan.offsets)} offsets for {len(problem)} buffers")
    d = _Describer(problem, plan)
    live = live_bytes(problem)
    bound = lower_bound(problem)
    peak_steps, peaks = _peaks(d, live)
    first = peaks[0].tensors[:MOST_REMEDIES] if peaks else ()
    helped = remedies(problem, [t.id for t in first], bound=bound)
    floor, aliases = (None, []) if plan is None or plan.regions is not None else \
        alias_remedies(problem, plan)
    return Explanation(
        problem.name, len(problem), bound, int(live.max()) if len(live) else 0, peak_steps,
        tuple(peaks), None if plan is None else _gap(d, plan, bound, live),
        None if capacity is None else _capacity(d, capacity, plan, time_limit, workers),
        tuple(helped), floor, tuple(sorted(aliases, key=lambda r: -r.saves)),
        _plot=(problem, plan))


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


# ------------------------------------------------------------------ rendering
def _tensor_line(t: Tensor, *, offset: bool = False) -> str:
    writer = f"written by {t.producer}" if t.producer else ""
    if len(t.readers) <= 2:
        read = "read by " + " and ".join(map(str, t.readers)) if t.readers else ""
    else:
        read = f"read at steps {', '.join(str(r.step) for r in t.readers)}"
    where = f"at [{t.offset}, {t.offset + t.size})  " if offset and t.offset is not None else ""
    who = "; ".join(x for x in (writer, read) if x)
    return (f"  {human_bytes(t.size):>10}  [{t.start}, {t.end})  {t.kind:<10} {t.id}  {where}"
            + (f"({who})" if who else ""))


def _listed(tensors, *, offset: bool = False) -> list[str]:
    lines = [_tensor_line(t, offset=offset) for t in tensors[:MOST_LISTED]]
    if len(tensors) > MOST_LISTED:
        lines.append(f"  ... and {len(tensors) - MOST_LISTED} more")
    return lines


def render_text(e: Explanation) -> str:
    """The explanation as the command line prints it."""
    lines = [f"{e.problem or 'problem'}: {e.buffers} buffers, lower bound "
             f"{human_bytes(e.lower_bound)} ({e.lower_bound} B)"]
    if e.max_live != e.lower_bound:
        lines.append(f"  (the largest live load is {human_bytes(e.max_live)}; explicit "
                     f"conflicts raise the bound)")
    more = len(e.peak_steps) - sum(p.steps[1] - p.steps[0] for p in e.peaks)
    lines.append(f"peak: {human_bytes(e.max_live)} live at {len(e.peak_steps)} step"
                 f"{'s' if len(e.peak_steps) != 1 else ''}"
                 + (f" ({more} in runs not shown)" if more > 0 else ""))
    for p in e.peaks:
        run = f"steps {p.steps[0]}-{p.steps[1] - 1}" if p.steps[1] - p.steps[0] > 1 else ""
        lines.append(f"at {p.operator}{f' ({run})' if run else ''}: {len(p.tensors)} tensors "
                     f"live, largest first")
        lines += _listed(p.tensors)
    if e.gap is not None:
        g = e.gap
        lines.append(f"gap: {g.planner} uses {human_bytes(g.arena_size)}, "
                     f"{human_bytes(g.arena_size - g.lower_bound)} above the bound: addresses "
                     f"[{g.lower_bound}, {g.arena_size})")
        lines.append(f"  opens at {g.operator}: the plan reaches {g.top_at_step} while "
                     f"{human_bytes(g.live_at_step)} are live there "
                     f"({human_bytes(g.top_at_step - g.live_at_step)} of holes below)")
        lines.append(f"  {len(g.tensors)} buffer{'s' if len(g.tensors) != 1 else ''} reach "
                     f"above the bound, highest first:")
        lines += _listed(g.tensors, offset=True)
    if e.capacity is not None:
        c = e.capacity
        lines.append(f"capacity {human_bytes(c.capacity)}: {c.message}")
        if c.kind != FITS:
            lines += _listed(c.tensors)
    if e.remedies:
        lines.append("what would help (measured on the lower bound):")
        for r in e.remedies:
            lines.append(f"  {r.change:<12} {r.tensor}: bound {human_bytes(r.bound)} "
                         f"({'-' + human_bytes(r.saves) if r.saves else 'no change'}); "
                         f"{r.detail}")
    if e.alias_floor is not None and e.alias_remedies:
        helpful = [r for r in e.alias_remedies if r.saves > 0]
        lines.append(f"optional in-place aliases the plan did not take: {len(e.alias_remedies)}"
                     f"; with its choices no plan can be below {human_bytes(e.alias_floor)}; "
                     + (f"{len(helpful)} would lower that:" if helpful else
                        "taking any one of them would not lower that"))
        for r in helpful[:5]:
            lines.append(f"  take {r.detail}: -{human_bytes(r.saves)} (to "
                         f"{human_bytes(r.bound)})")
    return "\n".join(lines)


def plot_explanation(e: Explanation, ax: Axes | None = None) -> Axes:
    """Live bytes per step (the bound's certificate), the peak steps shaded, and, when
    known, the plan's highest address per step, the gap's first step and the capacity."""
    from memplan.viz import _axes, _byte_axis, _legend_below

    problem, plan = e._plot
    ax = _axes(ax, (10, 3.5))
    live = live_bytes(problem)
    steps = np.arange(len(live) + 1)
    ax.fill_between(steps, np.r_[live, live[-1:]], step="post", color="tab:blue", alpha=0.35,
                    label="live bytes")
    for p in e.peaks:
        ax.axvspan(p.steps[0], p.steps[1], color="tab:red", alpha=0.25)
        ax.annotate(f"{p.operator.name or p.operator.op or p.step}", (p.step, p.live_bytes),
                    textcoords="offset points", xytext=(4, 4), fontsize=8, color="tab:red")
    top = max(e.lower_bound, int(live.max(initial=0)))
    if plan is not None and plan.regions is None and plan.sizes is None:
        used = plan_usage(problem, plan)
        ax.step(steps, np.r_[used, used[-1:]], where="post", color="tab:orange",
                label=f"{plan.planner}: highest address")
        top = max(top, plan.arena_size)
    ax.axhline(e.lower_bound, color="black", linestyle="--", linewidth=1, label="lower bound")
    if e.gap is not None:
        ax.axvline(e.gap.step, color="tab:orange", linestyle=":", label="gap opens")
    if e.capacity is not None:
        ax.axhline(e.capacity.capacity, color="tab:red", linewidth=1, label="capacity")
        if e.capacity.window is not None and e.capacity.kind == PACKING:
            ax.axvspan(*e.capacity.window, color="tab:purple", alpha=0.12,
                       label="cannot fit: window")
        top = max(top, e.capacity.capacity)
    _byte_axis(ax, max(top, 1) * 1.1, "bytes")
    ax.set_xlim(0, max(len(live), 1))
    ax.set_xlabel("time (step)")
    ax.set_title(f"{e.problem or 'problem'}: where the peak comes from")
    _legend_below(ax)
    return ax


__all__ = ["CapacityExplanation", "Explanation", "Gap", "Operator", "Peak", "Remedy", "Tensor",
           "capacity_line", "explain", "render_text"]
