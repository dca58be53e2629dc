"""Answers from a sweep's rows: the three questions, as tables, figures and one HTML page.

A sweep's rows (`memplan.sweeps.sweep.sweep`) answer the questions it was run for;
these functions compute the answers (pandas tables a notebook can show) and
`write_report` puts them on one self-contained page (figures embedded as PNG):

- `arena_by_batch`: per model and batch size, the smallest fitting arena any
  planner found and the lower bound. How the arena grows with the batch;
- `planners_vs_optimum`: per planner, how far its arena is above the proven
  optimum of each (model, shape, capacity): the optimum is proven when the
  smallest arena found meets the best bound some planner proved; where none
  is proven, the comparison is against the lower bound (and says so);
- `capacity_fit`: for a capacity sweep, per capacity and model (and shape),
  whether some plan fits, and where none does, what the exact planner proved
  (``proven: needs >= B`` when its bound exceeds the capacity);
  `smallest_fitting_capacity` is the smallest tested capacity where every
  model fits.

Rows with errors are left out of the answers (the page lists them). Cost:
a few group-bys over the rows; one figure per question.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

import pandas as pd

from memplan.output_files import open_replacing
from memplan.viz import human_bytes

FITS = ("optimal", "feasible")
PROVERS = ("exact", "solve")  # planners whose infeasible status may be a proof


def _planned(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that hold a plan, each model told apart by its file (`model_labels`)."""
    return table[table["status"] != "error"].assign(model=model_labels)


def model_labels(table: pd.DataFrame) -> pd.Series:
    """Each row's model, told apart by file: its name, or its path where files that differ
    share that name (rows of older sweeps name a model by its stem alone)."""
    if "path" not in table.columns:
        return table["model"]
    paths = table["path"].fillna(table["model"])
    shared = paths.groupby(table["model"]).transform("nunique") > 1
    return table["model"].where(~shared, paths)


def _shape(table: pd.DataFrame) -> pd.Series:
    return table["model"] + table["bindings"].map(lambda b: f" [{b}]" if b else "")


