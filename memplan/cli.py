"""``memplan``: plan, compare, validate, describe and convert from the command line.

::

    memplan solve [MODEL ...]      heuristics, then the exact planner; a summary
                                   (several models: one arena, --exclusive or --concurrent)
    memplan compare MODEL...       every planner on every model, one table
    memplan validate PROBLEM PLAN  check a plan file against its problem
    memplan info [MODEL]           buffers, lower bound, widths, aliases, largest tensors
    memplan convert MODEL -o F     a model as a problem file (.csv or .json)
    memplan view PLAN.json         plans as one interactive HTML page (view_cli)
    memplan explain [MODEL]        where the peak comes from, a plan's gap, why a capacity
                                   cannot be met, and what would help (`memplan.explain`)
    memplan prove MODEL PLAN.json  run an ONNX model in one arena at that plan's offsets
                                   (a .tflite model: in TFLite-Micro, beside TFLM's planner)
    memplan sweep MODEL...         models x shapes x capacities x planners on Dask (sweep_cli)

Exit codes: 0 success; 1 infeasible, undecided in the time limit (a capacity
neither met nor ruled out) or invalid plan; 2 bad usage or bad input, with one
line naming the file and what is wrong (``--debug`` shows the traceback).
Every option value goes through `memplan.cli_checks` (the rules of
`memplan.limits`) before any work starts. The options that steer planning are
built from the options dataclasses (`memplan.api.SolveOptions`,
`memplan.frontends.onnx.OnnxOptions`, `memplan.solver.exact_options.ExactOptions`):
one option per field, its metadata help the help text. The live line and Ctrl-C
handling are in `memplan.progress`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import warnings
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any

import memplan
from memplan import api, cli_checks, startup
from memplan.deploy.multimodel import MultiModel, flatten
from memplan.deploy.multimodel import report as model_report
from memplan.diagnosis.explain import capacity_line, explain
from memplan.errors import (
    InvalidPlanError,
    MemplanError,
    ProblemError,
    UnsoundBoundError,
    one_line,
)
from memplan.export import FORMATS
from memplan.frontends import READERS, memplan_json, minimalloc_csv
from memplan.frontends.onnx_options import WEIGHT_MODES, OnnxOptions
from memplan.operator_order import METHODS, Reordering, reorder
from memplan.options import option_help
from memplan.plan import Plan, gap_of
from memplan.problem import Problem
from memplan.proofs import BACKENDS
from memplan.solver.exact_options import ORDERS, ExactOptions
from memplan.validate import validate
from memplan.view_cli import check_figure_path, check_html_path
from memplan.viz import human_bytes, show_bytes

OK, FAILED, BAD_INPUT, INTERNAL = 0, 1, 2, 3  # exit codes (3: a solver defect caught)
INTERRUPTED = 130  # Ctrl-C before any plan existed
LEAST_SOLVE_SHARE = 0.1  # of --time-limit, what the solve keeps however long loading took
ONNX_FLAGS = ("inplace", "concat_inplace", "weights", "strict")  # OnnxOptions on the CLI
EXACT_FLAGS = ("deterministic", "strategy", "orders", "log")  # ExactOptions on the CLI
_DIMS_HINT = re.compile(r"""dims=\{(['"])(.*?)\1: \.\.\.\}""")
_KINDS = {".onnx": "ONNX", ".tflite": "TFLite", ".pte": "ExecuTorch .pte",
          ".csv": "MiniMalloc CSV", ".json": "memplan JSON"}
MODEL_KINDS = ", ".join(_KINDS.get(s, s) for s in READERS[:-1]) + \
    f" or {_KINDS.get(READERS[-1], READERS[-1])}"  # what the frontends read, for the help
FIELD_TYPES = {"time_limit": cli_checks.seconds("--time-limit"),  # one rule: memplan.limits
               "heuristic_time_limit": cli_checks.seconds("--heuristic-time-limit"),
               "workers": cli_checks.count("--workers"), "gap": cli_checks.gap("--gap")}


class UsageError(Exception):
    """Bad usage the parser could not see (an option value that makes no sense)."""


# ---------------------------------------------------------------- options
def _optional_number(kind: type):
    """An argparse type: a number, or ``none`` for no limit."""
    def parse(text: str):
        if text.lower() in ("none", "inf", "unlimited"):
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") \
                from None
    parse.__name__ = kind.__name__
    return parse


def add_dataclass_options(parser: argparse._ActionsContainer, cls: type, *,
                          only: tuple[str, ...] | None = None,
                          metavars: dict[str, str] | None = None,
                          choices: dict[str, tuple[str, ...]] | None = None) -> None:
    """One option per field of the dataclass ``cls`` (or the fields ``only``); the help is
    the field's ``metadata["help"]`` (`memplan.options.option`).

    A bool field that defaults to True becomes ``--no-NAME``, one that
    defaults to False ``--NAME``; ``X | None`` fields accept ``none``.
    """
    for field in fields(cls):
        if only is not None and field.name not in only:
            continue
        flag = field.name.replace("_", "-")
        default = field.default if field.default is not MISSING else None
        comment = option_help(field).replace("%", "%%")  # argparse formats help with %
        if field.type == "bool":
            parser.add_argument(f"--no-{flag}" if default else f"--{flag}", dest=field.name,
                                action="store_false" if default else "store_true",
                                help=cli_checks.negated_help(comment) if default else comment)
            continue
        kind = {"int": int, "float": float}.get(field.type.split(" |")[0], str)  # tuples: "a,b"
        parser.add_argument(f"--{flag}", dest=field.name, default=default,
                            type=FIELD_TYPES.get(field.name) or
                            (_optional_number(kind) if "None" in field.type else kind),
                            choices=(choices or {}).get(field.name),
                            metavar=None if field.name in (choices or {}) else
                            (metavars or {}).get(field.name, kind.__name__.upper()),
                            help=comment if default is None else f"{comment} (default: "
                            f"{','.join(default) if isinstance(default, tuple) else default})")


def _options_of(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in fields(cls)}


def _from_start(options: api.SolveOptions) -> api.SolveOptions:
    """``--time-limit`` bounds the command up to its plan: the seconds since memplan began
    to load (imports, reading and checking the models) come off the solve's limit, of
    which at least `LEAST_SOLVE_SHARE` stays."""
    if options.time_limit is None:
        return options
    spent = time.perf_counter() - startup.STARTED
    return replace(options, time_limit=max(options.time_limit - spent,
                                           LEAST_SOLVE_SHARE * options.time_limit))


def _span(text: str) -> tuple[int, int]:
    """``START:END`` (whole numbers, sizes may carry a unit: ``1MiB:2MiB``), START < END."""
    from memplan.limits import parse_size

    low, colon, high = text.partition(":")
    try:
        span = (parse_size(low), parse_size(high))
    except (ValueError, ProblemError):
        span = None
    if not colon or span is None or not all(isinstance(v, int) for v in span) \
            or not 0 <= span[0] < span[1]:
        raise argparse.ArgumentTypeError(f"expected START:END with 0 <= START < END, "
                                         f"got {text!r}")
    return span


def _dims(pairs: list[str]) -> dict[str, int]:
    dims = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if not name or not (value.isascii() and value.isdigit()):
            raise UsageError(f"--dim expects NAME=VALUE with a whole number, got {pair!r}")
        dims[name] = int(value)
    return dims


def _changed(args: argparse.Namespace, cls: type, names: tuple[str, ...]) -> dict[str, Any]:
    """The defaults of the fields ``names`` of ``cls`` that the command line changed."""
    return {f.name: f.default for f in fields(cls)
            if f.name in names and getattr(args, f.name) != f.default}


def _onnx_options(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ONNX frontend options given on the command line (those not at their default)."""
    given = _changed(args, OnnxOptions, ONNX_FLAGS)
    if given and path.suffix.lower() != ".onnx":
        flags = ", ".join(("--no-" if default is True else "--") + name.replace("_", "-")
                          for name, default in given.items())
        raise UsageError(f"{path}: {flags}: for ONNX models only")
    return {name: getattr(args, name) for name in given}


def _load(name: str | None, args: argparse.Namespace, *, own_capacity: bool = True) -> Problem:
    """The model ``name`` (None: the bundled one) with the model options; ``--capacity``
    becomes its capacity unless ``own_capacity`` is False (models sharing one arena)."""
    path = Path(name) if name is not None else api.default_model()
    try:
        if getattr(args, "reorder", None):
            problem = _reorder(path, args).problem
        else:
            problem = api.load(path, dims=_dims(args.dim), alignment=args.alignment,
                               **_onnx_options(path, args))
    except ProblemError as error:  # the frontend speaks Python: dims={'N': ...}, strict=False
        raise ProblemError(_DIMS_HINT.sub(r"--dim \2=...", str(error)).replace(
            "from_onnx(..., strict=False)", "--no-strict")) from None
    if not own_capacity or not hasattr(args, "capacity"):  # the file's capacity, if any
        return problem
    return problem.replace(capacity=args.capacity)


def _reorder(path: Path, args: argparse.Namespace) -> Reordering:
    """``--reorder``: the model in its best operator order found (kept in ``args.reordering``)."""
    if path.suffix.lower() != ".onnx":
        raise UsageError(f"{path}: --reorder: for ONNX models only")
    args.reordering = reorder(path, method=args.reorder_method,
                              time_limit=args.reorder_time_limit,
                              seed=getattr(args, "seed", 0), dims=_dims(args.dim),
                              alignment=args.alignment, **_onnx_options(path, args))
    return args.reordering


def _order_summary(reordering: Reordering | None) -> dict[str, Any] | None:
    if reordering is None:
        return None
    return {"method": reordering.method, "file_lower_bound": reordering.original_bound,
            "lower_bound": reordering.bound, "saving": reordering.saving,
            "best_bound": reordering.best_bound, "seconds": reordering.seconds,
            "kept_file_order": bool(reordering.stats.get("kept_file_order")),
            "note": reordering.stats.get("note")}


def _order_row(order: dict[str, Any]) -> tuple[str, str]:
    proven = "" if order["best_bound"] is None else \
        f", proven bound over all orders {human_bytes(order['best_bound'])}"
    return ("operator order", f"{order['method']}: lower bound {human_bytes(order['lower_bound'])}"
                              f" (file order {human_bytes(order['file_lower_bound'])}, saving "
                              f"{order['saving']:.2%}{proven}), {order['seconds']:.2f} s"
                              + (f"; file order kept: {order['note']}" if order["note"] else ""))


# ---------------------------------------------------------------- solve
EXPORT_SUFFIXES = {".h": "c", ".csv": "csv", ".onnx": "onnx", ".json": "json", ".bin": "tflm",
                   ".tflite": "tflite", ".pte": "pte"}
MODEL_EXPORTS = {"onnx": ("annotates", "ONNX"), "tflite": ("writes the plan into", "TFLite"),
                 "pte": ("re-plans", "ExecuTorch .pte")}


def _write_outputs(args: argparse.Namespace, problem: Problem, plan: Plan,
                   model: Path | None, reordered=None, heuristic: Plan | None = None
                   ) -> dict[str, str]:
    """-o (in the --export format), --csv, --plot and --html (the best ``heuristic`` plan
    beside the final one when they differ); what was written, by option.

    ``model`` is the one model file planned (None for several): the ``onnx`` and
    ``tflite`` exports write the plan into it (into ``reordered``, the model in
    its new operator order, after ``--reorder``), ``tflm`` takes a TFLite
    model's tensor order from it."""
    from memplan.export import export

    written = {}
    if args.output:
        fmt = _export_format(args)
        suffix = model.suffix.lower() if model is not None else None
        given = model if fmt in MODEL_EXPORTS or (fmt, suffix) in (("tflm", ".tflite"),
                                                                   ("c", ".onnx")) else None
        if given is not None and reordered is not None:
            given = reordered
        export(problem, plan, fmt, args.output, model=given)
        written[f"output ({fmt})"] = args.output
    if args.csv:
        export(problem, plan, "csv", args.csv)
        written["csv"] = args.csv
    if args.plot:  # checked before solving (check_figure_path)
        from memplan.viz import plot_layout

        ax = plot_layout(problem, plan, window=args.window, addresses=args.addresses,
                         colour=args.colour)
        ax.figure.savefig(args.plot, dpi=120)
        written["plot"] = args.plot
    if args.html:
        from memplan.viz_html import write_html

        other = heuristic if heuristic is not None and \
            (heuristic.offsets != plan.offsets).any() else None
        write_html(args.html, problem, plan if other is None else other,
                   other_plan=None if other is None else plan)
        written["html"] = args.html
    return written


def _export_format(args: argparse.Namespace) -> str:
    return args.export or EXPORT_SUFFIXES.get(Path(args.output).suffix.lower(), "json")


def _check_outputs(args: argparse.Namespace, problems: list[Problem],
                   paths: list[str | None]) -> None:
    """Refuse, before solving, an output that could not be written: a missing folder, a
    model export without its one model, a CSV that cannot hold the problem."""
    csv = [option for option, path in (("-o", args.output), ("--csv", args.csv)) if path
           and (option == "--csv" or _export_format(args) == "csv")]
    for option, path in (("-o", args.output), ("--csv", args.csv)):
        if path:
            cli_checks.check_output_path(path, option)
    if args.output:
        fmt = _export_format(args)
        model = Path(paths[0]) if paths[0] else api.default_model()
        if fmt in MODEL_EXPORTS and (len(paths) > 1 or model.suffix.lower() != f".{fmt}"):
            verb, kind = MODEL_EXPORTS[fmt]
            raise UsageError(f"--export {fmt} {verb} the model: give one {kind} model")
    for problem in problems if csv else ():
        reason = minimalloc_csv.csv_refusal(problem, planned=True)
        if reason is not None:
            raise UsageError(f"{' and '.join(csv)}: {reason}")


def _plan_summary(plan: Plan | None, proven: int) -> dict[str, Any] | None:
    """A plan in the summary; its ``gap`` is to ``proven``, the best bound of the solve."""
    if plan is None:
        return None
    cost = {key: plan.stats[key] for key in ("cost", "cost_optimal") if key in plan.stats}
    return {"planner": plan.planner, "chosen": plan.stats.get("winner", plan.planner),
            "arena_size": plan.arena_size, "status": plan.status,
            "best_bound": plan.best_bound, "gap": gap_of(plan.arena_size, proven),
            "seconds": plan.seconds, "clock_cut": bool(plan.stats.get("clock_cut")), **cost}


def _summary(model: str, report: api.SolveReport, written: dict[str, str],
             multi: MultiModel | None) -> dict[str, Any]:
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


def _gap(value: int, bound: int) -> str:
    """``gap 4.83% (190 KiB)``: `memplan.plan.gap_of` and the bytes above ``bound``."""
    share = gap_of(value, bound)
    shown = "<0.01%" if 0 < share < 0.00005 else f"{share:.2%}"
    return f"gap {shown} ({human_bytes(max(value - bound, 0))})"


def _name(plan: dict[str, Any]) -> str:
    """``greedy_by_size (via best)`` when a composite planner chose another's plan."""
    chosen, planner = plan["chosen"], plan["planner"]
    return planner if chosen == planner else f"{chosen} (via {planner})"


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _print_summary(s: dict[str, Any]) -> None:
    """The summary of a solve; every gap is to the best proven bound (one definition:
    `memplan.plan.gap_of`)."""
    plan, exact, proven = s["plan"], s["exact"], s["best_bound"]
    heuristic = s["heuristic"]["arena_size"]
    rows = [("model", f"{s['model']}  ({s['buffers']} buffers)"),
            ("lower bound", show_bytes(s["lower_bound"]))]
    if proven > s["lower_bound"]:
        rows.append(("proven bound", show_bytes(proven)))
    rows += [("naive", f"{show_bytes(s['naive'])}, {_gap(s['naive'], proven)}"),
             ("best heuristic", f"{show_bytes(heuristic)}, {_gap(heuristic, proven)}  "
                                f"{_name(s['heuristic'])}")]
    if exact is not None:
        rows.append(("exact", f"{show_bytes(exact['arena_size'])}, "
                              f"{_gap(exact['arena_size'], proven)}: {exact['status']}, "
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
                      f"{plan['status']}, {_gap(plan['arena_size'], proven)}{cost}"
                      + ("  (interrupted)" if s["interrupted"] else ""))]
    rows += [(f"  {name}", f"from {human_bytes(m['base'])} to {human_bytes(m['arena_size'])}, "
                           f"at most {m['max_live_blocks']} blocks live")
             for name, m in (s["models"] or {}).items()]
    if s.get("order"):
        rows.append(_order_row(s["order"]))
    if s.get("program_plan") is not None:  # a .pte: the arena its own plan takes
        rows.append(("program's own plan", f"{human_bytes(s['program_plan'])} "
                                           f"({s['program_plan']} B)"))
    rows += [("reason", s["reason"])] if s.get("reason") else []
    rows += [("seconds", f"{s['seconds']:.2f}")]
    rows += [(f"wrote {key}", path) for key, path in s["written"].items()]
    _print_rows(rows)


def _model_names(paths: list[str], problems: list[Problem]) -> dict[str, Problem]:
    """Each model by a name for ``name/tensor`` ids: its problem's name, else its file's stem."""
    named: dict[str, Problem] = {}
    for path, problem in zip(paths, problems, strict=True):
        name = (problem.name or Path(path).stem).replace("/", "_")
        named[name if name not in named else f"{name}{len(named)}"] = problem
    return named


def cmd_solve(args: argparse.Namespace) -> int:
    from memplan.progress import LiveLine, on_terminal, stop_on_ctrl_c

    try:  # refuse bad values before any work
        exact_options = ExactOptions.from_kwargs(
            **{name: getattr(args, name) for name in _changed(args, ExactOptions, EXACT_FLAGS)})
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    check_figure_path(args.plot)
    check_html_path(args.html)
    if not args.plot and (args.window or args.addresses or args.colour != "alias"):
        raise UsageError("--window, --addresses and --colour shape the --plot figure: "
                         "give --plot FILE.png")
    paths = args.models or [None]
    if len(paths) > 1 and args.reorder:
        raise UsageError("--reorder: give one ONNX model")
    if args.prove and (len(paths) > 1 or not str(paths[0] or ".onnx").lower().endswith(
            (".onnx", ".tflite", ".pte"))):
        raise UsageError("--prove runs one ONNX model in the plan's arena, one TFLite "
                         "model in TFLite-Micro, or one .pte in ExecuTorch: give one .onnx, "
                         ".tflite or .pte")
    if len(paths) > 1 and args.mode is None:
        raise UsageError("several models share one arena: say --exclusive (they never run "
                         "at the same time) or --concurrent (they may)")
    problems = [_load(path, args, own_capacity=len(paths) == 1) for path in paths]
    _check_outputs(args, problems, paths)
    model = paths[0] if args.models else f"{api.default_model().name} (bundled)"
    options = _from_start(api.SolveOptions(**_options_of(args, api.SolveOptions)))
    live = LiveLine(options.time_limit, enabled=not args.quiet and on_terminal())
    multi = None
    with live, stop_on_ctrl_c() as stop:
        steps = dict(options=options, on_progress=live, stop=stop, exact_options=exact_options)
        if len(problems) == 1:
            report = api.solve_report(problems[0], **steps)
        else:
            capacity = getattr(args, "capacity", None)  # the shared arena's, not each model's
            named = _model_names(paths, problems)
            multi, report = api.solve_models(named, args.mode, capacity=capacity, **steps)
            model = f"{' + '.join(named)} ({args.mode})"
    problem, plan = (report.problem, report.plan) if multi is None else \
        flatten(multi, report.plan)
    single = Path(paths[0]) if paths[0] else api.default_model()
    reordering = getattr(args, "reordering", None)
    onnx_model = single if len(paths) == 1 and single.suffix.lower() == ".onnx" else None
    if onnx_model is not None:  # a plan file says how the model became its problem
        from memplan.proofs.prove import prove_plan, with_model_options  # imports onnx

        plan = with_model_options(plan, _model_options(onnx_model, args))
    written = _write_outputs(args, problem, plan, single if len(paths) == 1 else None,
                             None if reordering is None else reordering.model,
                             report.heuristic if multi is None else None)
    summary = _summary(model, report, written, multi)
    summary["order"] = _order_summary(reordering)
    summary["reason"] = capacity_line(report.problem, report.plan)
    if len(paths) == 1 and single.suffix.lower() == ".pte":  # ExecuTorch's own arena beside
        from memplan.frontends.executorch_pte import pte_layout

        summary["program_plan"] = pte_layout(single).arena_size
    if summary["reason"] and multi is None:
        summary["reason"] += f"; 'memplan explain {' '.join(args.models)}".rstrip() + \
            f" --capacity {report.problem.capacity}' names the tensors"
    proof = tflm = None
    if args.prove and onnx_model is not None:
        proof = prove_plan(onnx_model if reordering is None else reordering.model, problem, plan,
                           plan.stats["model_options"], plan_file=args.output or "the plan")
    elif args.prove and single.suffix.lower() == ".pte":  # both programs in ExecuTorch
        from memplan.proofs.executorch_runtime import prove_program

        proof = prove_program(single, plan, seed=args.seed or 0,
                              plan_file=args.output or "the plan")
    elif args.prove:  # one .tflite model: the proof inside TFLite-Micro
        from memplan.proofs.tflm_arena import prove as prove_in_tflm

        tflm = prove_in_tflm(single, problem, plan, seed=args.seed or 0, bisect=False)
    if args.json:
        proven = proof.to_dict() if proof else tflm and {"proven": tflm.ok, "report": str(tflm)}
        print(json.dumps({**summary, "proof": proven}, indent=1))
    elif not args.quiet:
        _print_summary(summary)
        if proof is not None or tflm is not None:
            print("\n".join(proof.lines()) if proof else tflm)
    if (proof is not None and not proof.ok) or (tflm is not None and not tflm.ok):
        return FAILED
    return OK if api.fits(report.plan) else FAILED  # plans come validated


# ---------------------------------------------------------------- prove
def _model_options(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The model options of the command line, all of them (defaults filled)."""
    from memplan.proofs.prove import model_options

    return model_options(dims=_dims(args.dim), alignment=args.alignment,
                         **_onnx_options(path, args))


def _prove_tflite(path: Path, args: argparse.Namespace) -> int:
    """``memplan prove model.tflite plan.json``: both planners inside TFLite-Micro."""
    from memplan.proofs.tflm_arena import prove_plan_file

    _onnx_options(path, args)  # refuses ONNX-only flags
    if args.dim or args.alignment is not None:
        raise UsageError(f"{path}: --dim and --alignment: the plan file's problem is TFLM's")
    report = prove_plan_file(path, args.plan, seed=args.seed)
    if args.json:
        print(json.dumps({
            "model": str(path), "plan": args.plan, "proven": report.ok,
            "outputs_identical": not report.mismatches, "arena_size": report.arena_size,
            "tflm_head": report.tflm and report.tflm.head,
            "planned_head": report.planned and report.planned.head,
            "tail": report.planned and report.planned.tail, "tflm_min_arena": report.min_arena,
            "planned_min_arena": report.planned_min_arena, "refused": report.refused}, indent=1))
    else:
        print(report)
    return OK if report.ok else FAILED


def cmd_prove(args: argparse.Namespace) -> int:
    path = Path(args.model)
    if path.suffix.lower() == ".tflite":
        return _prove_tflite(path, args)
    if path.suffix.lower() == ".pte":
        from memplan.proofs.executorch_runtime import prove_plan_file

        _onnx_options(path, args)  # refuses ONNX-only flags
        if args.dim or args.alignment is not None:
            raise UsageError(f"{path}: --dim and --alignment: the plan file's problem is "
                             f"the program's")
        proof = prove_plan_file(path, args.plan, seed=args.seed)
        print(json.dumps(proof.to_dict(), indent=1) if args.json else "\n".join(proof.lines()))
        return OK if proof.ok else FAILED
    given = _onnx_options(path, args)
    given.update({"dims": _dims(args.dim)} if args.dim else {})
    given.update({"alignment": args.alignment} if args.alignment is not None else {})
    from memplan.proofs.prove import prove  # imports onnx: only for ONNX models

    proof = prove(path, args.plan, options=given, backend=args.backend, seed=args.seed)
    print(json.dumps(proof.to_dict(), indent=1) if args.json else "\n".join(proof.lines()))
    return OK if proof.ok else FAILED


# ---------------------------------------------------------------- compare
def _markdown(table) -> str:
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(map(str, row)) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def cmd_compare(args: argparse.Namespace) -> int:
    problems = {}
    for path in args.models:
        problem = _load(path, args)
        name = problem.name or Path(path).stem
        problems[name if name not in problems else path] = problem
    planners = None if args.planners is None else args.planners.split(",")
    table = api.compare(problems, planners=planners, time_limit=args.time_limit,
                        heuristic_time_limit=args.heuristic_time_limit, seed=args.seed,
                        workers=args.workers)
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return OK
    shown = table.assign(arena=table["arena_size"].map(show_bytes),
                         lower_bound=table["lower_bound"].map(show_bytes),
                         gap=table["gap"].map(lambda g: f"{g:.2%}"),
                         seconds=table["seconds"].map(lambda s: f"{s:.2f}"))
    shown = shown[["problem", "buffers", "planner", "arena", "lower_bound", "gap", "status",
                   "seconds"]]
    print(_markdown(shown) if args.format == "markdown" else shown.to_string(index=False))
    return OK


# ---------------------------------------------------------------- validate
def _read_plan(path: str, problem: Problem) -> Plan | dict[str, int]:
    if Path(path).suffix.lower() == ".csv":  # one row per alias group: members put back
        return minimalloc_csv.expand_offsets(
            problem, minimalloc_csv.read_solution(path, capacity=None)[1])
    return memplan_json.read_plan(path, problem)


def cmd_validate(args: argparse.Namespace) -> int:
    problem = _load(args.problem, args)
    plan = _read_plan(args.plan, problem)
    violations = validate(problem, plan)
    if args.json:
        print(json.dumps({"problem": args.problem, "plan": args.plan, "valid": not violations,
                          "violations": [dict(kind=v.kind, buffers=list(v.buffers),
                                              message=v.message) for v in violations]}))
    elif violations:
        for violation in violations[:20]:
            print(violation)
        more = " (first 20 shown)" if len(violations) > 20 else ""
        print(f"{args.plan}: INVALID, {len(violations)} violations{more}")
    else:
        arena = plan.arena_size if isinstance(plan, Plan) else \
            max((plan[b.id] + b.size for b in problem.buffers), default=0)
        bound = api.lower_bound(problem)
        print(f"{args.plan}: valid, arena {show_bytes(arena)}, {_gap(arena, bound)} to the lower "
              f"bound")
    return FAILED if violations else OK


# ---------------------------------------------------------------- info, convert
def cmd_info(args: argparse.Namespace) -> int:
    facts = api.info(_load(args.model, args), largest=args.largest)
    facts["order"] = _order_summary(getattr(args, "reordering", None))
    facts["kernels"] = memplan.kernels()
    if args.json:
        print(json.dumps(facts, indent=1))
        return OK
    bound = facts["lower_bound"]
    rows = [("problem", f"{facts['name']}  ({facts['source']})"),
            ("buffers", f"{facts['buffers']} over {facts['steps']} steps ("
                        + ", ".join(f"{n} {kind}" for kind, n in facts["kinds"].items()) + ")"),
            ("lower bound", show_bytes(bound)),
            ("total size", show_bytes(facts["total_size"])),
            ("widths", f"max {human_bytes(facts['max_width'])}, "
                       f"mean {human_bytes(facts['mean_width'])} per step"),
            ("aliases", f"{facts['aliases']} mandatory, {facts['optional_aliases']} optional"),
            ("conflicts", str(facts["conflicts"])), ("pinned", str(facts["pinned"])),
            ("capacity", "none" if facts["capacity"] is None else show_bytes(facts["capacity"]))]
    if facts["order"]:
        rows.append(_order_row(facts["order"]))
    rows.append(("kernels", kernel_line()))
    _print_rows(rows)
    print("largest tensors:")
    for t in facts["largest"]:
        print(f"  {human_bytes(t['size']):>10}  [{t['start']}, {t['end']})  {t['kind']:<10} "
              f"{t['id']}")
    return OK


def kernel_line() -> str:
    """Whether the compiled kernels are loaded, for ``memplan info``."""
    missing = [name for name, loaded in memplan.kernels().items() if not loaded]
    if not missing:
        return "compiled (canonical search, placement pass, order search)"
    return (f"not loaded: {', '.join(missing)} (plans are the same, slower; "
            f"reinstall with a C compiler)")


def cmd_convert(args: argparse.Namespace) -> int:
    suffix = Path(args.output).suffix.lower()
    writers = {".json": memplan_json.write_problem, ".csv": minimalloc_csv.write_csv}
    if suffix not in writers:
        raise UsageError(f"{args.output}: the output must end in .csv or .json")
    cli_checks.check_output_path(args.output, "-o")
    problem = _load(args.model, args)
    writers[suffix](args.output, problem)
    rows = len(minimalloc_csv.csv_rows(problem)[0]) if suffix == ".csv" else len(problem)
    kept = "" if rows == len(problem) else \
        f" in {rows} rows (one per alias group; validate expands a solution back)"
    dropped = int(problem.alias_optional.sum()) if suffix == ".csv" else 0
    left = f"; {dropped} optional aliases left out (CSV has no place for them)" \
        if dropped else ""
    print(f"wrote {args.output}: {len(problem)} buffers{kept}{left}")
    return OK


def cmd_explain(args: argparse.Namespace) -> int:
    check_figure_path(args.plot)
    problem = _load(args.model, args)
    plan = None if args.planner == "none" else api.plan_with(args.planner, problem, seed=0)
    found = explain(problem, plan, time_limit=args.time_limit, workers=args.workers)
    if args.plot:
        try:
            (found.plot_gap() if found.gap else found.plot()).figure.savefig(args.plot, dpi=120)
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'memplan[plot]'") from None
    print(json.dumps(found.to_dict(), indent=1) if args.json else found)
    fits = found.capacity is None or found.capacity.kind == "fits"
    return OK if fits else FAILED


# ---------------------------------------------------------------- parser
def _parents() -> tuple[argparse.ArgumentParser, ...]:
    """The option groups several commands share: (common, model, reordering, capacity)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    model_parser = argparse.ArgumentParser(add_help=False)
    model = model_parser.add_argument_group("model options")
    model.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                       help="bind a symbolic ONNX dimension (repeatable)")
    model.add_argument("--alignment", type=cli_checks.size("--alignment"), metavar="BYTES",
                       help="align every offset to this many bytes (64, 4KiB)")
    add_dataclass_options(model, OnnxOptions, only=ONNX_FLAGS, choices={"weights": WEIGHT_MODES})
    reordering = argparse.ArgumentParser(add_help=False)
    order = reordering.add_argument_group("operator order (ONNX models)")
    order.add_argument("--reorder", action="store_true",
                       help="choose the operator order that lowers the peak, then plan it; "
                            "-o model.onnx writes the reordered model")
    order.add_argument("--reorder-method", choices=METHODS, default="fast",
                       help="fast: list scheduling and local search (default); exact: CP-SAT "
                            "over order and layout, warm-started by fast")
    order.add_argument("--reorder-time-limit", default=5.0, metavar="S",
                       type=cli_checks.seconds("--reorder-time-limit", unlimited=False),
                       help="seconds for the order search (default 5)")
    capacity = argparse.ArgumentParser(add_help=False)
    capacity.add_argument_group("problem options").add_argument(
        "--capacity", type=cli_checks.capacity("--capacity"), default=argparse.SUPPRESS,
        metavar="BYTES",
        help="fit under this many bytes (4096, 512KiB, 1MiB; 'none': minimise, ignoring a "
             "capacity the file gives)")
    return common, model_parser, reordering, capacity


def _add_solve(sub, common, model_parser, reordering, capacity) -> None:
    """``memplan solve``: its models, sharing mode, planning, exact and output options."""
    solve = sub.add_parser("solve", parents=[common, model_parser, reordering, capacity],
                           help="plan a model (or several in one arena): heuristics, then "
                                "the exact planner")
    solve.add_argument("models", nargs="*", metavar="MODEL",
                       help=f"{MODEL_KINDS} (default: a bundled model); several share one "
                            "arena")
    sharing = solve.add_argument_group("several models").add_mutually_exclusive_group()
    sharing.add_argument("--exclusive", dest="mode", action="store_const", const="exclusive",
                         help="the models never run at the same time: they reuse each "
                              "other's memory")
    sharing.add_argument("--concurrent", dest="mode", action="store_const", const="concurrent",
                         help="the models may run at the same time: each its own part")
    add_dataclass_options(solve.add_argument_group("planning options"), api.SolveOptions,
                          metavars={"heuristic": "NAME|all", "gap": "SHARE|BYTES"})
    add_dataclass_options(solve.add_argument_group("exact planner options"), ExactOptions,
                          only=EXACT_FLAGS, choices={"strategy": ("lowest_offset", "none")},
                          metavars={"orders": f"{{{','.join(ORDERS)}}},..."})
    output = solve.add_argument_group("output options")
    output.add_argument("-o", "--output", metavar="FILE",
                        help="write the plan (format: --export, else by suffix: .json, .h, "
                             ".csv, .onnx, .tflite, .pte, .bin)")
    output.add_argument("--export", choices=FORMATS,
                        help="format of -o: json (problem and plan), c (header), tflm "
                             "(offline plan bytes), csv (MiniMalloc), onnx (model metadata), "
                             "tflite (the model with its TFLM offline plan), pte (the ExecuTorch "
                             "program re-planned)")
    output.add_argument("--csv", metavar="PLAN.csv", help="write the plan as MiniMalloc CSV")
    output.add_argument("--plot", metavar="LAYOUT.png", help="draw the layout (.png, .svg, "
                        ".pdf)")
    output.add_argument("--window", type=_span, metavar="START:END",
                        help="--plot only the steps [START, END)")
    output.add_argument("--addresses", type=_span, metavar="LOW:HIGH",
                        help="--plot only the addresses [LOW, HIGH) (bytes, or 1MiB:2MiB)")
    output.add_argument("--colour", choices=("alias", "kind", "operator"), default="alias",
                        help="--plot colours: alias groups (default), tensor kind, or the "
                             "type of the producing operator")
    output.add_argument("--html", metavar="VIEW.html", help="an interactive page of the plan "
                        "(beside the best heuristic plan when the exact planner changed it)")
    output.add_argument("--quiet", action="store_true", help="print nothing (exit code only)")
    output.add_argument("--json", action="store_true", help="print the summary as JSON")
    output.add_argument("--prove", action="store_true", help="run the ONNX model in one arena "
                        "at the plan's offsets (a .tflite model: in TFLite-Micro with the plan "
                        "and with TFLM's own); exit 1 unless every output matches bit for bit")
    solve.set_defaults(run=cmd_solve)


def _add_other_commands(sub, common, model_parser, reordering, capacity) -> None:
    """``memplan prove``, ``compare``, ``validate``, ``info``, ``convert``, ``explain``
    and ``sweep``."""
    proof = sub.add_parser("prove", parents=[common, model_parser],
                           help="run an ONNX model in one arena at the offsets of a plan file (a "
                                ".tflite model: in TFLite-Micro, beside TFLM's own planner); "
                                "exit 1 unless every output matches a normal run bit for bit")
    proof.add_argument("model", help="the .onnx or .tflite model, or the .pte program (run "
                                     "with its own plan and with the plan file's in ExecuTorch)")
    proof.add_argument("plan", help="its plan (memplan JSON, as 'memplan solve -o' writes); "
                                    "the model options it stores apply")
    proof.add_argument("--backend", choices=BACKENDS, default="onnxruntime",
                       help="what runs the nodes (default: onnxruntime)")
    proof.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    proof.add_argument("--json", action="store_true", help="print the result as JSON")
    proof.set_defaults(run=cmd_prove)

    compare = sub.add_parser("compare", parents=[common, model_parser, capacity],
                             help="every planner on every model, one table (gap: to the best "
                                  "bound any planner proved for that model)")
    compare.add_argument("models", nargs="+", metavar="MODEL", help=MODEL_KINDS)
    compare.add_argument("--format", choices=("table", "csv", "markdown"), default="table")
    compare.add_argument("--planners", metavar="A,B,...", help="planners to run (default: all)")
    add_dataclass_options(compare, api.SolveOptions,
                          only=("time_limit", "heuristic_time_limit", "workers", "seed"))
    compare.set_defaults(run=cmd_compare)

    check = sub.add_parser("validate", parents=[common, model_parser, capacity],
                           help="check a plan (.json or .csv solution) against its problem")
    check.add_argument("problem", help=MODEL_KINDS)
    check.add_argument("plan")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(run=cmd_validate)

    describe = sub.add_parser("info", parents=[common, model_parser, reordering],
                              help="buffers, lower bound, widths, aliases, largest tensors")
    describe.add_argument("model", nargs="?", help=f"{MODEL_KINDS} (default: a bundled model)")
    describe.add_argument("--largest", type=int, default=10, help="how many tensors to list")
    describe.add_argument("--json", action="store_true", help="print as JSON")
    describe.set_defaults(run=cmd_info)

    convert = sub.add_parser("convert", parents=[common, model_parser],
                             help="write a model as a problem file (.csv or .json)")
    convert.add_argument("model", help=MODEL_KINDS)
    convert.add_argument("-o", "--output", required=True, metavar="PROBLEM.csv|.json")
    convert.set_defaults(run=cmd_convert)

    why = sub.add_parser("explain", parents=[common, model_parser, capacity],
                         help="where the peak comes from, a plan's gap, why a capacity "
                              "cannot be met, and what would help",
                         epilog="Exit codes: 0 no capacity, or it fits; 1 the capacity is "
                                "not met: ruled out (live load, pins, packing) or undecided "
                                "within --time-limit (the JSON's capacity.kind says which); "
                                "2 bad usage or bad input.")
    why.add_argument("model", nargs="?", help=f"{MODEL_KINDS} (default: a bundled model)")
    why.add_argument("--planner", default="best", metavar="NAME|none",
                     help="the plan whose gap to explain (default: best; none: no plan)")
    why.add_argument("--time-limit", default=10.0, metavar="S",
                     type=cli_checks.seconds("--time-limit", unlimited=False),
                     help="seconds for the CP-SAT checks of a capacity (default: 10)")
    why.add_argument("--workers", type=cli_checks.count("--workers"), default=1,
                     help="CP-SAT threads (default: 1)")
    why.add_argument("--plot", metavar="FILE.png", help="draw the plan's layout with its gap "
                     "marked (no gap: live bytes, peak and capacity)")
    why.add_argument("--json", action="store_true", help="print as JSON")
    why.set_defaults(run=cmd_explain)
    from memplan.sweeps.sweep_cli import add_command as add_sweep
    from memplan.view_cli import add_command as add_view

    add_sweep(sub, [common])
    add_view(sub, [common, model_parser],
             load=lambda name, args: _load(name, args, own_capacity=False))


def build_parser() -> argparse.ArgumentParser:
    """The ``memplan`` parser: one sub-command per task, options from the options records."""
    shared = _parents()  # (common, model, reordering, capacity)
    parser = cli_checks.Parser(
        prog="memplan", description="Ahead-of-time memory planning for neural networks: "
        "every tensor an offset in one arena, as small as it can be, with a proof of how "
        "close to optimal.", epilog="Exit codes: 0 success, 1 infeasible, undecided within "
        "the time limit, or invalid plan, 2 bad usage or bad input, 3 a solver defect caught "
        "(please report it). 'memplan COMMAND -h' for a command's options.")
    parser.add_argument("--version", action="version", version=f"memplan {memplan.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_solve(sub, *shared)
    _add_other_commands(sub, *shared)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # imports are done
    except ValueError:  # not the main thread: Ctrl-C is not ours to handle
        pass
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except SystemExit as stop:  # bad usage (one line printed), or --help: its exit code
        return stop.code if isinstance(stop.code, int) else BAD_INPUT
    except KeyboardInterrupt:
        print("memplan: interrupted", file=sys.stderr)
        return INTERRUPTED
    try:
        with warnings.catch_warnings():  # a warning is one line too, and names the command
            warnings.showwarning = lambda message, *_, **__: print(
                f"memplan {args.command}: warning: {one_line(message)}", file=sys.stderr)
            return args.run(args)
    except BrokenPipeError:  # the reader went away (``memplan info ... | head``)
        sys.stdout = open(os.devnull, "w")  # Python's documented recipe
        return OK
    except (MemplanError, UsageError, OSError, RecursionError, MemoryError) as error:
        if args.debug:
            raise
        if isinstance(error, RecursionError | MemoryError):
            error = UsageError(f"the input is too large or too deeply nested "
                               f"({type(error).__name__})")
        code = FAILED if isinstance(error, InvalidPlanError) else \
            INTERNAL if isinstance(error, UnsoundBoundError) else BAD_INPUT
        where = f"{error.filename}: " if isinstance(error, OSError) and error.filename else ""
        message = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(f"memplan {args.command}: error: {where}{one_line(message)}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print(f"memplan {args.command}: interrupted before any plan", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
