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

  Buffers joined by aliases the plan honours share a colour (or: a colour
  per kind, per producing operator); the alias targets are hatched, so
  memory that two tensors share on purpose stands out from a bug. Lines mark
  the arena size, the lower bound and the capacity. A window of steps and of
  addresses draws a part of a large plan.
- `plot_memory`: live bytes per step (what any plan must hold) against the
  highest address the plan uses at that step and the arena size; the space
  between the two curves is fragmentation.
- `plot_comparison`: arena size per planner per problem, relative to the
  lower bound (1.0 = provably optimal), from `memplan.api.compare`'s table.

Rectangles go into one ``PolyCollection``, O(n) and fast for thousands of
buffers; past `EDGE_LIMIT` buffers without edges (they would paint a 10k-buffer
plan black) and rasterised (a vector file stays small); names are written
only into rectangles large enough to hold them. The interactive HTML page
(pan, zoom, hover; 100k buffers) is `to_html`, from `memplan.viz_html`.
Matplotlib is an optional dependency (``pip install memplan[plot]``); headless
(no display, not in a notebook) the Agg backend is used.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import numpy as np

from memplan.bounds import live_bytes
from memplan.errors import require
from memplan.plan import Plan
from memplan.problem import Problem, alias_components
from memplan.viz_html import (
    UNITS,
    human_bytes,
    inline,
    plan_title,
    plan_usage,
    show_bytes,
    to_html,
    write_html,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

MAX_LABELS = 60  # write buffer names only when a plot has at most this many buffers
EDGE_LIMIT = 300  # more buffers than this: no rectangle edges, rectangles rasterised
OPERATOR_COLOURS = 10  # colour by operator: this many colours, the last for the other types
COMPARISON_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#e7ba52")
KIND_COLOURS = {"activation": "#4e79a7", "input": "#59a14f", "output": "#e15759",
                "scratch": "#f28e2b", "weight": "#b07aa1"}  # as the HTML view


def _pyplot():
    """pyplot, on the Agg backend when there is no display to draw on."""
    matplotlib = require("matplotlib", "plot", "plotting")

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


def _unit(largest: float) -> tuple[int, str]:
    """The byte unit to draw an axis reaching ``largest`` in (round ticks in that unit)."""
    return next(((scale, unit) for scale, unit in UNITS if largest >= 4 * scale), (1, "B"))


def _byte_axis(ax: Axes, top: float, label: str, bottom: float = 0) -> None:
    """A y axis from ``bottom`` to ``top`` bytes with round ticks in KiB, MiB, ... as fits."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    scale, unit = _unit(top - bottom)
    ticks = MaxNLocator(nbins=8, steps=[1, 2, 4, 5, 8, 10]).tick_values(bottom / scale,
                                                                        top / scale)
    ax.yaxis.set_major_locator(FixedLocator(ticks * scale))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / scale:g}"))
    ax.set_ylabel(f"{label} ({unit})")
    ax.set_ylim(bottom, top)


def _legend_below(ax: Axes, extra: list | None = None) -> None:
    """The legend under the axes, where it hides no rectangle or line (``extra``: more
    handles, such as the colours of a layout)."""
    handles = ax.get_legend_handles_labels()[0] + (extra or [])
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=min(len(handles), 6),
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


def _colours(problem: Problem, offsets: np.ndarray, colour: str):
    """Per buffer an RGBA colour, whether it is an alias target, and legend entries.

    ``alias``: buffers joined by honoured aliases share a colour (tab20 by
    group); ``kind``: one colour per `memplan.problem.KINDS`; ``operator``: by
    the type of the operator that writes the buffer (`Problem.steps`), the
    `OPERATOR_COLOURS` - 1 types of the most bytes x steps, the rest grey.
    """
    from matplotlib.colors import to_rgba_array

    group, is_target = _honoured_groups(problem, offsets)
    if colour == "alias":
        return _pyplot().get_cmap("tab20")(group % 20), is_target, []
    if colour == "kind":
        names = np.array(problem.kinds)
        used = [k for k in KIND_COLOURS if (names == k).any()]
        return to_rgba_array([KIND_COLOURS[k] for k in names]), is_target, \
            [(k, KIND_COLOURS[k]) for k in used]
    if colour != "operator":
        raise ValueError(f"unknown colour {colour!r}; valid: alias, kind, operator")
    if problem.steps is None:
        raise ValueError(f"{problem.name or 'the problem'} has no operators (Problem.steps): "
                         f"colour by 'kind' or 'alias'")
    writer = {name: step.op or "?" for step in reversed(problem.steps) for name in step.writes}
    ops = np.array([writer.get(id, "(no operator)") for id in problem.ids])
    names, inverse = np.unique(ops, return_inverse=True)
    weight = np.bincount(inverse, problem.sizes * (problem.ends - problem.starts))
    ranked = names[np.argsort(-weight, kind="stable")]
    palette = _pyplot().get_cmap("tab10")
    shown = {op: palette(k) for k, op in enumerate(ranked[:OPERATOR_COLOURS - 1])}
    other = (0.6, 0.6, 0.6, 1.0)
    legend = list(shown.items()) + ([("other", other)] if len(ranked) > len(shown) else [])
    return np.array([shown.get(op, other) for op in ops]), is_target, legend


def plot_layout(problem: Problem, plan: Plan, *, ax: Axes | None = None,
                title: str | None = None, labels: bool | None = None,
                region: int = 0, top: int | None = None,
                window: tuple[int, int] | None = None,
                addresses: tuple[int, int] | None = None, colour: str = "alias") -> Axes:
    """Draw ``plan``: one rectangle per buffer, time on x, address on y.

    ``labels`` writes buffer ids into rectangles (default: when at most
    `MAX_LABELS` buffers). With memory regions, only the buffers placed in
    ``region`` are drawn. ``top`` (bytes) fixes the address axis, so that
    plots side by side share one scale. ``window`` (steps ``[start, end)``)
    and ``addresses`` (bytes ``[low, high)``) draw a part of the plan, only the
    buffers that reach into it. ``colour``: ``alias``, ``kind`` or
    ``operator`` (see `_colours`). Past `EDGE_LIMIT` buffers the rectangles
    lose their edges (which would hide every colour) and are rasterised (a
    vector file stays small). Returns the ``Axes``.
    """
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    ax = _axes(ax, (10, 5))
    offsets = np.asarray(plan.offsets, np.int64)
    sizes = _used_sizes(problem, plan)
    shown = np.ones(len(problem), bool) if plan.regions is None else plan.regions == region
    step_lo, step_hi = window if window is not None else (0, max(problem.horizon, 1))
    shown &= (problem.ends > step_lo) & (problem.starts < step_hi)
    if addresses is not None:
        shown &= (offsets + sizes > addresses[0]) & (offsets < addresses[1])
    colours, is_target, legend = _colours(problem, offsets, colour)
    many = shown.sum() > EDGE_LIMIT
    plain = dict(alpha=1.0, linewidths=0 if many else 0.4, hatch=None)
    shared = dict(alpha=0.6, linewidths=0 if many else 0.6, linestyles="--",
                  hatch=None if many else "//")  # alias targets
    for members, style in ((shown & ~is_target, plain), (shown & is_target, shared)):
        members = np.flatnonzero(members)
        if len(members):
            lo, hi = offsets[members], offsets[members] + sizes[members]
            x0, x1 = problem.starts[members], problem.ends[members]
            boxes = np.stack([np.c_[x0, lo], np.c_[x1, lo], np.c_[x1, hi], np.c_[x0, hi]], 1)
            ax.add_collection(PolyCollection(boxes, facecolors=colours[members],
                                             edgecolors="face" if many else "black",
                                             rasterized=many, **style))
    everything = np.ones(len(problem), bool) if plan.regions is None else plan.regions == region
    arena = plan.arena_size if plan.regions is None else int(
        (offsets + sizes)[everything].max(initial=0))
    lines = [(arena, "arena size", "tab:red", "-")]
    if plan.regions is None:
        lines.append((plan.lower_bound, "lower bound", "tab:green", "--"))
        if plan.best_bound > plan.lower_bound:
            lines.append((plan.best_bound, "proven bound", "tab:olive", "-."))
    capacity = problem.capacity if plan.regions is None or not problem.regions \
        else problem.regions[region].capacity
    if capacity is not None:
        lines.append((capacity, "capacity", "black", ":"))
    for value, name, line_colour, style in lines:
        ax.axhline(value, color=line_colour, linestyle=style, linewidth=1.2,
                   label=f"{name} {human_bytes(value)}")
    if labels if labels is not None else shown.sum() <= MAX_LABELS:
        _label_boxes(ax, problem, offsets, sizes, np.flatnonzero(shown), arena)
    ax.set_xlim(step_lo, step_hi)
    ax.set_xlabel("time (step)")
    low, high = addresses if addresses is not None else \
        (0, top or max(v for v, *_ in lines) * 1.05 or 1)
    _byte_axis(ax, high, "address", bottom=low)
    _legend_below(ax, [Patch(facecolor=face, label=name) for name, face in legend])
    ax.set_title(title if title is not None else
                 f"{problem.name or 'problem'}: {plan_title(plan)}, arena "
                 f"{human_bytes(plan.arena_size)} ({plan.status}, gap {plan.gap:.1%})")
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
    others = [p for p in wide.columns if p != "exact"]
    for k, planner in enumerate(wide.columns):
        # the reference stands out in black; the others each a colour of its own (no
        # paired shades), hatched past the palette's twelve
        j = others.index(planner) if planner != "exact" else 0
        colour = "black" if planner == "exact" else COMPARISON_COLOURS[j % 12]
        ax.bar(positions + (k - (n - 1) / 2) * width, wide[planner].to_numpy(), width,
               label=planner, color=colour, hatch=None if j < 12 else "//",
               edgecolor="white", linewidth=0.3)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(positions, wide.index, rotation=20, ha="right", rotation_mode="anchor")
    ax.set_ylabel("arena size / lower bound")
    top = float(np.nanmax(wide.to_numpy())) if wide.size else 1.0
    ax.set_ylim(0.95, max(top, 1.0) * 1.03)  # optimal bars (1.0) stay visible
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    ax.set_title(title if title is not None else "arena size relative to the lower bound")
    return ax


__all__ = ["MAX_LABELS", "human_bytes", "inline", "plan_usage", "plot_comparison", "plot_layout",
           "plot_memory", "show_bytes", "to_html", "write_html"]
