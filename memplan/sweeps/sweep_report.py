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
from pathlib import Path

import pandas as pd

from memplan.viz import human_bytes

FITS = ("optimal", "feasible")
PROVERS = ("exact", "solve")  # planners whose infeasible status may be a proof


def _planned(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"] != "error"]


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
    ax = ax or plt.subplots(figsize=(8, 4.8), layout="constrained")[1]
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
    for k in range(1, len(ends)):  # labels at least a line apart (log scale: a ratio)
        ends[k][0] = max(ends[k][0], ends[k - 1][0] * 1.13)
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


def _percent(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return table.assign(**{c: table[c].map(lambda v: f"{v:+.2%}") for c in columns})


def report_html(table: pd.DataFrame) -> str:
    """The whole page: what was swept, the three answers with figures, errors, all rows."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    planners = ", ".join(sorted(table["planner"].unique()))
    statuses = ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
    parts = [f"<h1>memplan sweep</h1><p>{len(table)} tasks: {table['model'].nunique()} models, "
             f"planners {html.escape(planners)}; {statuses}. Every plan was checked by "
             f"memplan.validate on its worker.</p>"]
    by_batch = arena_by_batch(table)
    parts.append("<h2>Arena vs batch size</h2>")
    if by_batch["batch"].nunique() > 1:
        parts.append(_png(plot_arena_by_batch(table)))
        wide = by_batch.pivot(index="model", columns="batch", values="arena_size")
        parts.append(wide.map(lambda v: human_bytes(int(v)) if v == v else "").to_html())
    else:
        parts.append("<p>One batch size only (sweep --batch 1,2,4,8 for this figure).</p>")
    parts.append("<h2>Planners vs the proven optimum</h2>")
    planners = planners_vs_optimum(table)
    if not planners.empty:
        parts.append(_png(plot_planners(table)))
        parts.append(_percent(planners, ["mean_over", "worst_over"])
                     .assign(hit=planners["hit"].map(lambda v: f"{v:.0%}"))
                     .to_html(index=False))
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
        parts.append(wide.to_html())
    errors = table[table["status"] == "error"]
    if not errors.empty:
        parts.append(f"<h2>Errors ({len(errors)})</h2>")
        parts.append(errors[["model", "bindings", "capacity", "planner", "error"]]
                     .to_html(index=False))
    parts.append("<h2>All rows</h2>")
    parts.append(table.drop(columns=["task", "path"]).to_html(index=False, na_rep=""))
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:"
             "collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>memplan sweep</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def write_report(table: pd.DataFrame, path: str) -> None:
    """Write `report_html` to ``path``."""
    Path(path).write_text(report_html(table), encoding="utf-8")


__all__ = ["arena_by_batch", "capacity_fit", "planners_vs_optimum", "plot_arena_by_batch",
           "plot_capacity", "plot_planners", "report_html", "smallest_fitting_capacity",
           "write_report"]
