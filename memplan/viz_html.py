"""One self-contained HTML page to explore plans: pan and zoom over time x address.

The page needs no server and no network: the data and the viewer (a small
canvas renderer, ``memplan/data/plan_view.js``, with its stylesheet) are inlined.
What it shows::

    [find a tensor] [colour by kind|producer operator] [reset]   steps 0-480, 0-24 MiB
    +-- plan A (e.g. the best heuristic) -------------------------+
    | rectangles: time x address; the gap band between the        |
    | proven bound and the arena; the lower bound; the peak step  |
    +-- plan B (e.g. the exact plan), same axes ------------------+
    +-- live bytes per step, each plan's highest used address ----+

Hovering a buffer shows its id, size, lifetime, offset in each plan, kind,
producer and readers (from `Problem.steps`). Zoom and pan are shared by all
panels. A canvas of our own rather than Bokeh or Plotly: 100k rectangles are
a few typed arrays (~3.5 MB of base64 at 100k buffers) drawn in one path per
colour; a plotting library inlined adds megabytes of script and builds one
object per glyph before the first paint.

Data (`page_data`): the buffer columns as little-endian typed arrays in
base64 (``starts``/``ends`` int32, ``sizes``/offsets float64, exact up to
2**53 bytes), ids and steps as JSON. Cost: O(n + horizon + the tensors the
steps name) in Python; the page decodes in O(n).
"""

from __future__ import annotations

import base64
import html
import json
from importlib import resources
from itertools import chain, repeat

import numpy as np

from memplan.bounds import live_bytes
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import KINDS, Problem

UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def human_bytes(value: float) -> str:
    """``3145728 -> '3 MiB'``, ``1536 -> '1.5 KiB'``."""
    for scale, unit in UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:g} B"


def show_bytes(value: int) -> str:
    """Bytes as every command prints them: ``3.747 MiB (3928576 B)``, ``512 B``."""
    return f"{human_bytes(value)} ({value} B)" if abs(value) >= 1024 else human_bytes(value)


def plan_usage(problem: Problem, plan: Plan) -> np.ndarray:
    """The highest address the plan uses at each step ``0 .. horizon - 1``.

    A range-maximum written offline: each buffer's top (``offset + size``)
    goes into the two power-of-two blocks that cover its lifetime, and each
    level hands its maxima down to the two halves below it. O(n + horizon
    log horizon), vectorised.
    """
    horizon = problem.horizon
    if not len(problem):
        return np.zeros(horizon, np.int64)
    tops = np.asarray(plan.offsets, np.int64) + (problem.sizes if plan.sizes is None
                                                 else np.asarray(plan.sizes, np.int64))
    level = np.log2(problem.ends - problem.starts).astype(np.int64)  # lengths are >= 1
    table = np.zeros((int(level.max()) + 1, horizon), np.int64)
    np.maximum.at(table, (level, problem.starts), tops)
    np.maximum.at(table, (level, problem.ends - (1 << level)), tops)
    for k in range(len(table) - 1, 0, -1):  # a block [i, i + 2^k) is its two halves
        half = 1 << (k - 1)
        np.maximum(table[k - 1], table[k], out=table[k - 1])
        np.maximum(table[k - 1][half:], table[k][:horizon - half], out=table[k - 1][half:])
    return table[0]


def _b64(values, dtype: str | None = None) -> list[str]:
    """``[dtype, base64]`` of little-endian values; byte counts as uint32 when they fit,
    else float64 (exact up to 2**53, past `memplan.limits.MAX_BYTES`)."""
    values = np.asarray(values)
    if dtype is None:
        dtype = "u4" if values.size == 0 or (values.min() >= 0 and values.max() < 1 << 32) \
            else "f8"
    data = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    return [dtype, base64.b64encode(data.tobytes()).decode("ascii")]


