"""What a command prints: the summary of a solve, its gaps, aligned rows.

Every gap is to the best bound the solve proved (one definition:
`memplan.plan.gap_of`), printed with the bytes above it (``gap 4.83% (190 KiB)``);
``--json`` prints the same summary as a document.
"""

from __future__ import annotations

from typing import Any

from memplan import api
from memplan.deploy.multimodel import MultiModel
from memplan.deploy.multimodel import report as model_report
from memplan.plan import Plan, gap_of
from memplan.schedule.operator_order import Reordering
from memplan.viz import human_bytes, show_bytes


def order_summary(reordering: Reordering | None) -> dict[str, Any] | None:
    """``--reorder``'s outcome in a summary (None when the file's order was planned)."""
    if reordering is None:
        return None
    return {"method": reordering.method, "file_lower_bound": reordering.original_bound,
            "lower_bound": reordering.bound, "saving": reordering.saving,
            "best_bound": reordering.best_bound, "seconds": reordering.seconds,
            "kept_file_order": bool(reordering.stats.get("kept_file_order")),
            "note": reordering.stats.get("note")}


def order_row(order: dict[str, Any]) -> tuple[str, str]:
    """The printed line of `order_summary`."""
    proven = "" if order["best_bound"] is None else \
        f", proven bound over all orders {human_bytes(order['best_bound'])}"
    return ("operator order", f"{order['method']}: lower bound {human_bytes(order['lower_bound'])}"
                              f" (file order {human_bytes(order['file_lower_bound'])}, saving "
                              f"{order['saving']:.2%}{proven}), {order['seconds']:.2f} s"
                              + (f"; file order kept: {order['note']}" if order["note"] else ""))


def _plan_summary(plan: Plan | None, proven: int) -> dict[str, Any] | None:
    """A plan in the summary; its ``gap`` is to ``proven``, the best bound of the solve."""
    if plan is None:
        return None
    cost = {key: plan.stats[key] for key in ("cost", "cost_optimal") if key in plan.stats}
    return {"planner": plan.planner, "chosen": plan.stats.get("winner", plan.planner),
            "arena_size": plan.arena_size, "status": plan.status,
            "best_bound": plan.best_bound, "gap": gap_of(plan.arena_size, proven),
            "seconds": plan.seconds, "clock_cut": bool(plan.stats.get("clock_cut")), **cost}


def solve_summary(model: str, report: api.SolveReport, written: dict[str, str],
                  multi: MultiModel | None) -> dict[str, Any]:
    """The summary of a solve (``--json`` prints it as is): the bounds, the naive, best
    heuristic and exact arenas, the plan, each model's part of a shared arena."""
    problem = report.problem
    models = None if multi is None else {
        name: {"base": r.base, "arena_size": r.arena_size, "max_live_blocks": r.max_live_blocks}
        for name, r in model_report(multi, report.plan).items()}
    proven = max(p.best_bound for p in (report.plan, report.heuristic, report.exact) if p)
    return {
        "model": model, "buffers": len(problem), "lower_bound": report.plan.lower_bound,
        "best_bound": proven, "capacity": problem.capacity, "naive": report.naive,
        "heuristic": _plan_summary(report.heuristic, proven),
        "exact": _plan_summary(report.exact, proven),
        "exact_skipped": report.skipped_exact, "plan": _plan_summary(report.plan, proven),
        "interrupted": report.interrupted, "seconds": report.seconds,
        "models": models, "written": written,
    }


def gap_text(value: int, bound: int) -> str:
    """``gap 4.83% (190 KiB)``: `memplan.plan.gap_of` and the bytes above ``bound``."""
    share = gap_of(value, bound)
    shown = "<0.01%" if 0 < share < 0.00005 else f"{share:.2%}"
    return f"gap {shown} ({human_bytes(max(value - bound, 0))})"


def _name(plan: dict[str, Any]) -> str:
    """``greedy_by_size (via best)`` when a composite planner chose another's plan."""
    chosen, planner = plan["chosen"], plan["planner"]
    return planner if chosen == planner else f"{chosen} (via {planner})"


def print_rows(rows: list[tuple[str, str]]) -> None:
    """``key  value`` lines, the values aligned."""
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def print_summary(s: dict[str, Any]) -> None:
    """The summary of a solve; every gap is to the best proven bound (one definition:
    `memplan.plan.gap_of`)."""
    plan, exact, proven = s["plan"], s["exact"], s["best_bound"]
    heuristic = s["heuristic"]["arena_size"]
    rows = [("model", f"{s['model']}  ({s['buffers']} buffers)"),
            ("lower bound", show_bytes(s["lower_bound"]))]
    if proven > s["lower_bound"]:
        rows.append(("proven bound", show_bytes(proven)))
    rows += [("naive", f"{show_bytes(s['naive'])}, {gap_text(s['naive'], proven)}"),
             ("best heuristic", f"{show_bytes(heuristic)}, {gap_text(heuristic, proven)}  "
                                f"{_name(s['heuristic'])}")]
    if exact is not None:
        rows.append(("exact", f"{show_bytes(exact['arena_size'])}, "
                              f"{gap_text(exact['arena_size'], proven)}: {exact['status']}, "
                              f"{exact['seconds']:.2f} s"))
    else:
        rows.append(("exact", f"skipped: {s['exact_skipped']}"))
    if exact is not None and exact["clock_cut"]:
        rows.append(("note", "deterministic mode stopped by the clock at the time limit "
                             "(CP-SAT's deterministic time fell behind): a rerun may differ"))
    if s["capacity"] is not None:
        rows.append(("capacity", f"{show_bytes(s['capacity'])}"))
    cost = "" if "cost" not in plan else f"; region cost {plan['cost']:g}" + \
        (" (the least possible)" if plan.get("cost_optimal") else "")
    rows += [("plan", f"{human_bytes(plan['arena_size'])} by {_name(plan)}: "
                      f"{plan['status']}, {gap_text(plan['arena_size'], proven)}{cost}"
                      + ("  (interrupted)" if s["interrupted"] else ""))]
    rows += [(f"  {name}", f"from {human_bytes(m['base'])} to {human_bytes(m['arena_size'])}, "
                           f"at most {m['max_live_blocks']} blocks live")
             for name, m in (s["models"] or {}).items()]
    if s.get("order"):
        rows.append(order_row(s["order"]))
    if s.get("program_plan") is not None:  # a .pte: the arena its own plan takes
        rows.append(("program's own plan", f"{human_bytes(s['program_plan'])} "
                                           f"({s['program_plan']} B)"))
    rows += [("reason", s["reason"])] if s.get("reason") else []
    rows += [("seconds", f"{s['seconds']:.2f}")]
    rows += [(f"wrote {key}", path) for key, path in s["written"].items()]
    if s.get("not_written"):
        rows.append(("not written", f"{', '.join(s['not_written'].values())}: the plan does "
                                    f"not fit the capacity (the files are left as they were)"))
    print_rows(rows)

