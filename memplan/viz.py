"""Plots of plans: the layout, memory over time, and planners compared.

A plan is a picture before it is a number. Three plots, each on a matplotlib
``Axes`` (a new figure when none is given), each returning its ``Axes``:

- `plot_layout`: time on x, address on y, one rectangle a buffer::

      address
        ^ - - - - - - - - - - - - - - arena size
        |        +-----+
        | - - - -|  c  |- - - - - - lower bound
        +--------+--+--+--+
        |   a    |  b  :b'|     b' aliases b: drawn hatched, over b's bytes
        +--------+-----+--+--> time

  Buffers joined by aliases the plan honours share a colour; the alias
  targets are hatched, so memory that two tensors share on purpose stands
  out from a bug. Lines mark the arena size, the lower bound and the capacity.
- `plot_memory`: live bytes per step (what any plan must hold) against the
  highest address the plan uses at that step and the arena size; the space
  between the two curves is fragmentation.
- `plot_comparison`: arena size per planner per problem, relative to the
  lower bound (1.0 = provably optimal), from `memplan.api.compare`'s table.

Rectangles go into one ``PolyCollection``, O(n) and fast for thousands of
buffers; names are written only into rectangles large enough to hold them.
Matplotlib is an optional dependency (``pip install memplan[plot]``); headless
(no display, not in a notebook) the Agg backend is used.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import numpy as np

from memplan.bounds import live_bytes
from memplan.plan import Plan
from memplan.problem import Problem, alias_components
from memplan.viz_html import inline, plan_usage, to_html, write_html

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

MAX_LABELS = 60  # write buffer names only when a plot has at most this many buffers
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def _pyplot():
    """pyplot, on the Agg backend when there is no display to draw on."""
    import matplotlib

    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and "ipykernel" not in sys.modules and "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return ax


def human_bytes(value: float) -> str:
    """``3145728 -> '3 MiB'``, ``1536 -> '1.5 KiB'``."""
    for scale, unit in _UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:g} B"


def _unit(largest: float) -> tuple[int, str]:
    """The byte unit to draw an axis reaching ``largest`` in (round ticks in that unit)."""
    return next(((scale, unit) for scale, unit in _UNITS if largest >= 4 * scale), (1, "B"))


def _byte_axis(ax: Axes, top: float, label: str) -> None:
    """A y axis from 0 to ``top`` bytes with round ticks in KiB, MiB, ... as fits."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    scale, unit = _unit(top)
    ticks = MaxNLocator(nbins=8, steps=[1, 2, 4, 5, 8, 10]).tick_values(0, top / scale)
    ax.yaxis.set_major_locator(FixedLocator(ticks * scale))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / scale:g}"))
    ax.set_ylabel(f"{label} ({unit})")
    ax.set_ylim(0, top)


def _legend_below(ax: Axes) -> None:
    """The legend under the axes, where it hides no rectangle or line."""
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(handles),
              fontsize="small", frameon=False)


def _used_sizes(problem: Problem, plan: Plan) -> np.ndarray:
    return problem.sizes if plan.sizes is None else np.asarray(plan.sizes)


