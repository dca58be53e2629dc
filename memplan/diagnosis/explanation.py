"""The record `memplan.explain` returns, and how it renders: text, JSON (a dict) and a plot.

Small frozen dataclasses: an `Explanation` holds `Peak` records (the lower
bound's certificate: the step, its `Operator`, the `Tensor` records live
there), a `Gap` (where a plan's bytes above the bound are), a
`CapacityExplanation` (why a capacity cannot be met), the measured
`memplan.diagnosis.what_if.Remedy` records and the `Folding` ones (tensors computed
from constants at every run). ``str()`` gives the text the command line
prints, ``to_dict()`` plain JSON types, ``plot()`` the live bytes per step with
the peak, the plan's highest address, the gap and the capacity marked (the
plot conventions of `memplan.viz`). Rendering is O(shown tensors + steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from memplan.bounds import live_bytes
from memplan.diagnosis.capacity_reason import FITS, PACKING
from memplan.diagnosis.what_if import Remedy
from memplan.viz import human_bytes, plan_usage

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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
    holes: tuple[tuple[int, int], ...]  # free address ranges [low, high) below the top there
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
class Folding:
    """One tensor computed from constants alone at every run (a transposed weight), and
    the bound without it (`memplan.diagnosis.constant_folding`)."""

    tensor: str  # the buffer the program would store as a constant instead
    size: int  # its bytes
    operators: tuple[Operator, ...]  # the steps computing it from constants, first to last
    constants: tuple[str, ...]  # the constants those steps read
    kept: tuple[str, ...]  # those of them steps that still run read too: stored besides
    buffers: tuple[str, ...]  # the buffers leaving the arena: it and those only it needs
    bound: int  # the lower bound without ``buffers``
    saves: int  # bytes the bound drops by


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
    unmeasured: tuple[str, ...] = ()  # the parts the time limit cut short
    folding: tuple[Folding, ...] = ()  # tensors computed from constants at every run
    folded_bound: int | None = None  # the bound with all of them folded at export
    _plot: tuple = field(default=(), repr=False, compare=False)  # (problem, plan) to draw

    def to_dict(self) -> dict[str, Any]:
        """The explanation as plain JSON-ready data (what ``--json`` prints)."""
        document = plain(self)
        document.pop("_plot")
        return document

    def __str__(self) -> str:
        return render_text(self)

    def plot(self, ax: Axes | None = None) -> Axes:
        """Live bytes per step, the peak steps marked, and the plan's top and capacity."""
        return plot_explanation(self, ax)

    def plot_gap(self, ax: Axes | None = None) -> Axes:
        """The plan's own layout with the gap marked: the addresses above the bound shaded,
        the buffers reaching into them outlined, the step where the gap opens."""
        return plot_gap(self, ax)


# ------------------------------------------------------------------ plain data, JSON
@cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """A dataclass's field names; None for any other type."""
    return tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None