def arena_by_batch(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and batch (rows planned without a capacity): best arena and lower bound."""
    rows = _planned(table)
    rows = rows[rows["capacity"].isna() & rows["status"].isin(FITS) & rows["batch"].notna()]
    return (rows.groupby(["model", "batch"], as_index=False)
            .agg(arena_size=("arena_size", "min"), lower_bound=("lower_bound", "max"),
                 planner=("planner", "first"))
            .drop(columns="planner"))


def planners_vs_optimum(table: pd.DataFrame) -> pd.DataFrame:
    """Per planner: mean and worst arena above the reference, and how often it hit it.

    The reference of a (model, shape, capacity) is the proven optimum when
    the smallest arena found meets the largest proven bound, else the lower
    bound; ``reference`` says which was used (``optimum`` when all were).
    Rows planned without a capacity are compared when there are any (under a
    capacity the exact planner stops at the first plan that fits).
    """
    rows = _planned(table)
    if rows["capacity"].isna().any():
        rows = rows[rows["capacity"].isna()]
    rows = rows[rows["status"].isin(FITS)].copy()
    if rows.empty:
        return pd.DataFrame(columns=["planner", "problems", "mean_over", "worst_over",
                                     "hit", "reference"])
    keys = ["model", "bindings", "capacity"]
    group = rows.groupby(keys, dropna=False)
    smallest = group["arena_size"].transform("min")
    proven = group["best_bound"].transform("max")
    optimum = smallest <= proven
    reference = smallest.where(optimum, rows["lower_bound"])
    rows["over"] = (rows["arena_size"] / reference - 1).astype(float)
    rows["proven"] = optimum
    result = rows.groupby("planner", as_index=False).agg(
        problems=("over", "size"), mean_over=("over", "mean"), worst_over=("over", "max"),
        hit=("over", lambda s: float((s <= 0).mean())), proven=("proven", "all"))
    result["reference"] = result.pop("proven").map({True: "optimum",
                                                    False: "optimum or lower bound"})
    return result.sort_values(["mean_over", "planner"]).reset_index(drop=True)


def capacity_fit(table: pd.DataFrame) -> pd.DataFrame:
    """Per capacity and model shape: ``fits`` (some plan within it) and the exact verdict.

    ``verdict``: ``fits (planner)``; ``proven: needs >= B`` (the exact planner's
    bound exceeds the capacity); ``not proven`` (no plan fits, no proof).
    """
    rows = _planned(table)
    rows = rows[rows["capacity"].notna()].copy()
    rows["shape"] = _shape(rows)
    records = []
    for (capacity, shape), group in rows.groupby(["capacity", "shape"]):
        fitting = group[group["status"].isin(FITS)]
        proofs = group[group["planner"].isin(PROVERS) & (group["best_bound"] > capacity)]
        if not fitting.empty:
            best = fitting.loc[fitting["arena_size"].idxmin()]
            verdict = f"fits ({best['planner']}, {human_bytes(int(best['arena_size']))})"
        elif not proofs.empty:
            verdict = f"proven: needs >= {human_bytes(int(proofs['best_bound'].max()))}"
        else:
            verdict = "not proven"
        records.append({"capacity": int(capacity), "shape": shape,
                        "fits": not fitting.empty, "verdict": verdict})
    return pd.DataFrame(records, columns=["capacity", "shape", "fits", "verdict"])


def smallest_fitting_capacity(table: pd.DataFrame) -> int | None:
    """The smallest tested capacity at which every model shape has a fitting plan, or None."""
    fit = capacity_fit(table)
    if fit.empty:
        return None
    shapes = fit["shape"].nunique()
    every = fit.groupby("capacity").agg(fits=("fits", "sum"), shapes=("shape", "nunique"))
    good = every[(every["fits"] == every["shapes"]) & (every["shapes"] == shapes)]
    return int(good.index.min()) if not good.empty else None


# ------------------------------------------------------------------ figures
def plot_arena_by_batch(table: pd.DataFrame, ax=None):
    """Best arena against the batch size, one line per model, each named at its right end.

    The lower bound is a wide pale band of the model's colour under its line, so it
    shows where the two meet (a dotted line would hide under the arena). Models are
    nudged apart along x (a few percent) so that equal arenas do not hide each other.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    data = arena_by_batch(table)
    ax = ax or plt.subplots(figsize=(8, 4.8))[1]
    models = list(data.groupby("model"))
    colours = [plt.get_cmap("tab10")(k % 10) for k in range(len(models))]
    markers = "osD^vP*Xph"
    ends = []
    for k, (model, rows) in enumerate(models):
        x = rows["batch"].to_numpy() * 1.025 ** (k - (len(models) - 1) / 2)
        ax.plot(x, rows["lower_bound"] / 2**20, lw=8, alpha=0.22, color=colours[k],
                solid_capstyle="round")
        ax.plot(x, rows["arena_size"] / 2**20, lw=1.3, marker=markers[k % len(markers)],
                ms=5, color=colours[k])
        ends.append([float(rows["arena_size"].iloc[-1]) / 2**20, model, colours[k]])
    ends.sort()
    values = pd.concat([data["arena_size"], data["lower_bound"]]) / 2**20
    apart = max(1.05, float(values.max() / values.min()) ** (1 / 24)) if len(values) else 1.1
    for k in range(1, len(ends)):  # labels a line apart: on a log axis, a ratio of the span
        ends[k][0] = max(ends[k][0], ends[k - 1][0] * apart)
    right = float(data["batch"].max()) * 1.15 if len(data) else 1.0
    for y, model, colour in ends:  # one column of names right of the lines
        ax.text(right, y, model, va="center", fontsize=8, color=colour)
    ax.set(xlabel="batch size", ylabel="arena (MiB)", xscale="log", yscale="log",
           title="best arena per model vs batch size")
    batches = sorted(data["batch"].unique())
    if batches:
        ax.set_xlim(batches[0] / 1.2, batches[-1] * 2.3)  # room for the names
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    ax.legend(handles=[Line2D([], [], color="0.3", marker="o", ms=5, label="best arena"),
                       Line2D([], [], color="0.3", lw=8, alpha=0.22,
                              label="lower bound (pale band)")],
              loc="upper left", fontsize=8, frameon=False)
    return ax


def plot_planners(table: pd.DataFrame, ax=None):
    """Mean and worst arena above the optimum, per planner (bars, percent)."""
    import matplotlib.pyplot as plt

    data = planners_vs_optimum(table)
    ax = ax or plt.subplots(figsize=(7, 4.2))[1]
    y = range(len(data))
    ax.barh([i + 0.2 for i in y], data["worst_over"] * 100, height=0.4, label="worst",
            color="#d62728")
    ax.barh([i - 0.2 for i in y], data["mean_over"] * 100, height=0.4, label="mean",
            color="#1f77b4")
    ax.set_yticks(list(y), data["planner"])
    ax.invert_yaxis()
    ax.set(xlabel="arena above the proven optimum (%)", title="planners vs the optimum")
    ax.legend()
    return ax


def plot_capacity(table: pd.DataFrame, ax=None):
    """Each model shape's smallest fitting arena, with the tested capacities as lines."""
    import matplotlib.pyplot as plt

    rows = _planned(table)
    rows = rows[rows["status"].isin(FITS)].assign(shape=lambda t: _shape(t))
    need = rows.groupby("shape")["arena_size"].min().sort_values()
    ax = ax or plt.subplots(figsize=(7, max(2.5, 0.3 * len(need) + 1)))[1]
    ax.barh(range(len(need)), need / 2**20, color="#7f7f7f")
    ax.set_yticks(range(len(need)), need.index, fontsize=7)
    for capacity in sorted(table["capacity"].dropna().unique()):
        ax.axvline(capacity / 2**20, ls="--", lw=1)
        ax.annotate(human_bytes(int(capacity)), (capacity / 2**20, len(need) - 0.5),
                    fontsize=7, rotation=90, va="top")
    ax.set(xlabel="smallest arena found (MiB)", title="what each model needs vs the "
           "capacities tested")
    return ax


# ------------------------------------------------------------------ the page
def _png(ax) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    ax.figure.tight_layout()
    ax.figure.savefig(buffer, format="png", dpi=100)
    plt.close(ax.figure)
    return f'<img src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


# ------------------------------------------------------------------ tables
STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:1.6em;border-bottom:1px solid #ddd}
img{max-width:100%}table{border-collapse:collapse;font-size:12.5px;margin:.6em 0}
th{background:#f3f4f6;text-align:left;padding:4px 8px;border-bottom:2px solid #ccc;
cursor:pointer;white-space:nowrap;user-select:none}th:after{content:" \\2195";color:#aaa}
td{padding:3px 8px;border-bottom:1px solid #eee;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr:hover td{background:#f7fbff}
.optimal{color:#1a7f37}.error,.infeasible{color:#b00}.unknown{color:#a60}
.wrap td{white-space:normal}"""
SORT = """document.querySelectorAll("table.sortable th").forEach(th => th.onclick = () => {
const col = th.cellIndex, body = th.closest("table").tBodies[0], rows = [...body.rows];
const up = th.dataset.up !== "1";
th.dataset.up = up ? "1" : "0";
const key = r => { const c = r.cells[col], v = c.dataset.v ?? c.textContent;
  return v === "" || isNaN(v) ? v : +v; };
rows.sort((a, b) => { const x = key(a), y = key(b);
  const c = typeof x === typeof y ? (x < y ? -1 : x > y) : (typeof x === "number" ? -1 : 1);
  return up ? c : -c; });
rows.forEach(r => body.append(r)); });"""


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _cell(value, kind: str) -> str:
    """One ``<td>``: shown in human units, sorted by the raw value (``data-v``); no ``<NA>``."""
    if _missing(value):
        return "<td data-v=''></td>"
    number = kind in ("bytes", "percent", "seconds", "count")
    shown = {"bytes": lambda v: human_bytes(int(v)), "percent": lambda v: f"{v:+.2%}",
             "seconds": lambda v: f"{v:.2f} s", "count": lambda v: f"{int(v):,}"}.get(
        kind, str)(value)
    if kind == "link":
        return f"<td><a href='{html.escape(value)}'>view</a></td>"
    extra = f" class='{html.escape(shown)}'" if kind == "status" else " class='n'" * number
    raw = f" data-v='{float(value)!r}'" if number else ""
    return f"<td{extra}{raw}>{html.escape(shown)}</td>"


def _table(frame: pd.DataFrame, kinds: dict[str, str] | None = None, *,
           index: bool = False) -> str:
    """``frame`` as a styled table sortable by any column (a click on its header);
    ``kinds`` says how a column is shown: bytes, percent, seconds, count, status, link."""
    kinds = kinds or {}
    if index:
        frame = frame.reset_index()
    head = "".join(f"<th>{html.escape(str(c).replace('_', ' '))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(_cell(v, kinds.get(c, "text"))
                                    for c, v in zip(frame.columns, row, strict=True)) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


ROW_KINDS = {"capacity": "bytes", "buffers": "count", "lower_bound": "bytes",
             "arena_size": "bytes", "best_bound": "bytes", "over_bound": "percent",
             "gap": "percent", "seconds": "seconds", "total_seconds": "seconds",
             "peak_memory": "bytes", "status": "status", "plan": "link"}


def _rows(table: pd.DataFrame, links: dict[str, str]) -> pd.DataFrame:
    """The rows as the page lists them: sizes and ratios readable, a plan link each."""
    shown = table.assign(over_bound=(table["arena_size"] / table["lower_bound"] - 1)
                         .astype("Float64"))
    shown["plan"] = [links.get(key) for key in table["task"]]
    columns = ["model", "bindings", "capacity", "planner", "status", "buffers", "lower_bound",
               "arena_size", "over_bound", "gap", "seconds", "peak_memory", "winner", "plan"]
    return shown[[c for c in columns if c in shown.columns]]


def report_html(table: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """The whole page: what was swept, the three answers with figures, errors, all rows
    (each with a link to its plan's interactive view, by task key in ``links``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    links = links or {}
    planners = ", ".join(sorted(table["planner"].unique()))
    statuses = ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
    models = model_labels(table).nunique()
    parts = [f"<h1>memplan sweep</h1><p>{len(table)} tasks: {models} models, "
             f"planners {html.escape(planners)}; {statuses}. Every plan was checked by "
             f"memplan.validate on its worker. Click a column's header to sort by it"
             + ("; <i>view</i> opens a row's plan (pan, zoom, hover a tensor)" if links
                else "") + ".</p>"]
    by_batch = arena_by_batch(table)
    parts.append("<h2>Arena vs batch size</h2>")
    if by_batch["batch"].nunique() > 1:
        parts.append(_png(plot_arena_by_batch(table)))
        wide = by_batch.pivot(index="model", columns="batch", values="arena_size")
        wide.columns = [f"batch {b}" for b in wide.columns]
        parts.append(_table(wide, dict.fromkeys(wide.columns, "bytes"), index=True))
    else:
        parts.append("<p>One batch size only (sweep --batch 1,2,4,8 for this figure).</p>")
    parts.append("<h2>Planners vs the proven optimum</h2>")
    planners = planners_vs_optimum(table)
    if not planners.empty:
        parts.append(_png(plot_planners(table)))
        parts.append(_table(planners.assign(hit=planners["hit"] * 100),
                            {"mean_over": "percent", "worst_over": "percent", "hit": "count",
                             "problems": "count"}).replace("<th>hit</th>", "<th>hit %</th>"))
    parts.append("<h2>Smallest capacity that fits every model</h2>")
    fit = capacity_fit(table)
    if fit.empty:
        parts.append("<p>No capacity was swept (sweep --capacity 256KiB,1MiB,...).</p>")
    else:
        smallest = smallest_fitting_capacity(table)
        parts.append("<p><b>" + (f"{human_bytes(smallest)} ({smallest} B)" if smallest else
                                 "none of the tested capacities") + "</b> fits every model.</p>")
        parts.append(_png(plot_capacity(table)))
        wide = fit.pivot(index="shape", columns="capacity", values="verdict")
        wide.columns = [human_bytes(int(c)) for c in wide.columns]
        parts.append(_table(wide, index=True))
    errors = table[table["status"] == "error"]
    if not errors.empty:
        parts.append(f"<h2>Errors ({len(errors)})</h2><div class='wrap'>")
        parts.append(_table(errors[["model", "bindings", "capacity", "planner", "error"]],
                            ROW_KINDS) + "</div>")
    parts.append("<h2>All rows</h2>")
    parts.append(_table(_rows(table, links), ROW_KINDS))
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>memplan sweep</title><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}<script>{SORT}</script></body></html>")


def _load_shape(task: dict):
    """The problem of a saved plan's task, as its worker loaded it (and with its cache)."""
    from memplan.sweeps.sweep_tasks import _load

    stat = os.stat(task["path"])
    return _load(task["path"], (stat.st_mtime_ns, stat.st_size),
                 tuple(map(tuple, task["dims"])), task["batch"], task["alignment"])


def write_report(table: pd.DataFrame, path: str, plans: str | None = None) -> None:
    """Write `report_html` to ``path``; with ``plans`` (the folder the sweep's tasks wrote
    their plans to), the interactive plan pages beside it in ``<name>_files/``."""
    links = {}
    if plans is not None:
        from memplan.sweeps.sweep_plans import write_plan_pages

        target = Path(path)
        links = write_plan_pages(list(table["task"].dropna()), plans,
                                 target.with_name(f"{target.stem}_files"), _load_shape)
    with open_replacing(path, "w", encoding="utf-8") as handle:
        handle.write(report_html(table, links))


__all__ = ["arena_by_batch", "capacity_fit", "model_labels", "planners_vs_optimum",
           "plot_arena_by_batch", "plot_capacity", "plot_planners", "report_html",
           "smallest_fitting_capacity", "write_report"]