def _honoured_groups(problem: Problem, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per buffer: a colour group (joined by honoured aliases) and whether it is an alias target."""
    honoured = np.flatnonzero(
        offsets[problem.alias_dst] == offsets[problem.alias_src] + problem.alias_delta)
    is_target = np.zeros(len(problem), bool)
    is_target[problem.alias_dst[honoured]] = True
    group, _, _ = alias_components(problem, honoured)
    return group, is_target


def plot_layout(problem: Problem, plan: Plan, *, ax: Axes | None = None,
                title: str | None = None, labels: bool | None = None,
                region: int = 0, top: int | None = None) -> Axes:
    """Draw ``plan``: one rectangle per buffer, time on x, address on y.

    ``labels`` writes buffer ids into rectangles (default: when at most
    `MAX_LABELS` buffers). With memory regions, only the buffers placed in
    ``region`` are drawn. ``top`` (bytes) fixes the address axis, so that
    plots side by side share one scale. Returns the ``Axes``.
    """
    from matplotlib.collections import PolyCollection

    ax = _axes(ax, (10, 5))
    offsets = np.asarray(plan.offsets, np.int64)
    sizes = _used_sizes(problem, plan)
    shown = np.ones(len(problem), bool) if plan.regions is None else plan.regions == region
    group, is_target = _honoured_groups(problem, offsets)
    colours = _pyplot().get_cmap("tab20")(group % 20)
    plain = dict(alpha=1.0, linewidths=0.4, linestyles="-", hatch=None)
    shared = dict(alpha=0.6, linewidths=0.6, linestyles="--", hatch="//")  # alias targets
    for members, style in ((shown & ~is_target, plain), (shown & is_target, shared)):
        members = np.flatnonzero(members)
        if len(members):
            lo, hi = offsets[members], offsets[members] + sizes[members]
            x0, x1 = problem.starts[members], problem.ends[members]
            boxes = np.stack([np.c_[x0, lo], np.c_[x1, lo], np.c_[x1, hi], np.c_[x0, hi]], 1)
            ax.add_collection(PolyCollection(boxes, facecolors=colours[members],
                                             edgecolors="black", **style))
    arena = plan.arena_size if plan.regions is None else int(
        (offsets + sizes)[shown].max(initial=0))
    lines = [(arena, "arena size", "tab:red", "-")]
    if plan.regions is None:
        lines.append((plan.lower_bound, "lower bound", "tab:green", "--"))
        if plan.best_bound > plan.lower_bound:
            lines.append((plan.best_bound, "proven bound", "tab:olive", "-."))
    capacity = problem.capacity if plan.regions is None or not problem.regions \
        else problem.regions[region].capacity
    if capacity is not None:
        lines.append((capacity, "capacity", "black", ":"))
    for value, name, colour, style in lines:
        ax.axhline(value, color=colour, linestyle=style, linewidth=1.2,
                   label=f"{name} {human_bytes(value)}")
    if labels if labels is not None else shown.sum() <= MAX_LABELS:
        _label_boxes(ax, problem, offsets, sizes, np.flatnonzero(shown), arena)
    horizon = max(problem.horizon, 1)
    ax.set_xlim(0, horizon)
    ax.set_xlabel("time (step)")
    _byte_axis(ax, top or max(v for v, *_ in lines) * 1.05 or 1, "address")
    _legend_below(ax)
    name = problem.name or "problem"
    winner = plan.stats.get("winner")  # the planner a composite one (best) chose
    planner = f"{plan.planner} ({winner})" if winner and winner != plan.planner else plan.planner
    ax.set_title(title if title is not None else
                 f"{name}: {planner}, arena {human_bytes(plan.arena_size)} "
                 f"({plan.status}, gap {plan.gap:.1%})")
    return ax


def _label_boxes(ax: Axes, problem: Problem, offsets, sizes, shown, arena: int) -> None:
    """Write each buffer's id in its rectangle when the rectangle is tall and wide enough."""
    horizon = max(problem.horizon, 1)
    for i in shown.tolist():
        width = problem.ends[i] - problem.starts[i]
        if sizes[i] >= arena / 30 and width >= horizon / 40:
            ax.text((problem.starts[i] + problem.ends[i]) / 2, offsets[i] + sizes[i] / 2,
                    problem.ids[i], ha="center", va="center", fontsize=7, clip_on=True)


def plot_memory(problem: Problem, plan: Plan, *, ax: Axes | None = None,
                title: str | None = None) -> Axes:
    """Live bytes per step against the plan's highest used address and its arena size."""
    ax = _axes(ax, (10, 3.5))
    steps = np.arange(problem.horizon + 1)
    live = live_bytes(problem)
    used = plan_usage(problem, plan)
    ax.fill_between(steps, np.r_[live, live[-1:]], step="post", color="tab:blue", alpha=0.35,
                    label="live bytes (any plan needs them)")
    ax.step(steps, np.r_[used, used[-1:]], where="post", color="tab:orange",
            label="highest address the plan uses")
    ax.axhline(plan.arena_size, color="tab:red", label=f"arena {human_bytes(plan.arena_size)}")
    ax.axhline(plan.lower_bound, color="tab:green", linestyle="--",
               label=f"lower bound {human_bytes(plan.lower_bound)}")
    ax.set_xlim(0, max(problem.horizon, 1))
    ax.set_xlabel("time (step)")
    _byte_axis(ax, max(plan.arena_size, 1) * 1.1, "bytes")
    _legend_below(ax)
    ax.set_title(title if title is not None else
                 f"{problem.name or 'problem'}: memory over time ({plan.planner})")
    return ax


def plot_comparison(table: pd.DataFrame, *, ax: Axes | None = None,
                    planners: list[str] | None = None, title: str | None = None) -> Axes:
    """Grouped bars: for each problem, every planner's arena size over the lower bound.

    ``table`` has one row per (problem, planner) with columns ``problem``,
    ``planner``, ``arena_size`` and ``lower_bound`` (as `memplan.api.compare`
    returns it). A bar at 1.0 is a plan proven optimal by the bound alone.
    """
    ax = _axes(ax, (12, 4.5))
    ratio = table.assign(ratio=table["arena_size"] / table["lower_bound"])
    wide = ratio.pivot_table(index="problem", columns="planner", values="ratio", sort=False)
    if planners is not None:
        wide = wide[[p for p in planners if p in wide.columns]]
    n = len(wide.columns)
    width = 0.85 / max(n, 1)
    positions = np.arange(len(wide))
    colours = _pyplot().get_cmap("tab20")(np.arange(n) % 20)
    for k, planner in enumerate(wide.columns):
        colour = "black" if planner == "exact" else colours[k]  # the reference stands out
        ax.bar(positions + (k - (n - 1) / 2) * width, wide[planner].to_numpy(), width,
               label=planner, color=colour)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(positions, wide.index, rotation=20, ha="right", rotation_mode="anchor")
    ax.set_ylabel("arena size / lower bound")
    top = float(np.nanmax(wide.to_numpy())) if wide.size else 1.0
    ax.set_ylim(0.95, max(top, 1.0) * 1.03)  # optimal bars (1.0) stay visible
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    ax.set_title(title if title is not None else "arena size relative to the lower bound")
    return ax


__all__ = ["MAX_LABELS", "human_bytes", "inline", "plan_usage", "plot_comparison", "plot_layout",
           "plot_memory", "to_html", "write_html"]
