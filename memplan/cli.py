"""``memplan``: plan, compare, validate, describe and convert from the command line.

::

    memplan solve [MODEL ...]      heuristics, then the exact planner; a summary
                                   (several models: one arena, --exclusive or --concurrent)
    memplan compare MODEL...       every planner on every model, one table
    memplan validate PROBLEM PLAN  check a plan file against its problem
    memplan info [MODEL]           buffers, lower bound, widths, aliases, largest tensors
    memplan convert MODEL -o F     a model as a problem file (.csv or .json)
    memplan explain [MODEL]        where the peak comes from, a plan's gap, why a capacity
                                   cannot be met, and what would help (`memplan.explain`)
    memplan prove MODEL PLAN.json  run an ONNX model in one arena at that plan's offsets
                                   (a .tflite model: in TFLite-Micro, beside TFLM's planner)
    memplan sweep MODEL...         models x shapes x capacities x planners on Dask (sweep_cli)

Exit codes: 0 success; 1 infeasible or invalid plan; 2 bad usage or bad
input, with one line naming the file and what is wrong (``--debug`` shows the
traceback). The options that steer planning are built from the options
dataclasses (`memplan.api.SolveOptions`, `memplan.frontends.onnx.OnnxOptions`,
`memplan.solver.exact_options.ExactOptions`): one option per field, its metadata help the
help text. The live line and Ctrl-C handling are in `memplan.progress`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from memplan import api
from memplan.deploy.multimodel import MultiModel, flatten
from memplan.deploy.multimodel import report as model_report
from memplan.diagnosis.explain import capacity_line, explain
from memplan.errors import InvalidPlanError, MemplanError, ProblemError
from memplan.export import FORMATS
from memplan.frontends import memplan_json, minimalloc_csv
from memplan.frontends.onnx_options import WEIGHT_MODES, OnnxOptions
from memplan.operator_order import METHODS, Reordering, reorder
from memplan.options import option_help
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.proofs import BACKENDS
from memplan.solver.exact_options import ORDERS, ExactOptions
from memplan.validate import validate
from memplan.viz import human_bytes

OK, FAILED, BAD_INPUT = 0, 1, 2  # exit codes
INTERRUPTED = 130  # Ctrl-C before any plan existed
ONNX_FLAGS = ("inplace", "concat_inplace", "weights", "strict")  # OnnxOptions on the CLI
EXACT_FLAGS = ("deterministic", "strategy", "orders", "log")  # ExactOptions on the CLI
_DIMS_HINT = re.compile(r"""dims=\{(['"])(.*?)\1: \.\.\.\}""")


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
        comment = option_help(field)
        if field.type == "bool":
            parser.add_argument(f"--no-{flag}" if default else f"--{flag}", dest=field.name,
                                action="store_false" if default else "store_true",
                                help=f"turn off: {comment}" if default else comment)
            continue
        kind = {"int": int, "float": float}.get(field.type.split(" |")[0], str)  # tuples: "a,b"
        parser.add_argument(f"--{flag}", dest=field.name, default=default,
                            type=_optional_number(kind) if "None" in field.type else kind,
                            choices=(choices or {}).get(field.name),
                            metavar=None if field.name in (choices or {}) else
                            (metavars or {}).get(field.name, kind.__name__.upper()),
                            help=comment if default is None else f"{comment} (default: "
                            f"{','.join(default) if isinstance(default, tuple) else default})")


def _options_of(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in fields(cls)}


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
    except ProblemError as error:  # the frontend speaks Python: dims={'N': ...}
        raise ProblemError(_DIMS_HINT.sub(r"--dim \2=...", str(error))) from None
    if not own_capacity or not hasattr(args, "capacity"):  # the file's capacity, if any
        return problem
    return problem.replace(capacity=args.capacity)


def _reorder(path: Path, args: argparse.Namespace) -> Reordering:
    """``--reorder``: the model in its best operator order found (kept in ``args.reordering``)."""
    if path.suffix.lower() != ".onnx":
        raise UsageError(f"{path}: --reorder: for ONNX models only")
    if not args.reorder_time_limit > 0:
        raise UsageError(f"--reorder-time-limit must be positive, got {args.reorder_time_limit}")
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
            "kept_file_order": bool(reordering.stats.get("kept_file_order"))}


def _order_row(order: dict[str, Any]) -> tuple[str, str]:
    proven = "" if order["best_bound"] is None else \
        f", proven bound over all orders {human_bytes(order['best_bound'])}"
    return ("operator order", f"{order['method']}: lower bound {human_bytes(order['lower_bound'])}"
                              f" (file order {human_bytes(order['file_lower_bound'])}, saving "
                              f"{order['saving']:.2%}{proven}), {order['seconds']:.2f} s")


# ---------------------------------------------------------------- solve
EXPORT_SUFFIXES = {".h": "c", ".csv": "csv", ".onnx": "onnx", ".json": "json", ".bin": "tflm",
                   ".tflite": "tflite", ".pte": "pte"}
MODEL_EXPORTS = {"onnx": ("annotates", "ONNX"), "tflite": ("writes the plan into", "TFLite"),
                 "pte": ("re-plans", "ExecuTorch .pte")}


def _write_outputs(args: argparse.Namespace, problem: Problem, plan: Plan,
                   model: Path | None, reordered=None) -> dict[str, str]:
    """-o (in the --export format), --csv and --plot; what was written, by option.

    ``model`` is the one model file planned (None for several): the ``onnx`` and
    ``tflite`` exports write the plan into it (into ``reordered``, the model in
    its new operator order, after ``--reorder``), ``tflm`` takes a TFLite
    model's tensor order from it."""
    from memplan.export import export

    written = {}
    if args.output:
        fmt = args.export or EXPORT_SUFFIXES.get(Path(args.output).suffix.lower(), "json")
        suffix = model.suffix.lower() if model is not None else None
        if fmt in MODEL_EXPORTS and suffix != f".{fmt}":
            verb, kind = MODEL_EXPORTS[fmt]
            raise UsageError(f"--export {fmt} {verb} the model: give one {kind} model")
        given = model if fmt in MODEL_EXPORTS or (fmt, suffix) in (("tflm", ".tflite"),
                                                                   ("c", ".onnx")) else None
        if given is not None and reordered is not None:
            given = reordered
        export(problem, plan, fmt, args.output, model=given)
        written[f"output ({fmt})"] = args.output
    if args.csv:
        export(problem, plan, "csv", args.csv)
        written["csv"] = args.csv
    if args.plot:
        try:
            from memplan.viz import plot_layout
            ax = plot_layout(problem, plan)
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'memplan[plot]'") from None
        ax.figure.savefig(args.plot, dpi=120)
        written["plot"] = args.plot
    return written


def _plan_summary(plan: Plan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {"planner": plan.planner, "chosen": plan.stats.get("winner", plan.planner),
            "arena_size": plan.arena_size, "status": plan.status,
            "best_bound": plan.best_bound, "gap": plan.gap, "seconds": plan.seconds}


def _summary(model: str, report: api.SolveReport, written: dict[str, str],
             multi: MultiModel | None) -> dict[str, Any]:
    problem = report.problem
    models = None if multi is None else {
        name: {"base": r.base, "arena_size": r.arena_size, "max_live_blocks": r.max_live_blocks}
        for name, r in model_report(multi, report.plan).items()}
    return {
        "model": model, "buffers": len(problem), "lower_bound": report.plan.lower_bound,
        "capacity": problem.capacity, "naive": report.naive,
        "heuristic": _plan_summary(report.heuristic), "exact": _plan_summary(report.exact),
        "exact_skipped": report.skipped_exact, "plan": _plan_summary(report.plan),
        "interrupted": report.interrupted, "seconds": report.seconds,
        "models": models, "written": written,
    }


def _size(value: int, bound: int) -> str:
    over = f"  ({value / bound - 1:+.2%} over the bound)" if bound and value != bound else ""
    exact = f" ({value} B)" if value >= 1024 else ""
    return f"{human_bytes(value)}{exact}{over}"


def _name(plan: dict[str, Any]) -> str:
    """``greedy_by_size (via best)`` when a composite planner chose another's plan."""
    chosen, planner = plan["chosen"], plan["planner"]
    return planner if chosen == planner else f"{chosen} (via {planner})"


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _print_summary(s: dict[str, Any]) -> None:
    plan, exact, bound = s["plan"], s["exact"], s["lower_bound"]
    rows = [("model", f"{s['model']}  ({s['buffers']} buffers)"),
            ("lower bound", _size(bound, 0)),
            ("naive", _size(s["naive"], bound)),
            ("best heuristic", f"{_size(s['heuristic']['arena_size'], bound)}  "
                               f"{_name(s['heuristic'])}")]
    if exact is not None:
        rows.append(("exact", f"{_size(exact['arena_size'], bound)}  {exact['status']}, "
                              f"proven bound {human_bytes(exact['best_bound'])}, "
                              f"{exact['seconds']:.2f} s"))
    else:
        rows.append(("exact", f"skipped: {s['exact_skipped']}"))
    if s["capacity"] is not None:
        rows.append(("capacity", f"{_size(s['capacity'], 0)}"))
    rows += [("plan", f"{human_bytes(plan['arena_size'])} by {_name(plan)}: "
                      f"{plan['status']}, gap {plan['gap']:.2%}"
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
    model = paths[0] if args.models else f"{api.default_model().name} (bundled)"
    options = api.SolveOptions(**_options_of(args, api.SolveOptions))
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
                             None if reordering is None else reordering.model)
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
            "tflm_head": report.tflm.head, "planned_head": report.planned.head,
            "tail": report.planned.tail, "tflm_min_arena": report.min_arena,
            "planned_min_arena": report.planned_min_arena}, indent=1))
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


def _percent(value: float) -> str:
    return "" if value != value else f"{value:+.2%}"  # NaN: no proven optimum


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
    shown = table.assign(over_lower_bound=table["over_lower_bound"].map(_percent),
                         over_optimum=table["over_optimum"].map(_percent),
                         seconds=table["seconds"].map(lambda s: f"{s:.2f}"))
    shown = shown[["problem", "buffers", "planner", "arena_size", "lower_bound",
                   "over_lower_bound", "over_optimum", "status", "seconds"]]
    print(_markdown(shown) if args.format == "markdown" else shown.to_string(index=False))
    return OK


# ---------------------------------------------------------------- validate
def _read_plan(path: str, problem: Problem) -> Plan | dict[str, int]:
    if Path(path).suffix.lower() == ".csv":
        return minimalloc_csv.read_solution(path, capacity=None)[1]
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
        print(f"{args.plan}: valid, arena {_size(arena, api.lower_bound(problem))}")
    return FAILED if violations else OK


# ---------------------------------------------------------------- info, convert
def cmd_info(args: argparse.Namespace) -> int:
    facts = api.info(_load(args.model, args), largest=args.largest)
    facts["order"] = _order_summary(getattr(args, "reordering", None))
    if args.json:
        print(json.dumps(facts, indent=1))
        return OK
    bound = facts["lower_bound"]
    rows = [("problem", f"{facts['name']}  ({facts['source']})"),
            ("buffers", f"{facts['buffers']} over {facts['steps']} steps ("
                        + ", ".join(f"{n} {kind}" for kind, n in facts["kinds"].items()) + ")"),
            ("lower bound", _size(bound, 0)),
            ("total size", _size(facts["total_size"], bound)),
            ("widths", f"max {human_bytes(facts['max_width'])}, "
                       f"mean {human_bytes(facts['mean_width'])} per step"),
            ("aliases", f"{facts['aliases']} mandatory, {facts['optional_aliases']} optional"),
            ("conflicts", str(facts["conflicts"])), ("pinned", str(facts["pinned"])),
            ("capacity", "none" if facts["capacity"] is None else _size(facts["capacity"], 0))]
    if facts["order"]:
        rows.append(_order_row(facts["order"]))
    _print_rows(rows)
    print("largest tensors:")
    for t in facts["largest"]:
        print(f"  {human_bytes(t['size']):>10}  [{t['start']}, {t['end']})  {t['kind']:<10} "
              f"{t['id']}")
    return OK


def cmd_convert(args: argparse.Namespace) -> int:
    problem = _load(args.model, args)
    suffix = Path(args.output).suffix.lower()
    writers = {".json": memplan_json.write_problem, ".csv": minimalloc_csv.write_csv}
    if suffix not in writers:
        raise UsageError(f"{args.output}: the output must end in .csv or .json")
    writers[suffix](args.output, problem)
    print(f"wrote {args.output}: {len(problem)} buffers")
    return OK


def cmd_explain(args: argparse.Namespace) -> int:
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
    model.add_argument("--alignment", type=int, metavar="BYTES",
                       help="align every offset to this many bytes")
    add_dataclass_options(model, OnnxOptions, only=ONNX_FLAGS, choices={"weights": WEIGHT_MODES})
    reordering = argparse.ArgumentParser(add_help=False)
    order = reordering.add_argument_group("operator order (ONNX models)")
    order.add_argument("--reorder", action="store_true",
                       help="choose the operator order that lowers the peak, then plan it; "
                            "-o model.onnx writes the reordered model")
    order.add_argument("--reorder-method", choices=METHODS, default="fast",
                       help="fast: list scheduling and local search (default); exact: CP-SAT "
                            "over order and layout, warm-started by fast")
    order.add_argument("--reorder-time-limit", type=float, default=5.0, metavar="S",
                       help="seconds for the order search (default 5)")
    capacity = argparse.ArgumentParser(add_help=False)
    capacity.add_argument_group("problem options").add_argument(
        "--capacity", type=_optional_number(int), default=argparse.SUPPRESS, metavar="BYTES",
        help="fit under this many bytes ('none': minimise, ignoring a capacity the file gives)")
    return common, model_parser, reordering, capacity


def _add_solve(sub, common, model_parser, reordering, capacity) -> None:
    """``memplan solve``: its models, sharing mode, planning, exact and output options."""
    solve = sub.add_parser("solve", parents=[common, model_parser, reordering, capacity],
                           help="plan a model (or several in one arena): heuristics, then "
                                "the exact planner")
    solve.add_argument("models", nargs="*", metavar="MODEL",
                       help="ONNX, CSV or JSON (default: a bundled model); several share one "
                            "arena")
    sharing = solve.add_argument_group("several models").add_mutually_exclusive_group()
    sharing.add_argument("--exclusive", dest="mode", action="store_const", const="exclusive",
                         help="the models never run at the same time: they reuse each "
                              "other's memory")
    sharing.add_argument("--concurrent", dest="mode", action="store_const", const="concurrent",
                         help="the models may run at the same time: each its own part")
    add_dataclass_options(solve.add_argument_group("planning options"), api.SolveOptions,
                          metavars={"heuristic": "NAME|all"})
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
    output.add_argument("--plot", metavar="LAYOUT.png", help="draw the layout")
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
                             help="every planner on every model, one table")
    compare.add_argument("models", nargs="+", metavar="MODEL")
    compare.add_argument("--format", choices=("table", "csv", "markdown"), default="table")
    compare.add_argument("--planners", metavar="A,B,...", help="planners to run (default: all)")
    add_dataclass_options(compare, api.SolveOptions,
                          only=("time_limit", "heuristic_time_limit", "workers", "seed"))
    compare.set_defaults(run=cmd_compare)

    check = sub.add_parser("validate", parents=[common, model_parser, capacity],
                           help="check a plan (.json or .csv solution) against its problem")
    check.add_argument("problem")
    check.add_argument("plan")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(run=cmd_validate)

    describe = sub.add_parser("info", parents=[common, model_parser, reordering],
                              help="buffers, lower bound, widths, aliases, largest tensors")
    describe.add_argument("model", nargs="?", help="ONNX, CSV or JSON (default: a bundled model)")
    describe.add_argument("--largest", type=int, default=10, help="how many tensors to list")
    describe.add_argument("--json", action="store_true", help="print as JSON")
    describe.set_defaults(run=cmd_info)

    convert = sub.add_parser("convert", parents=[common, model_parser],
                             help="write a model as a problem file (.csv or .json)")
    convert.add_argument("model")
    convert.add_argument("-o", "--output", required=True, metavar="PROBLEM.csv|.json")
    convert.set_defaults(run=cmd_convert)

    why = sub.add_parser("explain", parents=[common, model_parser, capacity],
                         help="where the peak comes from, a plan's gap, why a capacity "
                              "cannot be met, and what would help")
    why.add_argument("model", nargs="?", help="ONNX, CSV or JSON (default: a bundled model)")
    why.add_argument("--planner", default="best", metavar="NAME|none",
                     help="the plan whose gap to explain (default: best; none: no plan)")
    why.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                     help="seconds for the CP-SAT checks of a capacity (default: 10)")
    why.add_argument("--workers", type=int, default=1, help="CP-SAT threads (default: 1)")
    why.add_argument("--plot", metavar="FILE.png", help="draw the plan's layout with its gap "
                     "marked (no gap: live bytes, peak and capacity)")
    why.add_argument("--json", action="store_true", help="print as JSON")
    why.set_defaults(run=cmd_explain)
    from memplan.sweeps.sweep_cli import add_command as add_sweep

    add_sweep(sub, [common])


def build_parser() -> argparse.ArgumentParser:
    """The ``memplan`` parser: one sub-command per task, options from the options records."""
    shared = _parents()  # (common, model, reordering, capacity)
    parser = argparse.ArgumentParser(
        prog="memplan", description="Ahead-of-time memory planning for neural networks: "
        "every tensor an offset in one arena, as small as it can be, with a proof of how "
        "close to optimal.", epilog="Exit codes: 0 success, 1 infeasible or invalid plan, "
        "2 bad usage or bad input. 'memplan COMMAND -h' for a command's options.")
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
    except KeyboardInterrupt:
        print("memplan: interrupted", file=sys.stderr)
        return INTERRUPTED
    try:
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
        code = FAILED if isinstance(error, InvalidPlanError) else BAD_INPUT
        where = f"{error.filename}: " if isinstance(error, OSError) and error.filename else ""
        message = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(f"memplan {args.command}: error: {where}{message}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print(f"memplan {args.command}: interrupted before any plan", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