def plain(value: Any) -> Any:
    """``value`` as plain data: a dataclass as a dict of its fields, a tuple as a list.
    `dataclasses.asdict` deep-copies every leaf: 4.5 CPU-s for the 350k tensors live at the
    peak of a 10^6-buffer training step."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple or kind is list:
        return [item if type(item) in _SCALARS else plain(item) for item in value]
    if kind is dict:
        return {key: plain(item) for key, item in value.items()}
    names = _field_names(kind)
    if names is None:
        return value
    return {name: item if type(item := getattr(value, name)) in _SCALARS else plain(item)
            for name in names}


_SCALARS = frozenset({int, float, str, bool, type(None)})  # plain already


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
            + (f"({who})" if who else "")).rstrip()


def _listed(tensors, *, offset: bool = False) -> list[str]:
    lines = [_tensor_line(t, offset=offset) for t in tensors[:MOST_LISTED]]
    if len(tensors) > MOST_LISTED:
        lines.append(f"  ... and {len(tensors) - MOST_LISTED} more")
    return lines


def _change(saves: int) -> str:
    if saves == 0:
        return "no change"
    return f"-{human_bytes(saves)}" if saves > 0 else f"+{human_bytes(-saves)}, worse"


def render_text(e: Explanation) -> str:
    """The explanation as the command line prints it."""
    exact = f" ({e.lower_bound} B)" if e.lower_bound >= 1024 else ""
    lines = [f"{e.problem or 'problem'}: {e.buffers} buffers, lower bound "
             f"{human_bytes(e.lower_bound)}{exact}"]
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
        holes = ", ".join(f"[{low}, {high})" for low, high in g.holes[:4]) + \
            (" ..." if len(g.holes) > 4 else "")
        lines.append(f"  opens at {g.operator}: the plan reaches {human_bytes(g.top_at_step)} "
                     f"while {human_bytes(g.live_at_step)} are live there: "
                     f"{human_bytes(g.top_at_step - g.live_at_step)} of holes below, at {holes}")
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
                         f"({_change(r.saves)}); {r.detail}")
    if e.alias_floor is not None and e.alias_remedies:
        helpful = [r for r in e.alias_remedies if r.saves > 0]
        lines.append(f"optional in-place aliases the plan did not take: {len(e.alias_remedies)}"
                     f"; with its choices no plan can be below {human_bytes(e.alias_floor)}; "
                     + (f"{len(helpful)} would lower that:" if helpful else
                        "taking any one of them would not lower that"))
        for r in helpful[:5]:
            lines.append(f"  take {r.detail}: -{human_bytes(r.saves)} (to "
                         f"{human_bytes(r.bound)})")
    if e.folding:
        lines += _folding_lines(e)
    if e.unmeasured:
        lines.append(f"cut short by the time limit: {', '.join(e.unmeasured)}")
    return "\n".join(lines)


def _folding_lines(e: Explanation) -> list[str]:
    """The tensors computed from constants at every run, and what folding them would save."""
    total = e.lower_bound - e.folded_bound
    lines = [f"computed from constants alone at every run (fold them at export, "
             f"docs/how-to/executorch.md): without them the bound is "
             f"{human_bytes(e.folded_bound)} ({_change(total)})"]
    for f in e.folding[:MOST_LISTED]:
        how = ", then ".join(" ".join(x for x in (o.op or "", f"step {o.step}") if x)
                            for o in f.operators)
        kept = f"; {', '.join(f.kept)} read elsewhere too" if f.kept else ""
        lines.append(f"  {human_bytes(f.size):>10}  {f.tensor} = {how} of "
                     f"{', '.join(f.constants) or 'constants'}: bound {human_bytes(f.bound)} "
                     f"({_change(f.saves)}){kept}")
    if len(e.folding) > MOST_LISTED:
        lines.append(f"  ... and {len(e.folding) - MOST_LISTED} more")
    return lines


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
        label = " ".join(x for x in (p.operator.name, p.operator.op) if x) or f"step {p.step}"
        ax.annotate(label, (p.step, p.live_bytes),
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


def plot_gap(e: Explanation, ax: Axes | None = None) -> Axes:
    """`memplan.viz.plot_layout` of the explained plan, with its gap drawn over it."""
    from matplotlib.patches import Rectangle

    from memplan.viz import plot_layout

    problem, plan = e._plot
    if e.gap is None:
        raise ValueError("no gap to draw: the plan is at the lower bound, or none was explained")
    g = e.gap
    ax = plot_layout(problem, plan, ax=ax, labels=False,
                     title=f"{e.problem or 'problem'}: {g.planner}, "
                           f"{human_bytes(g.arena_size - g.lower_bound)} above the bound")
    ax.axhspan(g.lower_bound, g.arena_size, color="tab:red", alpha=0.12, zorder=0)
    ax.axvline(g.step, color="tab:red", linestyle=":", linewidth=1.2)
    for low, high in g.holes:
        ax.add_patch(Rectangle((g.step, low), 1, high - low, fill=False, edgecolor="tab:red",
                               linewidth=1.5, linestyle="--"))
    for t in g.tensors:
        ax.add_patch(Rectangle((t.start, t.offset), t.end - t.start, t.size, fill=False,
                               edgecolor="tab:red", linewidth=1.5))
    ax.text(0.01, 0.02, f"gap opens at {g.operator} (dotted); outlined: the buffers above the "
            f"bound, dashed: the holes below the plan's top there", transform=ax.transAxes,
            fontsize=8, color="tab:red", backgroundcolor="white")
    first = min([g.step, *(t.start for t in g.tensors)])
    last = max([g.step + 1, *(t.end for t in g.tensors)])
    pad = max(2, (last - first) // 2)
    ax.set_xlim(max(0, first - pad), min(max(problem.horizon, 1), last + pad))  # the gap, near
    return ax


__all__ = ["CapacityExplanation", "Explanation", "Folding", "Gap", "Operator", "Peak", "Tensor",
           "plain", "plot_explanation", "plot_gap", "render_text"]