def _named(problem: Problem, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(buffer index, step) of every buffer the steps name in ``field`` (reads or writes)."""
    lists = [getattr(step, field) for step in problem.steps]
    counts = np.fromiter(map(len, lists), np.int64, len(lists))
    found = np.fromiter(map(problem._index.get, chain.from_iterable(lists), repeat(-1)),
                        np.int64, int(counts.sum()))
    step = np.repeat(np.arange(len(lists)), counts)
    keep = found >= 0  # other names (weights left out, zero-size tensors) are no buffer
    return found[keep], step[keep]


def _operators(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per buffer: the first step that writes it (-1: none) and the steps that read it
    (CSR: ``readers[pointer[i]:pointer[i + 1]]``, ascending); vectorised, O(names log)."""
    if problem.steps is None:
        return None
    n, horizon = len(problem), max(len(problem.steps), 1)
    written, at = _named(problem, "writes")
    producer = np.full(n, horizon, np.int64)
    np.minimum.at(producer, written, at)
    producer[producer == horizon] = -1
    read, at = _named(problem, "reads")
    pairs = np.unique(read * horizon + at)  # sorted by buffer, then step; repeats once
    pointer = np.searchsorted(pairs // horizon, np.arange(n + 1))
    return producer, pointer, pairs % horizon


def _plan_entry(problem: Problem, plan: Plan, title: str, region: int) -> dict:
    sizes = problem.sizes if plan.sizes is None else plan.sizes
    shown = None if plan.regions is None else _b64(plan.regions == region, "u1")
    return {"title": title, "planner": plan.planner, "status": plan.status,
            "arena_size": int(plan.arena_size), "best_bound": int(plan.best_bound),
            "gap": float(plan.gap), "offsets": _b64(plan.offsets),
            "sizes": None if plan.sizes is None else _b64(sizes),
            "usage": _b64(plan_usage(problem, plan)), "shown": shown}


def page_data(problem: Problem, plans: dict[str, Plan], *, region: int = 0) -> dict:
    """What the page embeds: the problem's columns and each plan, by title (see the module doc)."""
    live = live_bytes(problem)
    operators = _operators(problem)
    kind_index = {k: n for n, k in enumerate(KINDS)}
    return {
        "name": problem.name, "n": len(problem), "horizon": int(problem.horizon),
        "ids": list(problem.ids), "kinds": list(KINDS),
        "steps": None if problem.steps is None else [[s.name, s.op] for s in problem.steps],
        "starts": _b64(problem.starts), "ends": _b64(problem.ends),
        "sizes": _b64(problem.sizes),
        "kind": _b64([kind_index[k] for k in problem.kinds], "u1"),
        "producer": None if operators is None else _b64(operators[0], "i4"),
        "readers_ptr": None if operators is None else _b64(operators[1], "i4"),
        "readers": None if operators is None else _b64(operators[2], "i4"),
        "live": _b64(live), "lower_bound": int(live.max(initial=0)),
        "peak_step": int(live.argmax()) if len(live) else 0,
        "capacity": problem.capacity,
        "plans": [_plan_entry(problem, plan, title, region) for title, plan in plans.items()],
    }


def _asset(name: str) -> str:
    return resources.files("memplan").joinpath("data", name).read_text(encoding="utf-8")


def page(problem: Problem, plans: dict[str, Plan], *, title: str | None = None,
         notes: str = "", region: int = 0) -> str:
    """The HTML page of ``plans`` (title -> plan, all of ``problem``); the first two shown,
    a choice of any two when there are more. ``notes`` (HTML) go under the title."""
    if not plans:
        raise ValueError("page() needs at least one plan")
    data = json.dumps(page_data(problem, plans, region=region), separators=(",", ":"))
    data = data.replace("<", "\\u003c")  # no "</script>" or "<!--" can end the element early
    name = title or f"{problem.name or 'problem'}: {len(problem):,} buffers, " \
                    f"{problem.horizon:,} steps"
    summary = " ".join(
        f"<span><b>{html.escape(t)}</b>: arena {human_bytes(p.arena_size)} "
        f"({p.arena_size:,} B), {p.status}, gap {p.gap:.2%}</span>" for t, p in plans.items())
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(name)}</title><style>{_asset('plan_view.css')}</style></head>"
            f"<body><header><h1>{html.escape(name)}</h1><div class='plans'>{summary}</div>"
            f"{notes}<div class='controls' id='controls'></div></header>"
            f"<div class='legend' id='legend'></div><div id='memplan-view'></div>"
            f"<div id='tip'></div>"
            f"<script type='application/json' id='memplan-data'>{data}</script>"
            f"<script>{_asset('plan_view.js')}</script></body></html>")


def to_html(problem: Problem, plan: Plan, *, other_plan: Plan | None = None,
            title: str | None = None, names: tuple[str, str] | None = None,
            region: int = 0) -> str:
    """``plan`` (and ``other_plan`` beside it, on the same axes) as one HTML page.

    ``names`` titles the two panels (default: the planners' names, with the
    one a composite planner chose). With memory regions, the buffers of
    ``region`` are drawn. Show it in a notebook with
    ``IPython.display.HTML(to_html(...))`` or write it to a file.
    """
    shown = [plan] if other_plan is None else [plan, other_plan]
    titles = list(names) if names is not None else [plan_title(p) for p in shown]
    if len(titles) == 2 and titles[0] == titles[1]:
        titles = [f"{titles[0]} (A)", f"{titles[1]} (B)"]
    return page(problem, dict(zip(titles, shown, strict=False)), title=title, region=region)


def plan_title(plan: Plan) -> str:
    """``best (greedy_by_size)``: the planner, with the one a composite planner chose."""
    winner = plan.stats.get("winner")
    return f"{plan.planner} ({winner})" if winner and winner != plan.planner else plan.planner


def inline(html_page: str, *, height: int = 720):
    """The page in an ``<iframe>`` for a notebook cell (``IPython.display.HTML``): its own
    document, so that several views in one notebook keep their ids and styles apart."""
    from IPython.display import HTML

    return HTML(f'<div><iframe srcdoc="{html.escape(html_page, quote=True)}" '
                f'style="width:100%;height:{height}px;border:1px solid #ddd"></iframe></div>')


def write_html(path, problem: Problem, plan: Plan, **options) -> None:
    """`to_html` into the file ``path``."""
    with open_replacing(path, "w", encoding="utf-8") as handle:
        handle.write(to_html(problem, plan, **options))
